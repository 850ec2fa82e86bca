"""The one JSON decoder for input: lines, nested payloads, frames and entries.

Every piece of JSON that arrives from outside (an input line, the ``payload``
string of a Mastodon streaming event, a WebSocket frame, a Redis stream
entry, a response page cut again) is decoded here, so one set of limits
holds at every depth, and every way the standard decoder can fail becomes an
``InvalidRecordError`` whose reason a user can act on: no RecursionError,
no ValueError that advises ``sys.set_int_max_str_digits``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from ._compiled import chosen, kernel
from ._exceptions import InvalidRecordError
from ._wording import a_type

__all__ = ["MAX_DEPTH", "depth_ok", "loads", "loads_object", "plain_object"]

MAX_DEPTH = 64

# A JSON string, escapes and all: what the depth of a text is counted outside.
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)  # possessive: nothing to backtrack
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def depth_ok(text: str) -> bool:
    """Whether no bracket outside a string is more than ``MAX_DEPTH`` deep.

    json would recurse until RecursionError on hostile nesting, and a record
    nested hundreds deep breaks what handles it after (pickling it, for one),
    so such texts are rejected first. Counting brackets in C clears most
    lines. Records with more brackets than that (a Twitter v2 page of 100
    tweets has thousands) are measured in C and numpy: strings cut out (an
    unterminated one runs to the end of the line), the brackets kept, and
    their running depth, where a character loop in Python was slow."""
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return True
    outside = _JSON_STRING.sub("", text)
    unterminated = outside.find('"')
    if unterminated >= 0:
        outside = outside[:unterminated]
    brackets = outside.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= MAX_DEPTH:
        return True
    import numpy as np  # only here: the light imports of this package do not load it

    steps = np.frombuffer(brackets, dtype=np.uint8)
    depth = np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1))
    return int(depth.max()) <= MAX_DEPTH


def loads(text: str | bytes, where: str = "") -> Any:
    """``text`` decoded, or InvalidRecordError saying what is wrong.

    ``where`` starts each reason and says where the JSON sits
    (``"streaming update payload: "``), so a nested failure reads as one."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordError(f"{where}invalid UTF-8 at byte {exc.start}") from None
    value = _quick_loads(text, where)
    if value is not _LEFT_TO_JSON:
        return value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # json's own messages may end in "at" ("Unterminated string starting at")
        raise InvalidRecordError(f"{where}broken JSON: {exc.msg.removesuffix(' at')} at character {exc.pos}") from None
    except RecursionError:
        raise InvalidRecordError(f"{where}JSON nested too deeply to read") from None
    except ValueError:
        # Python reads integers of at most 4,300 digits; its message advises a
        # setting of the interpreter, which nobody feeding a stream can act on.
        raise InvalidRecordError(f"{where}JSON number too long (more than 4,300 digits)") from None


def loads_object(text: str | bytes, where: str = "") -> dict[str, Any]:
    """``loads``, for text that must hold a JSON object."""
    value = loads(text, where)
    if not isinstance(value, dict):
        raise InvalidRecordError(f"{where}JSON value is {a_type(value)}, not an object")
    return value


def _c_quick_loads(text: str, where: str) -> Any:
    """orjson's reading of ``text``, where it reads as json would: 2-3x
    json's speed on a platform's payloads (tests/test_json.py holds the two
    to the same values). Not a text that may hold an integer past 64 bits,
    which orjson reads as a float and json exactly; and what orjson refuses
    (NaN, lone surrogates, broken JSON) json decides, so values and reasons
    are json's: ``_LEFT_TO_JSON`` for those."""
    depth, long_number = kernel.json_scan(text)  # depth_ok's depth, in C
    if depth > MAX_DEPTH:
        raise InvalidRecordError(f"{where}JSON nested deeper than {MAX_DEPTH} levels")
    if not long_number:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return _LEFT_TO_JSON


def _py_quick_loads(text: str, where: str) -> Any:
    """Without the kernel's scan, json reads every text, once its depth is checked."""
    if not depth_ok(text):
        raise InvalidRecordError(f"{where}JSON nested deeper than {MAX_DEPTH} levels")
    return _LEFT_TO_JSON


_LEFT_TO_JSON = object()
_quick_loads = chosen(_c_quick_loads, _py_quick_loads)


def _c_plain_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object a well-formed line holds, read from its bytes as they
    are; None for anything ``loads_object`` must decide.

    A line orjson reads from its bytes is valid UTF-8 with no null byte and
    nothing around its object but JSON's whitespace, so decoding the text
    first, as ``loads`` does, would give the same object: this skips that
    decoding, and orjson's encoding of the text again, about half of the
    cost of a line. Lines nested too deep, lines that may hold an integer
    past 64 bits, broken lines and other values are left to ``loads``,
    which names what is wrong with them (tests/test_json.py holds the two
    to the same answers)."""
    depth, long_number = kernel.json_scan(data)
    if depth > MAX_DEPTH or long_number:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if type(value) is dict else None


def _py_plain_object(data: bytes) -> dict[str, Any] | None:
    """Without the kernel, ``loads_object`` decides every line."""
    return None


plain_object = chosen(_c_plain_object, _py_plain_object)
