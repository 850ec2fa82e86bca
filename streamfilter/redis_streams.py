"""One live stream split between many workers: a Redis Streams consumer group as a source.

``StreamGroup(url)`` is an async iterator of records for ``StreamFilter``,
one per stream entry (its ``field``, by default ``data``: a JSON line as
``replay`` reads it). Every worker names the same stream and group and its
own consumer; Redis hands each entry to one of them::

    group = StreamGroup("redis://localhost:6379/0?stream=posts&group=dedup")
    hooks = CommitHooks(after_commit=group.acknowledge)
    async for verdicts in sf.judge_batches(group, hooks): ...

Delivery is at least once:

- entries are read with ``XREADGROUP`` in batches of up to ``count``, by a
  script (``read_entries.lua``) that leaves a value over the record limit in
  Redis and sends its size instead: such an entry is judged invalid, and an
  entry of any size costs this process a few bytes. A script cannot block,
  so new entries are polled for (2 ms after an empty read, then up to 50 ms
  apart);
- an entry is acknowledged (``XACK``) by ``acknowledge(line)``, which the
  pipeline calls once the batch that ends at that record has committed and
  its output is written. A worker that dies before leaves its entries pending;
- a worker claims entries that have been pending longer than ``claim_idle``
  seconds, whoever holds them (``XAUTOCLAIM``), and at start it reads again
  the entries it holds itself (a restart under the same consumer name);
- an entry without the field, or with one over the limit, is an invalid record (``InvalidRecordError``,
  judged ``invalid``) and is acknowledged like any other, so it never blocks
  the group.

A missing group is created at the start of the stream (``0``, with
``MKSTREAM``), or at its end (``$``) with ``from_now``. A dropped connection
is retried with backoff for ``retry_for`` seconds (``?retry_for=`` in the
URL; 30 by default), then SourceError. A Cluster is detected from
the node the URL names; the stream is one key, so one node serves it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import anyio

from ._backoff import Backoff
from ._exceptions import ConfigError, InvalidRecordError, SourceError
from ._redact import redact
from ._redis_client import close_client, import_redis, split_redis_url
from .adapters._base import MAX_LINE_BYTES

__all__ = ["StreamGroup"]

logger = logging.getLogger("streamfilter")


def _split(url: str) -> tuple[str, str, str, float | None]:
    """(the Redis URL without our parameters, the stream, the group, retry_for if given)."""
    bare, ours, retry_for = split_redis_url(url, ("stream", "group"), "consume")
    missing = [name for name in ("stream", "group") if not ours.get(name)]
    if missing:
        raise ConfigError(f"{redact(url)!r} names no {' and no '.join(missing)}: add ?stream=NAME&group=GROUP")
    return bare, ours["stream"], ours["group"], retry_for


_READ_ENTRIES = resources.files("streamfilter.stores.redis").joinpath("read_entries.lua").read_text(encoding="utf-8")
_TOO_LONG = b"\0streamfilter-too-long:"  # what read_entries.lua puts for a value over the limit


def _entries(items: Any) -> list[tuple[bytes, dict[bytes, bytes] | None]]:
    """XREADGROUP's entries as a script returns them (flat field lists) as (id, fields)."""
    return [
        (entry_id, None if not flat else dict(zip(flat[::2], flat[1::2], strict=True)))
        for entry_id, flat in items or ()
    ]


class StreamGroup:
    """One consumer of a Redis Streams consumer group (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        consumer: str | None = None,
        field: str = "data",
        from_now: bool = False,
        claim_idle: float = 60.0,
        count: int = 512,
        block: float = 1.0,
        retry_for: float | None = None,
        on_state: Callable[[str], None] | None = None,
    ) -> None:
        self.url, self.stream, self.group, from_url = _split(url)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.field = field.encode()
        self.from_now = from_now
        self.claim_idle = claim_idle
        self.count = count
        self.block = block
        self.retry_for = retry_for if retry_for is not None else from_url if from_url is not None else 30.0
        self.reconnects = 0
        self.connected = False
        self._report = on_state or (lambda message: logger.info("%s", message))
        self._shown = f"{redact(self.url)} stream {self.stream}"
        self._client: Any = None
        self._script: Any = None  # read_entries.lua, registered on the client
        self._redis: Any = None
        self._ready: deque[tuple[bytes, dict[bytes, bytes]]] = deque()  # fetched, not yet yielded
        self._unacked: deque[tuple[int, bytes]] = deque()  # (record number, entry id), yielded
        self._entry_of: dict[int, bytes] = {}  # record number -> entry id, until acknowledged
        self._line = 0
        self._own_after: bytes | str | None = "0"  # reading this consumer's own pending entries after this id
        self._next_claim = 0.0  # when to look for idle entries of other consumers again
        self._claim_cursor: bytes | str = "0-0"  # where the last XAUTOCLAIM stopped
        self._stopping = False

    # -- the source ---------------------------------------------------------------
    def where(self, line: int) -> str:
        entry = self._entry_of.get(line)
        return f"{self._shown} entry {entry.decode() if entry else f'#{line}'}"

    def stop(self) -> None:
        """Read no more entries; those already read are still yielded, judged
        and acknowledged, so a stopped consumer leaves nothing pending. A read
        in flight blocks for at most ``block`` seconds, and is let finish:
        cancelling it would leave what it read pending, for another consumer
        to claim only after ``claim_idle``."""
        self._stopping = True

    def __aiter__(self) -> StreamGroup:
        return self

    async def __anext__(self) -> bytes | InvalidRecordError:
        while not self._ready:
            if self._stopping:
                raise StopAsyncIteration
            self._ready.extend(await anyio.to_thread.run_sync(self._fetch))
        entry_id, fields = self._ready.popleft()
        self._line += 1
        self._unacked.append((self._line, entry_id))
        self._entry_of[self._line] = entry_id
        record = fields.get(self.field)
        if record is None:
            return InvalidRecordError(f"the entry has no field {self.field.decode()!r}")
        if record.startswith(_TOO_LONG):  # read_entries.lua left the value in Redis
            size = int(record[len(_TOO_LONG) :])
            return InvalidRecordError(
                f"the entry's field {self.field.decode()!r} is {size:,} bytes, over the {MAX_LINE_BYTES} byte limit"
            )
        return record

    async def aclose(self) -> None:
        if self._client is not None:
            close_client(self._client)
            self._client = None

    def acknowledge(self, last_line: int) -> None:
        """XACK every entry yielded up to record ``last_line`` (committed and written by now)."""
        ids = []
        while self._unacked and self._unacked[0][0] <= last_line:
            line, entry_id = self._unacked.popleft()
            self._entry_of.pop(line, None)
            ids.append(entry_id)
        if ids:
            self._retrying("acknowledge entries", lambda: self._client.xack(self.stream, self.group, *ids))

    def add(self, stream: str, records: Sequence[bytes]) -> None:
        """XADD each record to ``stream`` under the same field (``--out-stream``)."""
        if not records:
            return

        def send() -> None:
            pipe = self._client.pipeline(transaction=False)
            for record in records:
                pipe.xadd(stream, {self.field: record})
            pipe.execute()

        self._retrying(f"add to stream {stream}", send)

    # -- Redis ----------------------------------------------------------------------
    def connect(self) -> None:
        """Connect, and create the group if it is missing."""
        if self._client is not None:
            return
        redis = self._redis = import_redis()
        try:
            client = redis.Redis.from_url(self.url, socket_timeout=30, socket_connect_timeout=5)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {redact(self.url)}: {exc}") from exc
        self._client = client
        if self._retrying("connect", lambda: bool(client.info("cluster").get("cluster_enabled"))):
            client.close()
            self._client = redis.cluster.RedisCluster.from_url(self.url, socket_timeout=30, socket_connect_timeout=5)
        self._script = self._client.register_script(_READ_ENTRIES)
        try:
            start = "$" if self.from_now else "0"
            self._retrying("create the group", lambda: self._client.xgroup_create(self.stream, self.group, start, True))
            self._report(f"{self._shown}: created group {self.group} at {'the end' if self.from_now else 'the start'}")
        except SourceError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _fetch(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """The next entries for this consumer: its own pending ones first (at
        start), then any left idle by others, then new ones.

        Every read goes through ``read_entries.lua``, which replaces a field
        value over the record limit by its size inside Redis: an entry of any
        size costs this process a few bytes, and is judged invalid. A script
        cannot block, so new entries are polled for, 2 ms after an empty read
        and up to 50 ms apart, for at most ``block`` seconds a call."""
        self.connect()
        while self._own_after is not None:
            items = self._read("read", self._own_after, "read own pending entries")
            if not items:
                self._own_after = None
                break
            self._own_after = items[-1][0]
            self._drop_deleted(items)
            entries = [(entry_id, fields) for entry_id, fields in items if fields]
            if entries:
                self._report(f"{self._shown}: {len(entries)} entries this consumer held are read again")
                return entries
        if time.monotonic() >= self._next_claim:
            cursor, items = self._read("claim", self._claim_cursor, "claim idle entries")
            # A long backlog is claimed a batch at a time, going on where the last claim stopped;
            # once the scan of the pending list comes round, it waits half the idle time.
            self._claim_cursor = cursor
            if self._claim_cursor in (b"0-0", "0-0"):
                self._next_claim = time.monotonic() + max(self.claim_idle / 2, 0.1)
            self._drop_deleted(items)  # Redis 6.2 lists deleted entries with no fields
            claimed = [(entry_id, fields) for entry_id, fields in items if fields]
            if claimed:
                self._report(f"{self._shown}: claimed {len(claimed)} entries idle for {self.claim_idle:g} s or more")
                return claimed
        deadline, pause = time.monotonic() + self.block, 0.002
        while True:
            entries = [(entry_id, fields) for entry_id, fields in self._read("read", ">", "read entries") if fields]
            if entries or self._stopping or time.monotonic() + pause > deadline:
                return entries
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _read(self, mode: str, start: bytes | str, what: str) -> Any:
        """``read_entries.lua``'s entries as (id, fields), fields None for an entry
        deleted since; for ``claim``, (next cursor, entries)."""
        args = [mode, self.group, self.consumer, self.count, start, MAX_LINE_BYTES, int(self.claim_idle * 1000)]
        reply = self._retrying(what, lambda: self._script(keys=[self.stream], args=args))
        if mode == "claim":
            return reply[0], _entries(reply[1])
        return _entries(reply)

    def _drop_deleted(self, items: list[tuple[bytes, dict[bytes, bytes] | None]]) -> None:
        """Acknowledge pending entries that were deleted from the stream: nothing is left to judge."""
        gone = [entry_id for entry_id, fields in items if not fields]
        if gone:
            self._retrying("acknowledge deleted entries", lambda: self._client.xack(self.stream, self.group, *gone))

    def _retrying(self, what: str, operation: Callable[[], Any]) -> Any:
        redis = self._redis
        transient = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        backoff, lost = Backoff(0.05, 5.0, budget=self.retry_for), False
        while True:
            try:
                result = operation()
            except redis.exceptions.AuthenticationError as exc:
                raise SourceError(f"{self._shown}: authentication failed ({exc})") from exc
            except transient as exc:
                self.connected = False
                pause = backoff.wait()
                if pause is None:
                    raise SourceError(f"{self._shown}: {what} failed for {backoff.waited:.1f} s ({exc})") from exc
                if not lost:
                    lost = True
                    self.reconnects += 1
                    self._report(f"{self._shown}: connection lost ({exc}); reconnecting")
                time.sleep(pause)
                continue
            except redis.exceptions.RedisError as exc:
                raise SourceError(f"{self._shown}: {what} failed: {exc}") from exc
            if lost:
                self._report(f"{self._shown}: connected again")
            self.connected = True
            return result
