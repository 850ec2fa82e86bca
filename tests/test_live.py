"""Live sources against real servers on loopback that drop the connection mid-stream."""

from __future__ import annotations

import email.utils
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from streamfilter import ConfigError, StreamFilter
from streamfilter._reconnect import retry_after
from streamfilter.sources import SourceError, follow

from .conftest import FIXTURES
from .live_servers import StreamServer

pytestmark = pytest.mark.anyio


def fixture_lines(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines()


def jetstream() -> list[bytes]:
    # Jetstream sends events in time_us order; the recorded sample is not sorted
    events = sorted(fixture_lines("bluesky_jetstream.jsonl"), key=lambda line: json.loads(line)["time_us"])
    events.insert(10, b'{"did": "did:plc:broken", "time_us": ')  # a broken frame passes through to the adapter
    return events


def mastodon_statuses() -> list[bytes]:
    """The recorded statuses as JSON; the fixture ends with two already wrapped as streaming events."""
    statuses = []
    for line in fixture_lines("mastodon_hashtag.jsonl"):
        record = json.loads(line)
        statuses.append(record["payload"].encode() if record.get("event") == "update" else line)
    return statuses


def mastodon_frames() -> list[bytes]:
    """Mastodon's streaming API over WebSocket: {"stream", "event", "payload": JSON string}."""
    return [
        json.dumps({"stream": ["hashtag", "news"], "event": "update", "payload": status.decode()}).encode()
        for status in mastodon_statuses()
    ]


def novel_ids(expected: str) -> list[str]:
    return [
        verdict["id"]
        for verdict in map(json.loads, (FIXTURES / expected).read_text().splitlines())
        if verdict["verdict"] == "novel"
    ]


async def take(url: str, count: int, **options: object) -> list[bytes]:
    records: list[bytes] = []
    with anyio.fail_after(30):
        async with aclosing(follow(url, **options)) as source:  # type: ignore[arg-type]
            async for record in source:
                records.append(record)
                if len(records) == count:
                    break
    return records


@pytest.mark.parametrize(
    ("kind", "records"),
    [
        ("jsonl", fixture_lines("twitter_v2_stream.jsonl")),
        ("ws", jetstream()),
        ("ws", mastodon_frames()),
    ],
    ids=["jsonl-twitter-v2", "websocket-jetstream", "websocket-mastodon"],
)
async def test_every_record_once_across_dropped_connections(kind: str, records: list[bytes]) -> None:
    states: list[str] = []
    with StreamServer(kind, records, drops=[3, len(records) // 2, len(records) - 2]) as server:
        got = await take(server.url, len(records), on_state=states.append, backoff=(0.01, 0.1))
        assert got == records  # nothing lost, nothing twice, in order
        assert len(server.connections) == 4
        if records[0].startswith(b'{"did"'):
            # each reconnect resumed at the last event seen, per Jetstream's cursor
            cursors = [c.query.get("cursor") for c in server.connections]
            assert cursors[0] is None and all(cursor is not None for cursor in cursors[1:])
    assert sum("connection lost" in state for state in states) == 3
    assert sum(state.endswith("connected") or ", resuming" in state or "connected (" in state for state in states) == 4


async def test_sse_resumes_after_the_last_complete_event() -> None:
    statuses = mastodon_statuses()
    with StreamServer("sse", statuses, drops=[10, 50]) as server:
        got = await take(server.url, len(statuses), backoff=(0.01, 0.1))
        last_ids = [c.headers.get("last-event-id") for c in server.connections]
    assert [json.loads(record) for record in got] == [
        {"event": "update", "payload": status.decode()} for status in statuses
    ]
    # the event cut in half by each drop was not delivered; the resume asked for it again
    assert last_ids == [None, "10", "50"]


async def test_sse_ids_go_back_as_utf8_and_unsendable_ones_are_skipped() -> None:
    statuses = mastodon_statuses()[:12]
    ids = [f"\u00e9v\u4e2d{n}".encode() for n in range(len(statuses))]  # any text, per the standard
    ids[5] = b"bad\x01id"  # a control character no header can carry
    with StreamServer("sse", statuses, drops=[3, 6], ids=ids) as server:
        got = await take(server.url, len(statuses) + 1, backoff=(0.01, 0.1))
        sent_back = [c.headers.get("last-event-id") for c in server.connections]
    # the second resume is from the last id a header can carry: event 5 comes twice, none is lost
    assert [json.loads(record)["payload"] for record in got] == [
        status.decode() for status in statuses[:6] + statuses[5:]
    ]
    assert [None if value is None else value.encode("latin-1") for value in sent_back] == [None, ids[2], ids[4]]


async def test_filter_wraps_a_live_stream() -> None:
    with StreamServer("ws", jetstream(), drops=[40, 100]) as server:
        async with StreamFilter() as sf:
            passed = []
            with anyio.move_on_after(8):
                async with aclosing(sf.filter(follow(server.url, backoff=(0.01, 0.1)))) as posts:
                    async for post in posts:
                        passed.append(post.id)
                        if len(passed) == len(novel_ids("bluesky_jetstream.expected.jsonl")):
                            break
    assert sorted(passed, key=str) == sorted(novel_ids("bluesky_jetstream.expected.jsonl"))


async def test_filter_commits_the_resume_point_and_follow_starts_there(tmp_path: Path) -> None:
    statuses = mastodon_statuses()
    with StreamServer("sse", statuses) as server:
        async with StreamFilter(path=tmp_path / "db") as sf:
            assert sf.resume_point(server.url) is None
            with anyio.fail_after(20):
                async with aclosing(sf.judge(follow(server.url))) as verdicts:
                    judged = 0
                    async for _ in verdicts:
                        judged += 1
                        if judged == len(statuses):
                            break
            # the batch of the last verdict is committed, and its point with it
            assert sf.resume_point(server.url) == f"last-event-id:{len(statuses)}"
        async with StreamFilter(path=tmp_path / "db") as sf:
            point = sf.resume_point(server.url)
            with anyio.fail_after(20):
                async with aclosing(follow(server.url, resume_from=point)) as source:
                    with anyio.move_on_after(0.5):
                        async for _ in source:
                            raise AssertionError("the server has nothing after the committed point")
    assert point == f"last-event-id:{len(statuses)}"
    assert server.connections[-1].headers.get("last-event-id") == str(len(statuses))


async def test_not_found_is_not_retried() -> None:
    with StreamServer("jsonl", []) as server:
        with pytest.raises(SourceError, match="HTTP 404"):
            await take(server.url.replace("/stream", "/missing"), 1)
        assert len(server.connections) == 1


async def test_busy_server_is_retried_no_sooner_than_retry_after() -> None:
    records = fixture_lines("twitter_v2_stream.jsonl")
    states: list[str] = []
    with StreamServer("jsonl", records, refusals=["503 Service Unavailable\r\nRetry-After: 1"]) as server:
        started = anyio.current_time()
        got = await take(server.url, len(records), on_state=states.append, backoff=(0.01, 0.1))
        assert anyio.current_time() - started >= 1.0
    assert got == records
    assert "cannot connect (HTTP 503 Service Unavailable); trying again in 1.00 s (retry 1, with no limit)" in states[0]


@pytest.mark.parametrize("value", ["nan", "-1", "1e3", "inf", "soon"])
async def test_a_retry_after_of_neither_form_is_not_obeyed(value: str) -> None:
    # A hostile or broken server's value once reached the sleep itself: NaN stopped the
    # stream with an error, and "inf" asked for an hour.
    records = fixture_lines("twitter_v2_stream.jsonl")
    states: list[str] = []
    with StreamServer("jsonl", records, refusals=[f"503 Service Unavailable\r\nRetry-After: {value}"]) as server:
        got = await take(server.url, len(records), on_state=states.append, backoff=(0.01, 0.1))
    assert got == records
    assert re.search(r"trying again in 0\.0\d s", states[0]), states[0]


async def test_a_retry_after_date_is_waited_for() -> None:
    records = fixture_lines("twitter_v2_stream.jsonl")
    when = email.utils.formatdate(time.time() + 2, usegmt=True)  # whole seconds: 1 to 2 s from now
    with StreamServer("jsonl", records, refusals=[f"429 Too Many Requests\r\nRetry-After: {when}"]) as server:
        started = anyio.current_time()
        got = await take(server.url, len(records), backoff=(0.01, 0.1))
        assert anyio.current_time() - started >= 1.0
    assert got == records


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("000012", 12.0),
        ("86400", 3600.0),  # a day: an hour at most
        ("9" * 5000, 3600.0),  # past what Python reads as an int
        ("Fri, 15 Jan 2027 08:01:30 GMT", 90.0),  # 90 s after "now" below
        ("Fri, 15 Jan 2027 08:01:30 -0000", 90.0),  # no zone of its own: GMT, as HTTP's dates are
        ("Sun, 06 Nov 1994 08:49:37 GMT", 0.0),  # a date gone by
        ("Fri, 01 Jan 2100 00:00:00 GMT", 3600.0),
        ("12.5", 0.0),
        ("", 0.0),
        (None, 0.0),
    ],
)
def test_retry_after_reads_seconds_and_dates(value: str | None, seconds: float) -> None:
    assert retry_after(value, now=1_800_000_000.0) == seconds  # Fri, 15 Jan 2027 08:00:00 GMT


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[bad", "is not a valid URL"),
        ("ftp://example.org/stream", "follow takes http://, https://, ws:// or wss:// URLs"),
        ("wss://", "names no host"),
        ("http://example.org:99999/stream", "is not a valid URL"),
    ],
)
async def test_unusable_urls_fail_at_once(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        await take(url, 1)


async def test_a_server_that_stays_down_gives_up_after_max_retries() -> None:
    from .redis_servers import free_port

    with pytest.raises(SourceError, match="could not connect in 3 attempts .*ConnectError"):
        await take(f"http://127.0.0.1:{free_port()}/stream", 1, max_retries=2, backoff=(0.01, 0.02))
    with pytest.raises(SourceError, match=r"could not connect in 1 attempt \("):  # one, not "1 attempts"
        await take(f"http://127.0.0.1:{free_port()}/stream", 1, max_retries=0)


async def test_a_finite_file_served_again_on_each_reconnect_gives_up_after_max_retries() -> None:
    # each reconnect brings the same five records: no progress, so it counts
    # against max_retries and backs off, instead of reading them forever
    import http.server
    import threading

    body = b"\n".join(fixture_lines("campaign.jsonl")[:5]) + b"\n"

    class Finite(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Finite)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    received: list[bytes] = []
    try:
        with pytest.raises(SourceError, match="gave up after 2 reconnects"), anyio.fail_after(30):
            url = f"http://127.0.0.1:{server.server_address[1]}/feed.jsonl"
            async with aclosing(follow(url, max_retries=2, backoff=(0.01, 0.02))) as source:
                async for record in source:
                    received.append(record)
    finally:
        server.shutdown()
        server.server_close()
    assert len(received) == 15 and len(set(received)) == 5  # read three times, then given up


def test_cli_follow_writes_novel_posts_and_stops_on_sigint(tmp_path: Path) -> None:
    statuses = mastodon_statuses()
    statuses.insert(30, b'{"id": "broken')  # a status cut short: reported, and the stream goes on
    expected = novel_ids("mastodon_hashtag.expected.jsonl")
    verdicts = tmp_path / "verdicts.jsonl"
    out = tmp_path / "out.jsonl"
    with StreamServer("sse", statuses, drops=[20, 60]) as server, out.open("wb") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamfilter", "follow", server.url, "--verdicts", str(verdicts)],
            stdout=stdout,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = verdicts.read_text().count("\n") if verdicts.exists() else 0
            if done >= len(statuses):
                break
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr.decode()
    # each novel status as its own record, as the server sent it, not the event around it
    out_ids = [json.loads(line)["id"] for line in out.read_bytes().splitlines()]
    assert sorted(out_ids) == sorted(expected)  # the replay's novel posts, once each, none lost to the drops
    log = stderr.decode()
    assert log.count("connection lost") == 2 and "resuming after id 20" in log and "resuming after id 60" in log
    assert "record 31: invalid: streaming update payload: broken JSON" in log
    assert f"{len(statuses)} posts, {len(expected)} novel, 5 duplicates, 0 retweets, 1 invalid" in log


async def test_a_websocket_text_frame_that_is_not_utf8_is_one_invalid_record() -> None:
    """RFC 6455 would fail the connection, and the records after it until the
    reconnect were lost: the frame is passed on as it came, and judged invalid."""
    records = mastodon_frames()[:6]
    records.insert(3, b'{"event": "update", "payload": "caf\xe9 \xff"}')
    with StreamServer("ws", records) as server:
        states: list[str] = []
        got = await take(server.url, len(records), on_state=states.append, backoff=(0.01, 0.1))
        assert got == records and len(server.connections) == 1
    assert not any("connection lost" in state or "ended" in state for state in states)
    async with StreamFilter() as sf:
        kinds = [verdict.kind.value async for verdict in sf.judge(got)]
    assert kinds[3] == "invalid" and kinds.count("invalid") == 1


def test_a_time_us_of_thousands_of_digits_is_not_a_cursor() -> None:
    from streamfilter.sources import _Resume, _seen_before

    resume = _Resume()
    assert _seen_before(b'{"time_us":' + b"9" * 5000 + b"}", resume) is False
    assert resume.cursor is None  # the adapter judges that frame invalid; the stream's cursor is untouched
