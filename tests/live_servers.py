"""Streaming servers on loopback for the live-source tests: JSON Lines over
chunked HTTP, Server-Sent Events, and WebSocket (wsproto). Each replays
recorded payloads and drops the connection at the positions it is given, the
first time it reaches each of them, so clients must reconnect and resume.

Each server runs its own event loop in a thread, so in-process tests and
CLI subprocesses can both reach it. Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request, TextMessage

_TIME_US_FIELD = re.compile(rb'"time_us"\s*:\s*(\d+)')


@dataclass
class Connection:
    """What one client connection asked for."""

    path: str
    headers: dict[str, str]
    query: dict[str, list[str]] = field(default_factory=dict)


class StreamServer:
    """``kind`` is "jsonl", "sse" or "ws"; ``records`` are sent in order.

    ``drops`` are record positions: the first time the server is about to
    send record ``n`` of a drop position, it sends half of it and closes the
    connection without ending the stream properly. Resume follows the
    protocol: SSE from the event after ``Last-Event-ID``; WebSocket from
    ``cursor`` (inclusive, as Jetstream does) when records carry ``time_us``,
    and otherwise, like JSON Lines, from where the last connection broke off,
    as a live stream would.
    """

    def __init__(
        self,
        kind: str,
        records: Sequence[bytes],
        drops: Sequence[int] = (),
        refusals: Sequence[str] = (),
        interval: float = 0.0,
        ids: Sequence[bytes] | None = None,
        binary: Sequence[int] = (),
    ) -> None:
        self.kind = kind
        self.binary = set(binary)  # WebSocket: record positions sent as binary messages
        # SSE ids, one per record (default: its position from 1); one the client cannot
        # send back leaves the last usable one as the resume point
        self.ids = list(ids) if ids is not None else [b"%d" % (n + 1) for n in range(len(records))]
        self.interval = interval  # seconds between records, for a stream that a test can kill midway
        self.refusals = list(refusals)  # status lines ("503 Busy\r\nRetry-After: 1") for the first connections
        self.records = list(records)
        self.pending_drops = set(drops)
        self.connections: list[Connection] = []
        self.position = 0  # next record for a connection without a resume point
        self.port = 0
        self._ready = threading.Event()
        self._stop: anyio.Event | None = None
        self._portal_thread = threading.Thread(target=anyio.run, args=(self._serve,), daemon=True)

    @property
    def url(self) -> str:
        scheme = "ws" if self.kind == "ws" else "http"
        return f"{scheme}://127.0.0.1:{self.port}/stream"

    def __enter__(self) -> StreamServer:
        self._portal_thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the stream server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            anyio.from_thread.run_sync(self._stop.set, token=self._loop_token)
        self._portal_thread.join(10)

    async def _serve(self) -> None:
        self._stop = anyio.Event()
        self._loop_token = anyio.lowlevel.current_token()
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self._ready.set()
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, self._handle)
            await self._stop.wait()
            group.cancel_scope.cancel()
        await listener.aclose()

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                head = await buffered.receive_until(b"\r\n\r\n", 65536)
            except (anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.EndOfStream):
                return
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            target = request_line.split(" ")[1]
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            parts = urlsplit(target)
            connection = Connection(parts.path, headers, parse_qs(parts.query))
            self.connections.append(connection)
            try:
                if self.kind == "ws":
                    await self._websocket(stream, head + b"\r\n\r\n" + bytes(buffered.buffer), connection)
                else:
                    await self._http(stream, connection)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                return

    def _drop_here(self, index: int) -> bool:
        if index in self.pending_drops:
            self.pending_drops.discard(index)
            return True
        return False

    async def _idle(self) -> None:
        """A live stream with nothing new: hold the connection open."""
        await anyio.sleep_forever()

    # -- HTTP: chunked JSON Lines or server-sent events ---------------------------------
    async def _http(self, stream: anyio.abc.SocketStream, connection: Connection) -> None:
        if connection.path != "/stream":
            await stream.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        if self.refusals:
            await stream.send(f"HTTP/1.1 {self.refusals.pop(0)}\r\nContent-Length: 0\r\n\r\n".encode())
            return
        sse = self.kind == "sse"
        content_type = "text/event-stream" if sse else "application/x-ndjson"
        await stream.send(
            f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        start = self.position
        if sse:
            last = connection.headers.get("last-event-id")
            start = 0 if last is None else self.ids.index(last.encode("latin-1")) + 1
            await stream.send(_chunk(b"retry: 20\n\n"))
        for index in range(start, len(self.records)):
            record = self.records[index]
            body = b"id: %s\nevent: update\ndata: %s\n\n" % (self.ids[index], record) if sse else record + b"\n"
            if self._drop_here(index):
                await stream.send(_chunk(body[: len(body) // 2]))
                return  # no closing chunk: the client sees a broken stream
            await stream.send(_chunk(body))
            self.position = index + 1
            if self.interval:
                await anyio.sleep(self.interval)
        await self._idle()

    # -- WebSocket ---------------------------------------------------------------------
    async def _websocket(self, stream: anyio.abc.SocketStream, received: bytes, connection: Connection) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        ws.receive_data(received)
        for event in ws.events():
            if isinstance(event, Request):
                await stream.send(ws.send(AcceptConnection()))
        start = self.position
        cursor = connection.query.get("cursor")
        if cursor is not None:
            start = next(
                (i for i, record in enumerate(self.records) if _time_us(record) >= int(cursor[0])),
                len(self.records),
            )
        for index in range(start, len(self.records)):
            record = self.records[index]
            if index in self.binary:
                frame = ws.send(BytesMessage(data=record))
            else:
                frame = _text_frame(record) if not _utf8(record) else ws.send(TextMessage(data=record.decode()))
            if self._drop_here(index):
                await stream.send(frame[: len(frame) // 2])
                return  # no close frame: the connection just breaks
            await stream.send(frame)
            self.position = index + 1
            if self.interval:
                await anyio.sleep(self.interval)
        await self._idle()


def _time_us(record: bytes) -> int:
    """A Jetstream event's time_us; a broken record sorts with the one before it."""
    found = _TIME_US_FIELD.search(record)
    return int(found.group(1)) if found else 0


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text_frame(payload: bytes) -> bytes:
    """A server's text frame (FIN, unmasked) around any bytes: what a broken
    server sends, which wsproto will not build."""
    if len(payload) < 126:
        return bytes([0x81, len(payload)]) + payload
    return bytes([0x81, 126]) + len(payload).to_bytes(2, "big") + payload


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)
