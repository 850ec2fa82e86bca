"""Coverage-guided fuzzing of decode -> adapt -> normalise -> sketch -> judge.

    pip install atheris
    python tests/fuzz/fuzz_judge.py -max_total_time=1800 -max_len=4096 fuzz-corpus/ tests/fuzz/seeds/

Each input is cut into a shape and a body: the body goes in as a raw line,
or nested where a platform nests JSON (a Mastodon streaming ``payload``
string, a Jetstream commit record, a Twitter v2 page, a v1.1 retweet), or
as a record's timestamp, id or text. Whatever the input, the filter must
give one verdict per post and never raise: a crash, a hang or an exception
here is a finding. Not part of the test suite (it runs for half an hour);
tests/fuzz/test_seeds.py replays the seeds and every finding kept in seeds/.
"""

from __future__ import annotations

import json
import logging
import sys

import atheris

with atheris.instrument_imports(include=["streamfilter"]):
    from streamfilter import MemoryStore, StreamFilter
    from streamfilter._normalize import normalize
    from streamfilter.adapters import decode_line


def shapes(data: bytes) -> list[bytes | str]:
    """The records one input becomes, raw bytes first."""
    try:
        text = data.decode("utf-8", "surrogatepass")  # lone surrogates kept: JSON can carry them
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
    try:
        text.encode("utf-8")
        escaped = json.dumps(text)
    except UnicodeEncodeError:  # a lone surrogate: JSON carries it as an escape
        escaped = json.dumps(text, ensure_ascii=True)
    return [
        data,
        text,
        '{"event":"update","payload":' + json.dumps(text) + "}",
        '{"id":"1","text":' + escaped + ',"created_at":' + (text if text[:1].isdigit() else escaped) + "}",
        '{"id_str":"2","full_text":"x y z","retweeted_status":' + (text if text[:1] == "{" else "{}") + "}",
        '{"data":[' + (text if text[:1] == "{" else '{"id":"3","text":' + escaped + "}") + '],"includes":{}}',
        '{"did":"d","time_us":' + (text if text[:1].isdigit() else "1700000000000000")
        + ',"kind":"commit","commit":{"operation":"create","collection":"app.bsky.feed.post","rkey":"k",'
        + '"record":{"text":' + escaped + "}}}",
    ]


def test_one_input(data: bytes) -> None:
    records = shapes(data)
    with StreamFilter(store=MemoryStore()) as sf:
        for record in records:
            verdict = sf.check(record)
            # the engine's safety net turns an unforeseen exception into this reason: a finding
            assert not (verdict.reason or "").startswith("record could not be read"), verdict.reason
    try:
        decode_line(data)
    except Exception as exc:  # noqa: BLE001
        if type(exc).__name__ != "InvalidRecordError":
            raise
    normalize(data.decode("utf-8", "replace"))


if __name__ == "__main__":
    logging.getLogger("streamfilter").setLevel(logging.CRITICAL)  # an unforeseen failure raises here instead
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
