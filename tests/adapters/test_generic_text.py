from __future__ import annotations

import pytest

from streamfilter import ConfigError, InvalidRecordError
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


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json", "broken JSON"),
        (b"[1, 2]", "not an object"),
        (b'"just a string"', "not an object"),
        (b'{"id": 1}', "no text field"),
        (b'{"text": ["a"]}', "not a string"),
        (b'{"text": "a\\u0000b"}'.replace(b"\\u0000", b"\x00"), "null byte"),
        (b"\xff\xfehello", "invalid UTF-8"),
        (b"{" * 200 + b"}" * 200, "nested deeper"),
        (b'{"text": "x", "created_at": "Wed Feb 24 11:35:00 +0000 2999"}', "far future"),
        (b'{"text": "x", "created_at": 5}', "far past"),
        (b'{"text": "x", "created_at": 1e400}', "not a finite number"),
        (b'{"text": "x", "created_at": "NaN"}', "not a finite number"),
        (b'{"text": "x", "created_at": "yesterday-ish"}', "cannot read timestamp"),
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
