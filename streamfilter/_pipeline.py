"""The anyio pipeline: source -> sketch stage -> store stage -> verdicts.

A live source (any iterable or async iterable of records) is judged as it
comes: one task reads records into a bounded buffer, and the judging task
takes whatever has arrived, up to ``batch_size``, as soon as it is free,
sketching and judging it in one worker-thread call. A post that finds the
filter idle is judged at once; under load, batches grow by themselves and
amortise the per-batch cost. A full buffer holds the reader back
(backpressure), so an endless stream runs in bounded memory.

A replayed file (``Chunks`` of raw lines) goes through two stages instead.
The sketch stage flushes a batch when it holds ``batch_size`` records (the
first batches an eighth of that, doubling), or ``max_delay`` seconds after
the batch's first record arrived, and starts ``sketch_processes`` worker
processes (``_workers``), handing each batch to a free one: a worker, or
this process (until a worker is ready, and beside one worker while the
sketching holds the replay back). Several batches may then be in
preparation at once; they reach the store stage in arrival order all the
same. The store stage judges them on the event loop itself (see
``_commit``).

Either way, batches are judged one at a time in arrival order, so verdicts
equal those of one-at-a-time processing.
"""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._config import FilterConfig
from ._engine import Engine, PreparedBatch
from ._normalize import load_tables
from ._prepared import WireBatch
from ._verdicts import Verdicts
from ._workers import SketchProcess, WorkerLost, default_sketch_processes, most_sketch_processes

__all__ = ["Chunks", "CommitHooks", "Resumable", "run_pipeline"]

logger = logging.getLogger("streamfilter")
_BATCHES_PER_WORKER = 2
# A replay looks this often at whether its sketching holds it back: whether
# the batches waited for a free slot more than this share of the time.
_LOOK_SECONDS = 1.0
_SKETCH_BOUND = 0.5
# Batches are sketched here too, taking turns with the store stage, while
# the sketching holds the replay back (``sketch_bound``, looked at this
# often) and fewer than this many worker processes run: beside two, whose
# start says the sketching holds it back on every core, this process has no
# time to spare (docs/design/pipeline.md).
_LOCAL_UNTIL_WORKERS = 2
_LOCAL_LOOK_SECONDS = 0.1


class Chunks:
    """Wraps a source that yields lists of records, so they cross the first
    stream as lists instead of one at a time (the CLI's file reader). An int
    in place of a list says that many records were skipped (on resume)."""

    def __init__(self, source: AsyncGenerator[list[Any] | int, None]) -> None:
        self.source = source


@runtime_checkable
class Resumable(Protocol):
    """A live source that can say where a restart should pick up (``follow``'s
    LiveStream): ``position`` covers every record yielded so far. The
    pipeline records it under ``resume_key`` with each batch it ends."""

    resume_key: str

    @property
    def position(self) -> str | None: ...


# (first record number, when it arrived by time.monotonic, the source's position after it)
_Mark = tuple[int, float, str | None]


def _take_marks(marks: deque[_Mark], last_line: int) -> tuple[float | None, str | None]:
    """When the first record up to ``last_line`` arrived, and the position after the last one."""
    arrived = position = None
    while marks and marks[0][0] <= last_line:
        _, at, position = marks.popleft()
        if arrived is None:
            arrived = at
    return arrived, position


async def _read(source: Chunks, send: ObjectSendStream[list[tuple[int, Any]]], marks: deque[_Mark]) -> None:
    line = 0
    async with send, aclosing(source.source) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, int):
                line += chunk  # records skipped on resume keep their numbers
                continue
            numbered = list(enumerate(chunk, line + 1))
            marks.append((line + 1, time.monotonic(), None))
            line += len(chunk)
            await send.send(numbered)


async def _read_live(
    source: object, send: MemoryObjectSendStream[tuple[int, Any]], failed: list[Exception], marks: deque[_Mark]
) -> None:
    """Numbers a live source's records into the buffer, marking when each
    arrived and, for a Resumable source, its position after it. Only a full
    buffer makes it wait, so records that come in a burst are all there for
    the next batch (a checkpoint per record would hand them over one by one).
    An error of the source ends the buffer and goes to ``failed``, to be
    raised once the records before it are judged."""
    resumable = source if isinstance(source, Resumable) else None

    async def put(item: tuple[int, Any]) -> None:
        try:
            send.send_nowait(item)
        except anyio.WouldBlock:
            await send.send(item)

    line = 0
    async with send:
        if isinstance(source, AsyncIterable):
            try:
                async for record in source:
                    line += 1
                    marks.append((line, time.monotonic(), None if resumable is None else resumable.position))
                    await put((line, record))
            except Exception as exc:  # noqa: BLE001 - raised by _judge_live, after what came before
                failed.append(exc)
        elif isinstance(source, Iterable):
            try:
                for record in source:
                    line += 1
                    marks.append((line, time.monotonic(), None))
                    await put((line, record))
            except Exception as exc:  # noqa: BLE001 - as above
                failed.append(exc)
        elif callable(source):
            # an async generator function passed as itself, not called: the commonest slip
            raise TypeError(
                f"source is the function {getattr(source, '__name__', source)!r}, not the records it makes: "
                f"call it, as sf.filter({getattr(source, '__name__', 'source')}())"
            )
        else:
            raise TypeError(f"source must be an iterable or async iterable of records, not {type(source).__name__}")


async def _judge_live(
    engine: Engine,
    source: object,
    send: ObjectSendStream[Verdicts | BaseException],
    hooks: CommitHooks | None,
) -> None:
    """Judge whatever has arrived, up to a batch, whenever the last batch is
    done: no wait for more when the filter is idle (docs/benchmarks.md, Streaming latency).
    A source's error is raised after the records it yielded before it."""
    await anyio.to_thread.run_sync(_ready_for_posts)  # before the first record is read
    batch_size = engine.config.batch_size
    records_send, records_receive = anyio.create_memory_object_stream[tuple[int, Any]](2 * batch_size)
    failed: list[Exception] = []
    marks: deque[_Mark] = deque()
    resume_key = source.resume_key if isinstance(source, Resumable) else None
    try:
        async with records_receive, anyio.create_task_group() as task_group:
            task_group.start_soon(_read_live, source, records_send, failed, marks)
            async for record in records_receive:
                records = [record]
                while len(records) < batch_size:
                    try:
                        records.append(records_receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                last_line = records[-1][0]
                arrived, position = _take_marks(marks, last_line)
                options = _commit_options(hooks, last_line, arrived)
                if resume_key is not None and position is not None:
                    options["progress"] = {**(options.get("progress") or {}), resume_key: position}
                # One thread call for both stages; not cancellable mid-transaction,
                # so a cancelled pipeline still commits or aborts the batch in flight.
                verdicts = await anyio.to_thread.run_sync(
                    functools.partial(_judge_now, engine, records, options, hooks, last_line)
                )
                try:
                    await send.send(verdicts)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    break  # the consumer stopped listening; its pipeline ends here
            else:
                if failed:
                    raise failed[0]
            task_group.cancel_scope.cancel()
    finally:
        # The source is closed once every record it gave is judged (and, for
        # a Redis stream, acknowledged through it), never while they wait in
        # the buffer; and a pipeline that stops early closes it too (an async
        # generator would otherwise be left to the GC).
        close = getattr(source, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()


def _ready_for_posts() -> None:
    """Do what the first posts of a live stream would otherwise wait for: the
    normaliser's tables (the emoji data), and Python's first full garbage
    collection. CPython makes its first full collection the tenth time its
    middle generation is collected, whatever the heap then holds: a few
    seconds into a stream, a pause over the imports and tables
    (docs/benchmarks.md, "Streaming latency"). Made here, it sets the
    collector's baseline, and the next full one waits until the objects that
    outlive collections have grown by a quarter."""
    load_tables()
    gc.collect()


def _judge_now(
    engine: Engine, records: list[tuple[int, Any]], options: dict[str, Any], hooks: CommitHooks | None, last_line: int
) -> Verdicts:
    return _commit_now(engine, engine.prepare(records), options, hooks, last_line)


def _commit_now(
    engine: Engine,
    prepared: PreparedBatch | WireBatch,
    options: dict[str, Any],
    hooks: CommitHooks | None,
    last_line: int,
) -> Verdicts:
    verdicts = engine.commit(prepared.prepared(), **options)  # a worker's batch is rebuilt here (WireBatch)
    if hooks is not None and hooks.after_commit is not None:
        hooks.after_commit(last_line)
    return verdicts


def _commit_options(hooks: CommitHooks | None, last_line: int, arrived: float | None) -> dict[str, Any]:
    """``Engine.commit``'s keyword arguments for a batch ending at ``last_line``;
    the progress is read here, on the event loop, where the reader updates it."""
    if hooks is None:
        return {"arrived": arrived}
    progress = hooks.progress(last_line) if hooks.progress else None
    return {"progress": progress, "deliver": hooks.deliver, "where": hooks.where, "arrived": arrived}


class _Local:
    """Prepares a batch in a worker thread of this process."""

    def __init__(self, engine: Engine, limiter: anyio.CapacityLimiter) -> None:
        self.engine = engine
        self.limiter = limiter

    async def prepare(self, records: list[tuple[int, Any]]) -> PreparedBatch:
        return await anyio.to_thread.run_sync(self.engine.prepare, records, limiter=self.limiter)


class _Pending:
    """One dispatched batch: its verdict-ready form once prepared, or the error."""

    __slots__ = ("batch", "done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.batch: PreparedBatch | WireBatch | None = None
        self.error: BaseException | None = None


def sketch_bound(slot_waits: float, store_busy: float, elapsed: float) -> bool:
    """Whether a replay's sketching held it back over ``elapsed`` seconds:
    batches waited for a free slot more than half of them, and the store
    stage judged less than half of them. One more worker process then pays:
    measured, a stream whose store stage was busy more than half the time
    got slower with a second one (docs/benchmarks.md, "300,000 posts")."""
    return slot_waits > _SKETCH_BOUND * elapsed and store_busy < _SKETCH_BOUND * elapsed


@dataclass
class _Load:
    """Where a replay's two stages count their waits, for ``_sketch`` to
    decide whether a worker process more would help."""

    slot_waits: float = 0.0  # seconds batches waited for a free slot to be sketched in
    store_busy: float = 0.0  # seconds the store stage spent judging

    async def held_back_over(self, seconds: float) -> bool:
        """Whether the sketching held the replay back over the next ``seconds`` (``sketch_bound``)."""
        began, waited, busy = anyio.current_time(), self.slot_waits, self.store_busy
        await anyio.sleep(seconds)
        return sketch_bound(self.slot_waits - waited, self.store_busy - busy, anyio.current_time() - began)


async def _sketch(
    engine: Engine,
    receive: MemoryObjectReceiveStream[list[tuple[int, Any]]],
    send: ObjectSendStream[PreparedBatch | WireBatch],
    limiter: anyio.CapacityLimiter,
    processes: int,
    most: int,
    load: _Load,
) -> None:
    """Gather batches and prepare each in a free slot: this process (in turns
    with the store stage, until the first worker has started, then while the
    sketching holds the replay back beside one worker), or one of
    ``processes`` worker processes once they have started. Batches leave in
    arrival order whichever slot finishes first. Up to ``most`` processes
    (never fewer than ``processes``):
    one more starts while the batches wait for a free slot and the store
    stage waits for them, each most of the time (the sketching, not the
    store, holds the stream back: long texts in scripts the normaliser works
    hardest on). ``load`` is where the two stages count those waits."""
    local = _Local(engine, limiter)
    # Each worker takes two batches at a time, so it never waits for its next one.
    slots = 1 + _BATCHES_PER_WORKER * most
    free_send, free_receive = anyio.create_memory_object_stream[_Local | SketchProcess](slots)
    order_send, order_receive = anyio.create_memory_object_stream[_Pending](slots)
    free_send.send_nowait(local)
    workers: list[SketchProcess] = []
    live: set[SketchProcess] = set()  # started and not lost
    local_retired = False  # taken out of the free slots (``local_in_use``)
    local_wanted = False  # whether the sketching held the replay back when last looked at
    starting, watching = anyio.CancelScope(), anyio.CancelScope()

    def local_in_use() -> bool:
        """Whether this process sketches batches now: always without a
        worker; beside one, while the sketching holds the replay back."""
        return not live or (len(live) < _LOCAL_UNTIL_WORKERS and local_wanted)

    def offer_local() -> None:
        nonlocal local_retired
        if local_retired and local_in_use():
            local_retired = False
            free_send.send_nowait(local)

    async def watch_local() -> None:
        nonlocal local_wanted
        with watching:
            while True:
                local_wanted = await load.held_back_over(_LOCAL_LOOK_SECONDS)
                offer_local()

    async def start_worker() -> bool:
        try:
            worker = await SketchProcess.start(engine.sketcher)
        except WorkerLost as exc:
            if live:
                logger.warning("streamfilter: no further sketch worker process: %s", exc)
            else:
                logger.warning("streamfilter: sketching in this process only: %s", exc)
            return False
        workers.append(worker)
        live.add(worker)
        for _ in range(_BATCHES_PER_WORKER):
            free_send.send_nowait(worker)
        return True

    async def start_workers() -> None:
        with starting:
            for _ in range(processes):
                if not await start_worker():
                    return
            while live and len(workers) < most:
                if await load.held_back_over(_LOOK_SECONDS) and not await start_worker():
                    return

    async def run(slot: _Local | SketchProcess, records: list[tuple[int, Any]], pending: _Pending) -> None:
        try:
            try:
                pending.batch = await slot.prepare(records)
            except WorkerLost as exc:
                logger.warning("streamfilter: a sketch worker process was lost (%s); sketching here instead", exc)
                live.discard(slot)
                offer_local()
                pending.batch = await local.prepare(records)
                return
            free_send.send_nowait(slot)
        except Exception as exc:  # noqa: BLE001 - raised in order by _in_order
            pending.error = exc
        finally:
            pending.done.set()

    async def take_slot() -> _Local | SketchProcess:
        nonlocal local_retired
        while True:
            began = anyio.current_time()
            slot = await free_receive.receive()
            load.slot_waits += anyio.current_time() - began
            if slot is local and not local_in_use():
                local_retired = True
                continue
            return slot

    try:
        async with receive, free_receive, free_send, anyio.create_task_group() as task_group:
            task_group.start_soon(_in_order, order_receive, send)
            if most:
                task_group.start_soon(start_workers)
                task_group.start_soon(watch_local)
            async with order_send, aclosing(_batches(receive, take_slot, engine.config)) as batches:
                async for slot, records in batches:
                    pending = _Pending()
                    await order_send.send(pending)
                    task_group.start_soon(run, slot, records, pending)
            starting.cancel()
            watching.cancel()
    finally:
        for worker in workers:
            await worker.aclose()


async def _batches(
    receive: MemoryObjectReceiveStream[list[tuple[int, Any]]],
    take_slot: Callable[[], Awaitable[_Local | SketchProcess]],
    config: FilterConfig,
) -> AsyncGenerator[tuple[_Local | SketchProcess, list[tuple[int, Any]]], None]:
    """A free slot, then the batch for it: up to ``batch_size`` records, or
    what arrived within ``max_delay`` of the first. Taking the slot first
    lets records pile up while every slot is busy, so a loaded pipeline
    runs full batches."""
    max_delay = config.max_delay
    ended = False
    carry: list[tuple[int, Any]] = []
    # The first batches are smaller, an eighth of batch_size and doubling: the
    # store stage starts on the first while the next is sketched, instead of
    # waiting for a whole batch to be sketched first.
    size = max(1, config.batch_size // 8)
    while carry or not ended:
        slot = await take_slot()
        limit, size = size, min(config.batch_size, size * 2)  # this batch's most records, the next's
        if carry:
            batch, carry = carry[:limit], carry[limit:]
        else:
            try:
                batch = list(await receive.receive())
            except anyio.EndOfStream:
                return
        deadline = anyio.current_time() + max_delay
        while len(batch) < limit and not ended:
            try:
                batch.extend(receive.receive_nowait())
                continue
            except anyio.WouldBlock:
                pass
            except anyio.EndOfStream:
                ended = True
                break
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                break
            with anyio.move_on_after(remaining):
                try:
                    batch.extend(await receive.receive())
                except anyio.EndOfStream:
                    ended = True
                    break
                continue
            break
        if len(batch) > limit:  # a chunk from the reader overshot
            carry = batch[limit:] + carry
            batch = batch[:limit]
        yield slot, batch


async def _in_order(
    order_receive: ObjectReceiveStream[_Pending], send: ObjectSendStream[PreparedBatch | WireBatch]
) -> None:
    async with order_receive, send:
        async for pending in order_receive:
            await pending.done.wait()
            if pending.error is not None:
                raise pending.error
            assert pending.batch is not None
            await send.send(pending.batch)


async def _commit(
    engine: Engine,
    receive: ObjectReceiveStream[PreparedBatch | WireBatch],
    send: ObjectSendStream[Verdicts | BaseException],
    hooks: CommitHooks | None,
    limiter: anyio.CapacityLimiter,
    marks: deque[_Mark],
    load: _Load,
) -> None:
    arrived: float | None = None  # when the chunk holding the batch's first line was read
    async with receive:
        async for prepared in receive:
            last_line = prepared.last_line
            first_line = prepared.first_line
            while marks and marks[0][0] <= first_line:
                arrived = marks.popleft()[1]
            # Judged here, on the event loop, not in a worker thread: the stage's
            # work is Python under the GIL, which a thread would take turns
            # with the loop for, and each batch would wait for the loop to
            # hand the next one over. Meanwhile the loop's other work (reading,
            # relaying to the sketch workers, which hold two batches each)
            # waits at most one batch. A call cannot be cancelled midway: a
            # cancelled pipeline still finishes (and commits or aborts) the
            # batch in flight.
            async with limiter:
                began = anyio.current_time()
                verdicts = _commit_now(engine, prepared, _commit_options(hooks, last_line, arrived), hooks, last_line)
                load.store_busy += anyio.current_time() - began
            try:
                await send.send(verdicts)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the consumer stopped listening; its pipeline ends here


@dataclass(frozen=True)
class CommitHooks:
    """What a caller (the CLI) runs in step with each store transaction.

    ``deliver`` gets each batch's verdicts inside its transaction,
    before the commit; ``progress`` maps the batch's last record number to
    the input progress that the transaction records; ``where`` names a
    record number in warnings (the CLI: "path:line"); ``after_commit`` gets
    the batch's last record number once the transaction has committed (where
    the batch was judged: a worker thread for a live source, the event loop
    for a replayed file; consume acknowledges entries there).
    """

    deliver: Callable[[Verdicts], None] | None = None
    progress: Callable[[int], Mapping[str, int | str]] | None = None
    where: Callable[[int], str] | None = None
    after_commit: Callable[[int], None] | None = None


async def run_pipeline(
    engine: Engine,
    source: object,
    send: ObjectSendStream[Verdicts | BaseException],
    scope: anyio.CancelScope,
    hooks: CommitHooks | None = None,
) -> None:
    """Run one pipeline until the source ends; errors are sent, not raised,
    so they surface in the consumer's task rather than in a task group."""
    with scope:
        async with send:
            try:
                if isinstance(source, Chunks):
                    await _run_chunked(engine, source, send, hooks)
                else:
                    await _judge_live(engine, source, send, hooks)
            except Exception as exc:  # noqa: BLE001 - forwarded to the consumer
                error: BaseException = exc
                if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                    error = exc.exceptions[0]
                try:
                    await send.send(error)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass


async def _run_chunked(
    engine: Engine,
    source: Chunks,
    send: ObjectSendStream[Verdicts | BaseException],
    hooks: CommitHooks | None,
) -> None:
    # Worker processes pay off for files: raw lines, sent cheaply, in bulk.
    configured = engine.config.sketch_processes
    processes = default_sketch_processes() if configured is None else configured
    most = max(processes, most_sketch_processes()) if configured is None else configured
    # Room for a whole batch to gather while the previous one is in the
    # store: the reader sends big lists, so a few of them are enough.
    records_send, records_receive = anyio.create_memory_object_stream[list[tuple[int, Any]]](4)
    prepared_send, prepared_receive = anyio.create_memory_object_stream[PreparedBatch | WireBatch](1)
    marks: deque[_Mark] = deque()
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(_read, source, records_send, marks)
        # One stage at a time where both run in this process (batches
        # sketched here, in a worker thread, before a worker process is
        # ready): their work is Python under the GIL, and overlapping them
        # measured slower.
        limiter = anyio.CapacityLimiter(1)
        load = _Load()
        task_group.start_soon(_sketch, engine, records_receive, prepared_send, limiter, processes, most, load)
        await _commit(engine, prepared_receive, send, hooks, limiter, marks, load)
        task_group.cancel_scope.cancel()
