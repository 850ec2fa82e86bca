from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfilter import ConfigError, InvalidRecordError
from streamfilter._json import MAX_DEPTH as _MAX_DEPTH
from streamfilter._json import depth_ok as _depth_ok
from streamfilter.adapters import record_adapter


def test_generic_dotted_fields() -> None:
    adapter = record_adapter("generic", id_field="meta.uid", text_field="payload.body", time_field="meta.ts")
    (post,) = adapter.adapt({"meta": {"uid": 7, "ts": 1700000000123}, "payload": {"body": "hello there"}})
    assert post.id == "7"
    assert post.text == "hello there"
    assert post.timestamp == pytest.approx(1700000000.123)  # milliseconds detected


def test_plain_text_lines() -> None:
    adapter = record_adapter()
    (post,) = adapter.adapt(b"RT @someone: a manual retweet\n")
    assert post.is_retweet and post.id is None and post.timestamp is None
    (post,) = adapter.adapt("[BREAKING] not JSON at all")
    assert post.text == "[BREAKING] not JSON at all"
    (post,) = record_adapter("text").adapt(b'{"text": "json-looking text"}')
    assert post.text == '{"text": "json-looking text"}'


def test_a_line_that_is_a_json_string_is_the_text_it_holds() -> None:
    # a file of texts written as JSON strings, or a text line in quotes
    (post,) = record_adapter().adapt(b'"caf\\u00e9 \\"quoted\\" text"')
    assert post.text == 'caf\u00e9 "quoted" text'
    assert post.raw == b'"caf\\u00e9 \\"quoted\\" text"'
    with pytest.raises(InvalidRecordError, match="not a JSON object"):
        record_adapter("twitter").adapt(b'"a text, not a status"')


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json", "broken JSON"),
        (b"[1, 2]", "not an object"),
        (b"2019", "not an object .plain text lines: --format text."),
        (b'{"id": 1}', "no text field"),
        (b'{"id": 1, "text": null}', "no text: text is null or not text"),  # not "the record has id, text"
        (b'{"text": ["a"]}', "not a string"),
        (b'{"text": "a\\u0000b"}'.replace(b"\\u0000", b"\x00"), "null byte"),
        (b"\xff\xfehello", "invalid UTF-8"),
        (b"{" * 200 + b"}" * 200, "nested deeper"),
        (b'{"text": "x", "created_at": "Wed Feb 24 11:35:00 +0000 2999"}', "far future"),
        (b'{"text": "x", "created_at": 5}', "far past"),
        (b'{"text": "x", "created_at": 1e400}', "not a finite number"),
        (b'{"text": "x", "created_at": "NaN"}', "not a finite number"),
        (b'{"text": "x", "created_at": "yesterday-ish"}', "cannot read created_at"),
        # a time under one of the usual names is named by it, not by the option's default
        (b'{"text": "x", "timestamp": "yesterday-ish"}', "cannot read timestamp 'yesterday-ish'"),
        (b"   ", "empty line"),
    ],
)
def test_bad_lines_raise_with_reason(line: bytes, reason: str) -> None:
    with pytest.raises(InvalidRecordError, match=reason):
        record_adapter().adapt(line)


def test_bad_config() -> None:
    with pytest.raises(ConfigError, match="format must be one of"):
        record_adapter("xml")
    with pytest.raises(ConfigError, match="dotted path"):
        record_adapter("generic", text_field="a..b")


def test_default_fields_fall_back_to_usual_names_but_named_fields_do_not() -> None:
    (post,) = record_adapter().adapt(b'{"uuid": "u1", "body": "a message body", "timestamp": 1700000000}')
    assert (post.id, post.text, post.timestamp) == ("u1", "a message body", 1700000000.0)
    with pytest.raises(InvalidRecordError, match="no text field"):
        record_adapter("generic", text_field="payload.t").adapt(b'{"text": "x"}')


def deepest_by_characters(line: str) -> int:
    """The deepest bracket outside strings, one character at a time: the
    depth check as it was first written, which the fast one must agree with."""
    depth = deepest = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


# Lines near the limit: runs of brackets, strings holding brackets, escaped
# quotes and backslashes, an unterminated string, closers before openers.
_PIECES = st.sampled_from(['{"a": ', "[", "]", "{", "}", '"', '\\"', "\\\\", '"[{[{"', "x", ", ", "é", "\n"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.tuples(_PIECES, st.integers(1, 40)), max_size=12))
def test_depth_check_agrees_with_a_character_loop(runs: list[tuple[str, int]]) -> None:
    line = "".join(piece * count for piece, count in runs)
    assert _depth_ok(line) == (deepest_by_characters(line) <= _MAX_DEPTH)


def test_a_page_of_many_records_is_not_too_deep_and_a_deep_one_is() -> None:
    page = json.dumps(
        {"data": [{"id": str(i), "text": "x [{", "entities": {"urls": [{"a": [1]}]}} for i in range(500)]}
    )
    assert _depth_ok(page)
    assert record_adapter().adapt(page.encode())
    deep = '{"text": "x", "a": ' + '{"b": [' * 33 + "1" + "]}" * 33 + "}"
    assert deepest_by_characters(deep) == 67 and not _depth_ok(deep)
    with pytest.raises(InvalidRecordError, match="nested deeper than 64"):
        record_adapter().adapt(deep.encode())


@pytest.mark.parametrize("depth", [_MAX_DEPTH - 1, _MAX_DEPTH, _MAX_DEPTH + 1])
def test_depth_limit_is_exact_on_lines_with_many_brackets(depth: int) -> None:
    # the nested part, then enough shallow brackets that the quick count cannot decide
    line = (
        '{"text": "x", "a": ' + "[" * (depth - 1) + "]" * (depth - 1) + ', "b": ' + "[[1], " * 40 + "2" + "]" * 40 + "}"
    )
    assert deepest_by_characters(line) == depth
    assert _depth_ok(line) == (depth <= _MAX_DEPTH)
