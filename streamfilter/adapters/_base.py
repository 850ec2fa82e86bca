"""The adapter seam, line decoding, and auto-detection."""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._exceptions import ConfigError, InvalidRecordError
from .._json import depth_ok, loads_object, plain_object
from .._post import Post
from .._wording import a_type, shown

__all__ = [
    "CLIPPED_LINE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_TEXT_CHARS",
    "Adapter",
    "NotAPost",
    "RecordAdapter",
    "decode_line",
    "post_id_of",
    "text_of",
]

MAX_LINE_BYTES = 4 << 20
# A reader that cuts an over-long line short passes on this much of it: one
# byte over the limit, so the line is still rejected, as "at least" that long.
CLIPPED_LINE_BYTES = MAX_LINE_BYTES + 1
MAX_TEXT_CHARS = 100_000


class NotAPost(Exception):  # noqa: N818 - a verdict, not an error
    """Raised by an adapter for a well-formed record that carries no post
    (a like, a follow, a delete...): it gets verdict ``skipped``.

    ``deletes`` is the id of the post a platform's delete notice removes
    (a Twitter ``delete``, a Mastodon ``delete`` event, a Bluesky post
    deleted), which the filter forgets unless told to ignore deletes;
    ``platform`` is the platform that sent the notice (``Post.platform``'s
    names): a notice forgets only a post of its own platform, for ids are
    not unique across platforms."""

    def __init__(self, reason: str, deletes: str | None = None, platform: str = "text") -> None:
        super().__init__(reason)
        self.reason = reason
        self.deletes = deletes
        self.platform = platform


@runtime_checkable
class Adapter(Protocol):
    name: str

    def matches(self, record: Mapping[str, Any]) -> bool: ...

    def posts(self, record: Mapping[str, Any]) -> list[Post]: ...


class GenericReader(Adapter, Protocol):
    """The generic adapter, which also reads the id of a record that makes no post."""

    def readable_id(self, record: Mapping[str, Any]) -> str | None: ...


def decode_line(line: bytes | str) -> dict[str, Any] | str:
    """One input line as a JSON object, or as plain text when it is not JSON.

    A line that starts with ``{`` must be a valid JSON object. A line that is
    a whole JSON string is the text it holds: a file of texts written as JSON
    strings, or a plain text line in quotes, read alike. A line that is a
    whole JSON array, number or literal is rejected, since it is not an
    object; a line that starts with ``[`` and does not parse is plain text.
    """
    if type(line) is bytes and line[:1] == b"{" and len(line) <= MAX_LINE_BYTES:
        record = plain_object(line)  # most lines: read from their bytes as they are
        if record is not None:
            return record
    line = _decode_text(line)
    stripped = line.strip()
    first = stripped[0]
    if first == "{":
        return loads_object(stripped)
    # A line that is a whole JSON array, number or literal is JSON that is
    # not an object; anything else is plain text ("[BREAKING] ...").
    if first in '["-0123456789' or stripped in ("true", "false", "null"):
        if first == "[" and not depth_ok(stripped):
            return loads_object(stripped)  # raises: nested too deep
        try:
            value = json.loads(stripped)
        except (json.JSONDecodeError, RecursionError):
            return line.rstrip("\r\n")
        except ValueError:  # an integer longer than Python converts
            return loads_object(stripped)  # raises, with the reason of every decode
        if isinstance(value, str):
            return value
        raise InvalidRecordError(f"JSON value is {a_type(value)}, not an object (plain text lines: --format text)")
    return line.rstrip("\r\n")


def _leniently_decoded(line: bytes | str) -> dict[str, Any] | str:
    """``decode_line``, where a line refused for its characters alone
    (invalid UTF-8, a null byte) is read again with each bad byte and null
    as U+FFFD: for the id of its invalid verdict, never for a post."""
    try:
        return decode_line(line)
    except InvalidRecordError:
        if len(line) > MAX_LINE_BYTES:
            raise
        text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
        if "\ufffd" not in text and "\x00" not in text:  # refused for what it says: read no further
            raise
        return decode_line(text.replace("\x00", "\ufffd"))


def post_id_of(value: object, name: str) -> str | None:
    """A post's id as a record gives it (``name`` says where, in a reason):
    a string, or an integer (numpy's too, as a data frame's row holds one);
    None where there is none. Anything else is no id: a float (1e17 and
    100000000000000001 read as one number), a boolean, an empty or a blank
    string."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value or value.isspace():
            raise InvalidRecordError(f"{name} is {'an empty' if not value else 'a blank'} string")
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InvalidRecordError(f"{name} is {a_type(value)} ({shown(value)}), not a string or an integer")


def text_of(value: object, field: str) -> str:
    """Check that a text field holds usable text."""
    if value is None:
        raise InvalidRecordError(f"no text field ({field} is missing or null)")
    if not isinstance(value, str):
        raise InvalidRecordError(f"text field {field} is {a_type(value)}, not a string")
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidRecordError(f"text field {field} has {len(value)} characters, over {MAX_TEXT_CHARS}")
    return value


def _decode_text(line: bytes | str) -> str:
    """A raw line as text, or InvalidRecordError for what no format can use."""
    if len(line) > MAX_LINE_BYTES:
        at_least = "at least " if len(line) == CLIPPED_LINE_BYTES else ""
        raise InvalidRecordError(f"line is {at_least}{len(line)} bytes, over the {MAX_LINE_BYTES} byte limit")
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordError(f"invalid UTF-8 at byte {exc.start}") from None
    if "\x00" in line:
        raise InvalidRecordError("line contains a null byte")
    # Windows tools start a UTF-8 file with a byte-order mark, which would
    # otherwise hide the JSON of its first line
    line = line.removeprefix("\ufeff").rstrip("\r\n")
    if not line.strip():
        raise InvalidRecordError("empty line")
    return line


class RecordAdapter:
    """Turns any record into posts, by format.

    Records may be dicts (parsed JSON), raw lines (bytes or str), or Posts
    (passed through). ``format`` is ``auto`` (per record: each platform
    adapter in turn, then generic JSON; non-JSON lines are plain text),
    ``twitter``, ``text`` (every line is text, even if it looks like JSON) or
    ``generic``.
    """

    FORMATS = ("auto", "twitter", "mastodon", "bluesky", "text", "generic")

    def __init__(
        self,
        format: str,
        platforms: Sequence[Adapter],
        generic: GenericReader,
        text: Adapter,
    ) -> None:
        if format not in self.FORMATS:
            raise ConfigError(f"format must be one of {', '.join(self.FORMATS)}; got {format!r}")
        self.format = format
        self._platforms = list(platforms)
        self._generic = generic
        self._text = text

    def adapt(self, record: object) -> list[Post]:
        if isinstance(record, (bytes, str)):  # a tuple: isinstance checks it faster than bytes | str
            if self.format == "text":
                return self._text.posts({"text": _decode_text(record), "_raw": record})
            decoded = decode_line(record)
            if isinstance(decoded, str):
                if self.format != "auto":
                    raise InvalidRecordError(f"line is not a JSON object (format is {self.format})")
                return self._text.posts({"text": decoded, "_raw": record})
            posts = self._from_mapping(decoded)
            # A post's raw is the record as it arrived: here the line, not the
            # dict decoded from it (set in place: the posts are new, not shared).
            for post in posts:
                object.__setattr__(post, "raw", record)
        elif type(record) is dict or isinstance(record, Mapping):  # a dict, without the ABC's check
            posts = self._from_mapping(record)
        elif isinstance(record, Post):
            posts = [record]
        elif isinstance(record, InvalidRecordError):  # what the source already found unusable
            raise record
        elif callable(getattr(record, "keys", None)) and hasattr(record, "__getitem__"):
            # mapping-like without being a Mapping: a data frame's row (a pandas
            # Series, as DataFrame.apply(..., axis=1) and iterrows give it)
            row: Any = record
            posts = self._from_mapping({key: row[key] for key in row.keys()})
            for post in posts:
                object.__setattr__(post, "raw", record)
        else:
            raise InvalidRecordError(f"record is {a_type(record)}; expected a dict, a line or a Post")
        return posts

    def readable_id(self, record: object) -> str | None:
        """The id of a record that makes no valid post, where one can be read
        (an invalid verdict's ``record_id``): a string or an integer, not
        empty, under the generic id field (``id_field`` or its usual names)
        or a Twitter v2 page's ``data``; None for any other record."""
        try:
            decoded = _leniently_decoded(record) if isinstance(record, bytes | str) else record
        except (InvalidRecordError, RecursionError, ValueError):
            return None
        if not isinstance(decoded, Mapping):
            return None
        for source in (decoded, decoded.get("data")):
            if isinstance(source, Mapping) and (found := self._generic.readable_id(source)) is not None:
                return found
        return None

    def _from_mapping(self, record: Mapping[str, Any]) -> list[Post]:
        if self.format in ("generic", "text"):
            return self._generic.posts(record)
        for adapter in self._platforms:
            if (self.format == "auto" or adapter.name == self.format) and adapter.matches(record):
                return adapter.posts(record)
        if self.format == "twitter":
            raise InvalidRecordError("not a Twitter v1.1 status or v2 tweet")
        if self.format in ("mastodon", "bluesky"):
            raise InvalidRecordError(f"not a {self.format} record")
        return self._generic.posts(record)
