"""The input decoder reads every JSON text as the standard library does.

``_json.loads`` takes orjson's reading when orjson has one, for speed, and
json's otherwise; so what any input decodes to, and the reason a broken one
is refused, must be json's, whatever orjson would have made of it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamfilter import InvalidRecordError
from streamfilter._json import loads
from streamfilter.adapters import _base as adapters_base
from streamfilter.adapters import decode_line


def _same(ours: Any, theirs: Any) -> bool:
    """Equal, and of the same types all the way down (1 is not 1.0, -0.0 is not 0.0)."""
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, dict):
        return list(ours) == list(theirs) and all(_same(ours[key], theirs[key]) for key in ours)
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(_same(a, b) for a, b in zip(ours, theirs, strict=True))
    if isinstance(ours, float):
        return (math.isnan(ours) and math.isnan(theirs)) or (
            ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs)
        )
    return bool(ours == theirs)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)  # past 64 bits, which orjson refuses
    | st.floats(allow_nan=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5), max_leaves=30
)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, ascii_only=st.booleans())
def test_any_json_text_decodes_as_json_decodes_it(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert _same(loads(text), json.loads(text))
    assert _same(loads(text.encode("utf-8", "surrogatepass")), json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # a repeated key: the last wins
        '{"n": 123456789012345678901234567890}',  # past 64 bits
        '{"n": -9223372036854775809, "m": 18446744073709551616}',
        '{"x": NaN, "y": Infinity, "z": -Infinity}',  # not JSON, but json reads them
        '{"f": 1e400, "g": -1e400, "h": 1e-400}',  # past a double: inf, and 0.0
        '{"z": -0, "w": -0.0, "e": 1E2, "d": 0.1, "p": 2.5e-324}',
        '{"s": "\\ud800 lone", "t": "\\udc00", "u": "\\ud83d\\ude00"}',  # lone and paired surrogates
        '{"raw": "\ud800 a lone surrogate in the str itself"}',
        '{"a": 0.1000000000000000055511151231257827, "b": 9007199254740993, "c": 2.2250738585072011e-308}',
        '{"c": 1.7976931348623158e308, "d": 123456789012345678.9, "e": 0.30000000000000004441}',
        '{"twitter": 1234567890123456789, "max": 18446744073709551615, "min": -9223372036854775808}',
        '{"nul": "\\u0000", "tab": "\\t", "sol": "\\/"}',
        '{"deep": [[[[[[[[[[1]]]]]]]]]]}',
        ' {"padded": true} ',
    ],
)
def test_json_corner_cases_decode_as_json_decodes_them(text: str) -> None:
    assert _same(loads(text), json.loads(text))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1,}', "broken JSON: Expecting property name enclosed in double quotes at character 8"),
        ('{"a": "unterminated}', "broken JSON: Unterminated string starting at character 6"),
        ('{"a": 1} trailing', "broken JSON: Extra data at character 9"),
        ('{"a": tru}', "broken JSON: Expecting value at character 6"),
        ('{"a": 1' + "0" * 5000 + "}", "JSON number too long"),
    ],
)
def test_broken_json_is_refused_with_json_s_reason(text: str, reason: str) -> None:
    with pytest.raises(InvalidRecordError, match=reason):
        loads(text)


def _decoded(line: bytes) -> tuple[str, Any]:
    try:
        return "value", decode_line(line)
    except InvalidRecordError as exc:
        return "refused", exc.reason


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# Pieces a hostile or damaged line is made of: JSON, and what breaks it.
_PIECES = st.sampled_from(
    ['{', '}', '[', ']', '"', '\\', ":", ",", " ", "\t", "\r", "\n", "1", "-", "0" * 19, "9" * 20, "NaN", "null",
     '{"a": ', '"b"', "\u00e9", "\ud800", "\\ud800", "\x00", "\x0b", "\ufeff", "\x85", "{" * 40, "[" * 40]
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@example(value=_nested(66), pieces=[], damage=b"", cut=0)  # well formed, and too deep
@given(
    value=_VALUES,
    pieces=st.lists(_PIECES, max_size=8),
    damage=st.binary(max_size=3),
    cut=st.integers(0, 400),
)
def test_a_line_read_from_its_bytes_decodes_as_its_text_does(
    value: Any, pieces: list[str], damage: bytes, cut: int
) -> None:
    # decode_line reads most lines' bytes with orjson straight away
    # (_json.plain_object); what it makes of any line must be what the full
    # reading makes of it: the same object, or the same reason for refusing.
    text = json.dumps({"v": value}, ensure_ascii=False)
    line = (text[:cut] + "".join(pieces) + text[cut:]).encode("utf-8", "surrogatepass") + damage
    line = b"{" + line if not line.startswith(b"{") else line
    fast = _decoded(line)
    slow_reader = getattr(adapters_base, "plain_object")  # noqa: B009 - a name the module imports, not exports
    setattr(adapters_base, "plain_object", lambda data: None)  # noqa: B010
    try:
        slow = _decoded(line)
    finally:
        setattr(adapters_base, "plain_object", slow_reader)  # noqa: B010
    assert fast[0] == slow[0]
    assert fast[1] == slow[1] if fast[0] == "refused" else _same(fast[1], slow[1])
