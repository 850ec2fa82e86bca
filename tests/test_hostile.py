"""Input written to break the filter: each is reported or judged, and the stream goes on."""

from __future__ import annotations

import contextlib
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from streamfilter import MemoryStore, StreamFilter, StreamFilterError, VerdictKind
from streamfilter.sources import SourceError, follow

from .conftest import replay_command

HUGE_NUMBER = "9" * 5000  # past Python's 4,300-digit limit for int()

HOSTILE_LINES = [
    ('{"id": "\\udc00", "text": "a post whose id is a lone surrogate"}', "invalid", "lone surrogate (U+DC00)"),
    ('{"id_str": "\\ud800x", "text": "another such id"}', "invalid", "lone surrogate (U+D800)"),
    ('{"id_str": "7", "text": "\\udfff"}', "novel", None),  # text alone: judged on what is left
    ('{"id_str": "8", "text": "words then \\udfff a lone half"}', "novel", None),
    ('{"id_str": "9", "text": "a number too long", "n": ' + HUGE_NUMBER + "}", "invalid", "JSON number too long"),
    ("[" + HUGE_NUMBER + "]", "invalid", "JSON number too long"),
    ('{"id_str": "10", "text": "the stream goes on after all of them"}', "novel", None),
]


def test_hostile_lines_are_reported_by_line_and_the_replay_goes_on(tmp_path: Path) -> None:
    stream = tmp_path / "hostile.jsonl"
    stream.write_text("\n".join(line for line, _, _ in HOSTILE_LINES) + "\n")
    done = subprocess.run(
        replay_command(str(stream), "--db", str(tmp_path / "index"), "--verdicts", str(tmp_path / "v.jsonl")),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    verdicts = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert [v["verdict"] for v in verdicts] == [kind for _, kind, _ in HOSTILE_LINES]
    for verdict, (_, _, reason) in zip(verdicts, HOSTILE_LINES, strict=True):
        if reason is not None:
            assert reason in verdict["reason"]
    assert [v["line"] for v in verdicts] == list(range(1, len(HOSTILE_LINES) + 1))
    stderr = done.stderr.decode()
    assert f"{stream}:1: invalid:" in stderr and f"{stream}:5: invalid:" in stderr


def test_check_reports_hostile_records_as_invalid_verdicts() -> None:
    with StreamFilter(store=MemoryStore()) as sf:
        assert sf.check({"id": "\udc00", "text": "hi there"}).kind is VerdictKind.INVALID
        assert sf.check('{"id": 1, "text": "x", "n": ' + HUGE_NUMBER + "}").kind is VerdictKind.INVALID
        assert sf.check({"id": "2", "text": "\udfff\udfff"}).kind is VerdictKind.NOVEL
        assert sf.check({"id": "3", "text": "\udfff\udfff"}).kind is VerdictKind.DUPLICATE


def test_check_of_a_page_indexes_nothing_and_check_many_then_passes_its_posts() -> None:
    page = {"data": [{"id": "1", "text": "the first post on this page"}, {"id": "2", "text": "a second one"}]}
    with StreamFilter(store=MemoryStore()) as sf:
        with pytest.raises(StreamFilterError, match="carries 2 posts.*nothing was indexed"):
            sf.check(page)
        assert [v.kind for v in sf.check_many([page])] == [VerdictKind.NOVEL, VerdictKind.NOVEL]


@pytest.mark.anyio
async def test_the_callers_own_error_leaves_the_block_unwrapped() -> None:
    with pytest.raises(ValueError, match="the caller's own") as caught:
        async with StreamFilter(store=MemoryStore()) as sf:
            async with aclosing(sf.filter([{"id": "1", "text": "one post"}])) as posts:
                async for _ in posts:
                    raise ValueError("the caller's own")
    assert type(caught.value) is ValueError


@pytest.mark.anyio
async def test_a_block_that_raises_outside_any_loop_leaves_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with StreamFilter(store=MemoryStore()):
            await anyio.lowlevel.checkpoint()
            raise KeyError("missing")


# -- hostile servers ---------------------------------------------------------------
class RawServer:
    """A loopback HTTP server that answers each connection with ``respond(request
    head) -> bytes`` and closes it; it records every request head."""

    def __init__(self, respond: Callable[[str], bytes]) -> None:
        self.respond = respond
        self.requests: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            with connection:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                self.requests.append(head.decode("latin-1"))
                try:
                    connection.sendall(self.respond(head.decode("latin-1")))
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()


def _http(body: bytes, content_type: str = "application/x-ndjson", status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\n{extra}\r\n"
    return head.encode() + body


def _follow(url: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[bytes], list[dict[str, Any]]]:
    verdicts = tmp_path / "follow.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamfilter",
            "follow",
            url,
            "--max-retries",
            "0",
            "--verdicts",
            str(verdicts),
            *extra,
        ],
        capture_output=True,
        timeout=120,
    )
    lines = verdicts.read_text().splitlines() if verdicts.exists() else []
    return done, [json.loads(line) for line in lines]


def _post(index: int) -> bytes:
    return json.dumps({"id": str(index), "text": f"post number {index} says {index * 7919} things"}).encode()


def test_follow_judges_every_event_a_server_sent_before_it_closed(tmp_path: Path) -> None:
    events = b"".join(b"id: %d\ndata: %s\n\n" % (i, _post(i)) for i in range(300))
    server = RawServer(lambda _: _http(events, "text/event-stream"))
    try:
        done, verdicts = _follow(server.url, tmp_path)
    finally:
        server.close()
    assert [v["id"] for v in verdicts] == [str(i) for i in range(300)]
    assert done.returncode == 1  # the source gave up: an error, after the records it sent
    stderr = done.stderr.decode()
    assert "gave up after 0 reconnects" in stderr and "unexpected" not in stderr
    assert "300 posts, 300 novel" in stderr  # the summary, on an error exit too


@pytest.mark.parametrize("kind", ["jsonl", "sse"])
def test_follow_reports_an_oversized_record_and_reads_past_it(tmp_path: Path, kind: str) -> None:
    huge = b'{"id": "big", "text": "' + b"x " * (3 << 20) + b'"}'  # 6 MiB, over the 4 MiB line limit
    if kind == "jsonl":
        body = _post(1) + b"\n" + huge + b"\n" + _post(2) + b"\n"
        response = _http(body)
    else:
        # an event whose data comes in many lines, as an endless one would
        lines = b"".join(b"data: " + huge[at : at + 65536] + b"\n" for at in range(0, len(huge), 65536))
        body = b"data: " + _post(1) + b"\n\n" + lines + b"\n" + b"data: " + _post(2) + b"\n\n"
        response = _http(body, "text/event-stream")
    server = RawServer(lambda _: response)
    try:
        done, verdicts = _follow(server.url, tmp_path)
    finally:
        server.close()
    assert [v["verdict"] for v in verdicts] == ["novel", "invalid", "novel"], done.stderr.decode()[-2000:]
    assert "over the 4194304 byte limit" in verdicts[1]["reason"]
    assert [verdicts[0]["id"], verdicts[2]["id"]] == ["1", "2"]


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "application/xhtml+xml"])
def test_a_web_page_is_no_stream(tmp_path: Path, content_type: str) -> None:
    # a login wall or a captive portal answers 200 with a page: its lines are no posts
    page = b"<html><head><title>Sign in</title></head>\n<body>Log in to go on</body></html>\n"
    server = RawServer(lambda _: _http(page, content_type))
    try:
        done, verdicts = _follow(server.url, tmp_path)
    finally:
        server.close()
    stderr = done.stderr.decode()
    assert done.returncode == 1 and verdicts == []
    assert "the server answered a web page" in stderr and "not retrying" in stderr and "unexpected" not in stderr
    assert len(server.requests) == 1


def test_an_sse_retry_past_what_int_reads_is_read(tmp_path: Path) -> None:
    events = b"retry: " + HUGE_NUMBER.encode() + b"\n\ndata: " + _post(1) + b"\n\n"
    server = RawServer(lambda _: _http(events, "text/event-stream"))
    try:
        done, verdicts = _follow(server.url, tmp_path)
    finally:
        server.close()
    assert [v["id"] for v in verdicts] == ["1"]
    assert "unexpected" not in done.stderr.decode() and "gave up after 0 reconnects" in done.stderr.decode()


def test_an_sse_retry_of_0_still_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0 doubled is 0: a server that closes at once was called again at once, for ever
    events = b"retry: 0\n\ndata: " + _post(1) + b"\n\n"
    server = RawServer(lambda _: _http(events, "text/event-stream"))
    monkeypatch.setattr(random, "uniform", lambda low, high: high)  # each wait its largest
    states: list[str] = []

    async def run() -> None:
        with anyio.fail_after(30), pytest.raises(SourceError, match="gave up after 3 reconnects"):
            async with aclosing(follow(server.url, max_retries=3, on_state=states.append)) as source:
                async for _ in source:
                    pass

    try:
        anyio.run(run)
    finally:
        server.close()
    waits = re.findall(r"trying again in ([\d.]+) s", "\n".join(states))
    assert waits == ["0.10", "0.20", "0.40"]


def test_a_server_that_answers_no_redis_answer_is_named(tmp_path: Path) -> None:
    # Not Redis: every command gets the integer 1, which redis-py's handshake cannot read.
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_every_command_with_1() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                with connection:
                    while data := connection.recv(65536):
                        connection.sendall(b":1\r\n" * data.count(b"*"))

    threading.Thread(target=answer_every_command_with_1, daemon=True).start()
    stream = tmp_path / "in.jsonl"
    stream.write_bytes(_post(1) + b"\n")
    url = f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    try:
        done = subprocess.run(replay_command(str(stream), "--store", url), capture_output=True, timeout=120)
    finally:
        listener.close()
    stderr = done.stderr.decode()
    assert done.returncode == 1 and "unexpected" not in stderr
    assert "the server's answer is not one Redis gives" in stderr and "is a Redis server listening there?" in stderr


def test_a_redirect_to_another_host_gets_no_custom_header(tmp_path: Path) -> None:
    target = RawServer(lambda _: _http(_post(1) + b"\n"))
    origin = RawServer(lambda _: _http(b"", status="302 Found", extra=f"Location: {target.url}/elsewhere\r\n"))
    try:
        done, verdicts = _follow(origin.url, tmp_path, "--header", "X-Api-Key: s3cret")
    finally:
        origin.close()
        target.close()
    assert [v["id"] for v in verdicts] == ["1"], done.stderr.decode()
    assert "s3cret" in origin.requests[0]
    assert target.requests and all("s3cret" not in request for request in target.requests)


def test_a_redirect_loop_is_a_clear_error(tmp_path: Path) -> None:
    server = RawServer(lambda _: _http(b"", status="302 Found", extra="Location: /again\r\n"))
    try:
        done, _ = _follow(server.url + "/start?access_token=hunter2", tmp_path)
    finally:
        server.close()
    stderr = done.stderr.decode()
    assert done.returncode == 1
    assert "more than 10 redirects" in stderr and "unexpected" not in stderr
    assert "hunter2" not in stderr  # the token is redacted from every message


def _follow_websocket(
    records: list[bytes], tmp_path: Path, binary: tuple[int, ...] = ()
) -> tuple[list[dict[str, Any]], str]:
    """The verdicts of ``follow`` on a WebSocket that sends ``records`` (those
    at ``binary`` as binary messages), stopped once each has one; and its stderr."""
    from .live_servers import StreamServer

    verdicts_path = tmp_path / "ws.jsonl"
    with StreamServer("ws", records, binary=binary) as server:
        follow = subprocess.Popen(
            [sys.executable, "-m", "streamfilter", "follow", server.url, "--verdicts", str(verdicts_path)],
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not verdicts_path.exists() or len(verdicts_path.read_text().splitlines()) < len(records)
        ):
            time.sleep(0.1)
        follow.send_signal(signal.SIGINT)  # a live stream never ends: stop it once every record is judged
        _, stderr = follow.communicate(timeout=60)
    verdicts = [json.loads(line) for line in verdicts_path.read_text().splitlines()]
    return verdicts, stderr.decode()[-2000:]


def test_a_binary_websocket_message_is_a_record_too(tmp_path: Path) -> None:
    # once dropped unseen: a post sent as binary (as some servers send JSON), and a compressed one
    records = [_post(1), _post(2), zlib.compress(_post(3)), _post(4)]
    verdicts, stderr = _follow_websocket(records, tmp_path, binary=(1, 2))
    assert [(v["id"], v["verdict"]) for v in verdicts] == [
        ("1", "novel"),
        ("2", "novel"),
        ("line:3", "invalid"),
        ("4", "novel"),
    ], stderr
    assert "invalid UTF-8" in verdicts[2]["reason"]


def test_follow_reads_past_an_oversized_websocket_message(tmp_path: Path) -> None:
    huge = b'{"id": "big", "text": "' + b"y " * (3 << 20) + b'"}'
    verdicts, stderr = _follow_websocket([_post(1), huge, _post(2)], tmp_path)
    assert [v["verdict"] for v in verdicts] == ["novel", "invalid", "novel"], stderr
    assert "over the 4194304 byte limit" in verdicts[1]["reason"]
