"""Live sources: the records of a streaming URL, reconnecting when it drops.

``follow(url)`` returns a ``LiveStream``: an async iterator of raw records
(one JSON document per record, as bytes), ready for ``StreamFilter.filter``::

    async with StreamFilter(path="index") as sf:
        async for post in sf.filter(follow("wss://jetstream2.us-east.bsky.network/subscribe")):
            ...

Three protocols, chosen from the URL and the response:

- **WebSocket** (``ws://``, ``wss://``; Bluesky Jetstream, Mastodon streaming):
  one record per message, text or binary. When frames carry ``time_us`` (Jetstream), a
  reconnect asks for ``cursor=<last time_us>``, and the frames the server
  sends again (at or before that time) are dropped, so each event comes once.
- **Server-Sent Events** (``Content-Type: text/event-stream``; Mastodon
  streaming): one record per event. A named event becomes
  ``{"event": name, "payload": data}``, the shape of Mastodon's streaming
  messages; an unnamed one is its data. A reconnect sends ``Last-Event-ID``
  and honours the server's ``retry:`` as its first wait (0 as 0.1 s, which
  doubles). An event cut off by a drop is discarded
  (the server sends it again after the last complete id).
- **JSON Lines over HTTP** (anything else but a web page; the Twitter v2 filtered stream):
  one record per non-empty line. The protocol has no resume: what the server
  sends while the client is away is not seen, and a line cut off by a drop
  is discarded.

Reconnects wait an exponential backoff with full jitter (``backoff`` is the
first and the largest wait), reset once a connection delivers a record.
Redirects are followed, ten at most; ``headers`` go only to the origin (scheme,
host and port) of ``url``, never to another host a redirect names. A record
(a line, an event, a message) of more than the adapters' line limit is cut
to its head, which the adapters report as too long, and the rest is read past,
so no message can exhaust memory. Passwords and token-like query values are
left out of every message. HTTP 400, 401, 403, 404, 405 and 410 are not retried,
nor is a web page (``text/html``: a login wall, a portal), whose lines are no posts;
429, 5xx and other failures are, no sooner than their Retry-After asks
(in seconds or as a date, an hour at most; a value of neither form is not
obeyed). Connection state goes
to ``on_state`` (the CLI prints it on stderr) or the ``streamfilter`` logger.

**Restarts.** ``LiveStream.position`` is where a new connection must start
to get every record after the last one yielded: ``cursor:<time_us>`` for
Jetstream, ``last-event-id:<id>`` for SSE, None for a protocol without one.
The pipeline commits it with each batch, under ``resume_key(url)``, and
``follow(url, resume_from=position)`` starts there.
"""

from __future__ import annotations

import codecs
import functools
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from ._backoff import Backoff
from ._exceptions import ConfigError, MissingDependencyError, SourceError
from ._reconnect import Delivered, Retryable, capped_count, describe, retry_after
from ._redact import redact
from ._wording import counted
from .adapters._base import CLIPPED_LINE_BYTES, MAX_LINE_BYTES

__all__ = ["LiveStream", "SourceError", "check_url", "follow", "resume_key"]

logger = logging.getLogger("streamfilter")

# at most 19 digits: a longer time_us is no time (the adapter says so), and int() of thousands is slow
_TIME_US = re.compile(rb'"time_us"\s*:\s*(\d{1,19})(?!\d)')
_FATAL_STATUS = {400, 401, 403, 404, 405, 410}
_MAX_REDIRECTS = 10
_WEB_PAGES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass
class _Resume:
    """What a reconnect needs to pick up where the last connection stopped."""

    last_event_id: str | None = None  # SSE
    retry_ms: int | None = None  # SSE retry: field
    cursor: int | None = None  # Jetstream time_us
    at_cursor: set[bytes] = field(default_factory=set)  # frames already seen at that time_us

    def position(self) -> str | None:
        """The resume point as an index records it: every record up to the last one seen is covered."""
        if self.last_event_id is not None:
            return f"last-event-id:{self.last_event_id}"
        if self.cursor is not None:
            return f"cursor:{self.cursor}"
        return None

    @classmethod
    def from_position(cls, position: str | None) -> _Resume:
        if position is None:
            return cls()
        kind, _, value = position.partition(":")
        if kind == "last-event-id":
            return cls(last_event_id=value)
        if kind == "cursor" and value.isdigit():
            return cls(cursor=int(value))
        raise ConfigError(f"{position!r} is not a resume point follow records (last-event-id:ID or cursor:TIME_US)")


def _imports() -> tuple[Any, Any]:
    try:
        import httpx
        import wsproto
    except ImportError as exc:
        raise MissingDependencyError("following live streams (httpx, wsproto)", "live") from exc
    return httpx, wsproto


def follow(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_retries: int | None = None,
    backoff: tuple[float, float] = (0.5, 60.0),
    read_timeout: float = 90.0,
    on_state: Callable[[str], None] | None = None,
    resume_from: str | None = None,
) -> LiveStream:
    """The records of a live stream, reconnecting with backoff until cancelled.

    ``max_retries`` bounds the reconnects in a row that deliver nothing
    (None: forever); past it, SourceError. ``read_timeout`` is how long a
    silent connection is trusted before it is dropped and made again.
    ``resume_from`` is a ``LiveStream.position`` of an earlier run: the first
    connection asks the server to start there (None: start now).
    """
    check_url(url)
    return LiveStream(
        url,
        _Resume.from_position(resume_from),
        headers=dict(headers or {}),
        max_retries=max_retries,
        backoff=backoff,
        read_timeout=read_timeout,
        on_state=on_state,
    )


def resume_key(url: str) -> str:
    """The name a live URL's resume point is recorded under in an index.

    Secrets and the ``cursor`` parameter are left out, so a rotated token or
    a resumed cursor still names the same stream; any other difference in
    the URL names another one."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "cursor"]
    return "follow " + redact(urlunsplit(parts._replace(query=urlencode(query))))


class LiveStream:
    """The records of a live URL, as ``follow`` returns them: an async
    iterator of raw records (bytes), with what a service needs to watch and
    restart it.

    ``position`` is the point a restart resumes at to get every record after
    the last one yielded (a string to pass back as ``follow(...,
    resume_from=)``; None when the protocol offers none). ``StreamFilter``
    records it under ``resume_key`` in the same transaction as the batch it
    ends, and ``StreamFilter.resume_point(url)`` reads it back.
    """

    def __init__(
        self,
        url: str,
        resume: _Resume,
        *,
        headers: dict[str, str],
        max_retries: int | None,
        backoff: tuple[float, float],
        read_timeout: float,
        on_state: Callable[[str], None] | None,
    ) -> None:
        self.url = url
        self.resume_key = resume_key(url)
        self.reconnects = 0  # connections lost and made again
        self.connected = False  # a connection is open and answered
        self._resume = resume
        self._stopping = False
        self._scope: anyio.CancelScope | None = None
        self._records = self._run(headers, max_retries, backoff, read_timeout, on_state)

    @property
    def position(self) -> str | None:
        return self._resume.position()

    def stop(self) -> None:
        """End the iteration: no record after the one being read is yielded."""
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()

    def __aiter__(self) -> LiveStream:
        return self

    async def __anext__(self) -> bytes:
        if self._stopping:
            raise StopAsyncIteration
        with anyio.CancelScope() as self._scope:
            return await self._records.__anext__()
        raise StopAsyncIteration  # stopped while waiting for a record

    async def aclose(self) -> None:
        await self._records.aclose()

    async def _run(
        self,
        headers: dict[str, str],
        max_retries: int | None,
        backoff: tuple[float, float],
        read_timeout: float,
        on_state: Callable[[str], None] | None,
    ) -> AsyncGenerator[bytes, None]:
        url = self.url
        shown = redact(url)
        httpx, wsproto = _imports()
        log = on_state or (lambda message: logger.info("%s", message))

        def report(message: str) -> None:
            self.connected = False
            log(message)

        def connected(message: str) -> None:
            self.connected = True
            log(message)

        transient = (
            httpx.TransportError,
            httpx.DecodingError,  # a compressed body that turns corrupt: the records before it are kept
            wsproto.utilities.RemoteProtocolError,
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            OSError,  # TimeoutError and ssl errors too
        )
        resume = self._resume
        first, largest = backoff
        waits = Backoff(first, largest, full=True)
        delivered = Delivered()
        ever_connected = False  # a server answered once: a failure now is a lost connection
        timeout = httpx.Timeout(10.0, read=read_timeout)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            while True:
                reason = "the server ended the stream"
                wait_at_least = 0.0
                try:
                    records = _connect(client, url, shown, resume, connected, headers, read_timeout)
                    async with aclosing(records):
                        async for record in records:
                            if delivered.is_new(record):  # a reconnect that replays what came before is no success
                                waits.reset()
                            yield record
                except transient as exc:
                    reason = describe(exc)
                except Retryable as exc:
                    reason, wait_at_least = str(exc), exc.retry_after
                finally:
                    ever_connected = ever_connected or self.connected
                    self.connected = False
                # A server's SSE retry replaces the first wait, though never with 0,
                # which doubles to 0: a server that closes at once would be called
                # again at once, for ever.
                base = None if resume.retry_ms is None else max(resume.retry_ms / 1000, min(first, 0.1))
                delay = max(wait_at_least, waits.wait(base) or 0.0)
                failures = waits.failures
                self.reconnects += 1
                if max_retries is not None and failures > max_retries:
                    if not ever_connected:
                        raise SourceError(f"{shown}: could not connect in {counted(failures, 'attempt')} ({reason})")
                    raise SourceError(f"{shown}: gave up after {counted(max_retries, 'reconnect')} ({reason})")
                limit = f"{failures} of {max_retries}" if max_retries is not None else f"{failures}, with no limit"
                what = "connection lost" if ever_connected else "cannot connect"
                report(f"{shown}: {what} ({reason}); trying again in {delay:.2f} s (retry {limit})")
                await anyio.sleep(delay)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    return parts.scheme, parts.hostname, parts.port or default


async def _response(
    client: Any, url: str, shown: str, request_headers: dict[str, str | bytes], headers: dict[str, str]
) -> Any:
    """The streaming response to GET ``url``, redirects followed by hand:
    ``headers`` (the caller's) go only to ``url``'s own origin."""
    origin = _origin(url)
    target = url
    for _ in range(_MAX_REDIRECTS + 1):
        sent = {**request_headers, **(headers if _origin(target) == origin else {})}
        response = await client.send(client.build_request("GET", target, headers=sent), stream=True)
        if not response.is_redirect or "location" not in response.headers:
            return response
        await response.aclose()
        target = str(response.url.join(response.headers["location"]))
        if urlsplit(target).scheme not in ("http", "https"):
            raise SourceError(f"{shown}: redirected to {redact(target)}, which is not HTTP; not retrying")
    raise SourceError(f"{shown}: more than {_MAX_REDIRECTS} redirects (a redirect loop?); not retrying")


async def _connect(
    client: Any,
    url: str,
    shown: str,
    resume: _Resume,
    connected: Callable[[str], None],
    headers: dict[str, str],
    read_timeout: float,
) -> AsyncGenerator[bytes, None]:
    """The records of one connection, until it ends or breaks; ``connected``
    gets the message that says the server answered."""
    scheme = urlsplit(url).scheme
    if scheme in ("ws", "wss"):
        async with aclosing(_websocket(url, shown, resume, connected, headers, read_timeout)) as frames:
            async for record in frames:
                yield record
        return
    request_headers: dict[str, str | bytes] = {"Accept": "text/event-stream, application/x-ndjson, application/json"}
    if resume.last_event_id is not None:
        request_headers["Last-Event-ID"] = resume.last_event_id.encode("utf-8")  # the HTML standard: UTF-8
    response = await _response(client, url, shown, request_headers, headers)
    try:
        status = response.status_code
        if status in _FATAL_STATUS:
            raise SourceError(f"{shown}: HTTP {status} {response.reason_phrase}; not retrying")
        if status >= 300:
            raise Retryable(f"HTTP {status} {response.reason_phrase}", retry_after(response.headers.get("retry-after")))
        media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type in _WEB_PAGES:  # a login wall or a portal, not a stream: its lines are no posts
            raise SourceError(f"{shown}: the server answered a web page ({media_type}), not a stream; not retrying")
        event_stream = media_type == "text/event-stream"
        connected(
            f"{shown}: connected"
            + (
                " (server-sent events"
                + (f", resuming after id {resume.last_event_id})" if resume.last_event_id else ")")
                if event_stream
                else " (JSON lines)"
            )
        )
        async with aclosing(response.aiter_bytes()) as chunks, aclosing(_lines(chunks)) as lines:
            if event_stream:
                async with aclosing(_events(lines, resume)) as events:
                    async for record in events:
                        yield record
            else:
                async for line in lines:
                    if line.strip():
                        yield line
    finally:
        await response.aclose()


async def _websocket(
    url: str,
    shown: str,
    resume: _Resume,
    connected: Callable[[str], None],
    headers: dict[str, str],
    read_timeout: float,
) -> AsyncGenerator[bytes, None]:
    """The messages of a WebSocket, with wsproto over an anyio stream: text,
    and binary too (a record in UTF-8 JSON is one; any other, such as a
    compressed one, is judged invalid by its bytes, never dropped unseen).

    No background task: pings are answered between reads, so the generator
    holds no task group or cancel scope across its yields.
    """
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import (
        AcceptConnection,
        BytesMessage,
        CloseConnection,
        Ping,
        RejectConnection,
        RejectData,
        Request,
        TextMessage,
    )

    target = urlsplit(_with_cursor(url, resume.cursor))
    secure = target.scheme == "wss"
    host = target.hostname or "localhost"
    port = target.port or (443 if secure else 80)
    # anyio starts TLS whenever tls_hostname is given, so only wss gets one
    stream = await (
        anyio.connect_tcp(host, port, tls=True, tls_hostname=host) if secure else anyio.connect_tcp(host, port)
    )
    async with stream:
        ws = WSConnection(ConnectionType.CLIENT)
        path = (target.path or "/") + (f"?{target.query}" if target.query else "")
        extra = [(name.encode(), value.encode()) for name, value in headers.items()]
        await stream.send(ws.send(Request(host=target.netloc, target=path, extra_headers=extra)))
        parts: list[bytes] = []
        size = 0  # characters (or bytes) of the message so far
        while True:
            with anyio.fail_after(read_timeout):
                data = await stream.receive()
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    _keep_invalid_text(ws)
                    resuming = f", resuming at cursor {resume.cursor}" if resume.cursor else ""
                    connected(f"{shown}: connected{resuming}")
                elif isinstance(event, RejectConnection):
                    if event.status_code in _FATAL_STATUS:
                        raise SourceError(f"{shown}: HTTP {event.status_code} on the WebSocket upgrade; not retrying")
                    raise Retryable(f"HTTP {event.status_code} on the WebSocket upgrade")
                elif isinstance(event, RejectData):
                    continue
                elif isinstance(event, Ping):
                    await stream.send(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    await stream.send(ws.send(event.response()))
                    return
                elif isinstance(event, TextMessage | BytesMessage):
                    if size <= MAX_LINE_BYTES:  # past it, the head is kept and the rest read past
                        piece = event.data
                        size += len(piece)
                        # invalid UTF-8 comes back as the bytes it was (see _keep_invalid_text)
                        piece = piece.encode("utf-8", "surrogateescape") if isinstance(piece, str) else piece
                        parts.append(bytes(piece))
                    if not event.message_finished:
                        continue
                    record = b"".join(parts)[:CLIPPED_LINE_BYTES]
                    parts, size = [], 0
                    if _seen_before(record, resume):
                        continue
                    yield record


def _keep_invalid_text(ws: Any) -> None:
    """Let a text frame that is not UTF-8 through as the record it is.

    RFC 6455 has a client fail the connection on such a frame, and wsproto
    does: the stream ended, and the records sent after it until the
    reconnect were lost, for one bad record. Instead its bytes are kept
    (decoded with surrogateescape, encoded back the same way), and the
    adapters judge it ``invalid`` by its line, as replay does a bad line.
    This reaches into wsproto's message decoder (wsproto 1.x); where that
    is not there, wsproto's own strict behaviour stays."""
    protocol = getattr(getattr(ws, "connection", None), "_proto", None)
    if protocol is not None and hasattr(protocol, "_message_decoder"):
        protocol._message_decoder = _keep_invalid_text_decoder()()


@functools.cache
def _keep_invalid_text_decoder() -> Any:
    """wsproto's message decoder, with the UTF-8 decoder of each text message
    made lenient (surrogateescape); built once, wsproto being imported late."""
    from wsproto.frame_protocol import MessageDecoder

    class KeepInvalidText(MessageDecoder):
        @property
        def decoder(self) -> Any:
            return self._lenient

        @decoder.setter
        def decoder(self, value: Any) -> None:
            # wsproto sets a strict decoder at each text message's first frame
            self._lenient = None if value is None else codecs.getincrementaldecoder("utf-8")("surrogateescape")

    return KeepInvalidText


def _seen_before(record: bytes, resume: _Resume) -> bool:
    """Track Jetstream's time_us; True for a frame sent again after a cursor resume."""
    found = _TIME_US.search(record)
    if found is None:
        return False
    time_us = int(found.group(1))
    if resume.cursor is not None and (
        time_us < resume.cursor or (time_us == resume.cursor and record in resume.at_cursor)
    ):
        return True
    if time_us != resume.cursor:
        resume.cursor, resume.at_cursor = time_us, set()
    resume.at_cursor.add(record)
    return False


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """Complete lines, without their line ending; a trailing partial line is dropped.

    A line longer than the adapters' limit is yielded as its first
    ``CLIPPED_LINE_BYTES`` (which they report as too long, as ``replay``
    does), and the rest of it, up to its end, is read past: it is never held
    whole, nor taken for a line of its own.
    """
    pending = b""
    skipping = False  # inside the rest of an over-long line
    async for chunk in chunks:
        if skipping:
            end = chunk.find(b"\n")
            if end < 0:
                continue
            chunk, skipping = chunk[end + 1 :], False
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line[:-1] if line.endswith(b"\r") else line
        if len(pending) > MAX_LINE_BYTES:
            yield pending[:CLIPPED_LINE_BYTES]
            pending, skipping = b"", True


async def _events(lines: AsyncIterator[bytes], resume: _Resume) -> AsyncGenerator[bytes, None]:
    """Server-sent events, parsed as the HTML standard says."""
    name, event_id = b"", resume.last_event_id
    data: list[bytes] = []
    size = 0  # bytes of data so far: past the line limit, only the head is kept
    async for line in lines:
        if not line:
            if data:
                resume.last_event_id = event_id
                payload = b"\n".join(data)[:CLIPPED_LINE_BYTES]
                if name in (b"", b"message"):
                    yield payload
                else:
                    yield json.dumps(
                        {"event": name.decode("utf-8", "replace"), "payload": payload.decode("utf-8", "replace")}
                    ).encode()
            name, data, size = b"", [], 0
            continue
        if line.startswith(b":"):
            continue
        field_name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field_name == b"data":
            if size <= MAX_LINE_BYTES:
                data.append(value)
                size += len(value) + 1
        elif field_name == b"event":
            name = value
        elif field_name == b"id" and _usable_id(value):
            event_id = value.decode("utf-8")
        elif field_name == b"retry" and value.isdigit():  # ASCII digits: bytes have no others
            resume.retry_ms = capped_count(value, 10**9)  # the backoff's largest wait caps it anyway


def _usable_id(value: bytes) -> bool:
    """An SSE id that can go back in a Last-Event-ID header: UTF-8, no control
    characters, at most 1 KiB. The standard ignores only ids with NUL; an id a
    header cannot carry would make every reconnect fail, so it is ignored too,
    and the last usable id stays the resume point."""
    if len(value) > 1024 or any(byte < 0x20 and byte != 0x09 or byte == 0x7F for byte in value):
        return False
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_url(url: str) -> None:
    """A URL follow can use, or a ConfigError saying what is wrong with it."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ConfigError(f"{redact(url)!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https", "ws", "wss"):
        raise ConfigError(f"{redact(url)!r}: follow takes http://, https://, ws:// or wss:// URLs")
    if not host:
        raise ConfigError(f"{redact(url)!r} names no host")


def _with_cursor(url: str, cursor: int | None) -> str:
    if cursor is None:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "cursor"]
    query.append(("cursor", str(cursor)))
    return urlunsplit(parts._replace(query=urlencode(query)))
