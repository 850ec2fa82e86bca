"""What the fuzzer checks for one input, importable without atheris (tests/fuzz/test_seeds.py)."""

from __future__ import annotations

import json

from streamfilter import InvalidRecordError, MemoryStore, StreamFilter
from streamfilter._normalize import normalize
from streamfilter.adapters import decode_line


def shapes(data: bytes) -> list[bytes | str]:
    """The records one input becomes: as a raw line, and nested where each
    platform nests JSON or values (a Mastodon streaming payload, a record's
    time, a v1.1 retweet, a v2 page, a Jetstream commit)."""
    try:
        text = data.decode("utf-8", "surrogatepass")  # lone surrogates kept: JSON can carry them
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
    escaped = json.dumps(text)  # ASCII, lone surrogates as JSON escapes
    raw = text if text[:1] in "{[0123456789" else escaped
    return [
        data,
        text,
        '{"event":"update","payload":' + escaped + "}",
        '{"id":"1","text":' + escaped + ',"created_at":' + raw + "}",
        '{"id_str":"2","full_text":"x y z","retweeted_status":' + raw + "}",
        '{"data":[' + raw + '],"includes":{}}',
        '{"did":"d","time_us":' + raw + ',"kind":"commit","commit":{"operation":"create",'
        '"collection":"app.bsky.feed.post","rkey":"k","record":{"text":' + escaped + "}}}",
    ]


def check(data: bytes) -> None:
    """Every shape gets a verdict, and no verdict is the engine's safety net
    (an exception no check foresaw); the decoder and normaliser raise nothing
    but InvalidRecordError."""
    with StreamFilter(store=MemoryStore()) as sf:
        for record in shapes(data):
            for verdict in sf.check_many([record]):
                assert not (verdict.reason or "").startswith("record could not be read"), verdict.reason
    try:
        decode_line(data)
    except InvalidRecordError:
        pass
    normalize(data.decode("utf-8", "replace"))
