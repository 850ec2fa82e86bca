"""StreamFilter: the async API first, and a sync facade over the same engine."""

from __future__ import annotations

import logging
import numbers
import os
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from contextlib import aclosing
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ._config import FilterConfig
from ._engine import Engine
from ._exceptions import ConfigError, StreamFilterError
from ._pipeline import Chunks, CommitHooks, run_pipeline
from ._post import Post, Verdict, VerdictKind
from ._stats import FilterStats
from ._verdicts import Verdicts
from .adapters import RecordAdapter, record_adapter
from .stores import BandStore, LMDBStore

__all__ = ["StreamFilter"]

logger = logging.getLogger("streamfilter")


class StreamFilter:
    """Yields only novel posts.

    Async, around a streaming source:

    ```python
    async with StreamFilter(FilterConfig(), path="index") as sf:
        async for post in sf.filter(source):
            ...
    ```

    Sync, as a stage in an ingestion script:

    ```python
    with StreamFilter(path="index") as sf:
        if sf.is_novel(record):
            ...
    ```

    Records are dicts (parsed JSON), raw lines (bytes or str) or Posts.

    Args:
        config: how posts are compared (threshold, TTL, LSH split, retweet policy);
            ``FilterConfig()`` by default.
        path: the LMDB index directory, created if needed. Without ``path`` or
            ``store``, the index is in a temporary directory that ``close()``
            removes.
        store: any ``BandStore`` instead of LMDB at ``path``: ``MemoryStore()``,
            ``RedisStore(url)``, or one of your own. Give ``path`` or ``store``,
            not both.
        format: how records become posts: ``auto`` (each record is detected:
            Twitter v1.1 and v2, Mastodon, Bluesky Jetstream, then generic JSON;
            lines that are not JSON are plain text), ``twitter``, ``mastodon``,
            ``bluesky``, ``text`` or ``generic``.
        id_field: the dotted path of a generic JSON record's id.
        text_field: the dotted path of a generic JSON record's text.
        time_field: the dotted path of a generic JSON record's time (epoch
            seconds, ms, µs or ns, ISO 8601, or Twitter's format).
        adapter: a ``RecordAdapter`` of your own (see ``record_adapter``), which
            replaces ``format`` and the ``*_field`` options.
        commit_within: the seconds within which a verdict of ``check`` or
            ``is_novel`` is made durable. These calls share one LMDB
            transaction, a group, that commits this long after its first
            call (or after 1,024 calls, at ``flush``, ``close``, any other
            write, or the interpreter's exit), so a loop of them does not
            pay an fsync each.
            A crash before the commit costs the group's index entries: a
            later copy of one of its novel posts passes again; no post is
            lost. ``0`` commits every call on its own. ``check_many`` and
            the async API always commit before they return their verdicts.

    Raises:
        ConfigError: ``path`` and ``store`` are both given, or ``config`` or
            ``store`` is of the wrong type.
    """

    def __init__(
        self,
        config: FilterConfig | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        store: BandStore | None = None,
        format: str = "auto",
        id_field: str = "id",
        text_field: str = "text",
        time_field: str = "created_at",
        adapter: RecordAdapter | None = None,
        commit_within: float = 0.1,
    ) -> None:
        if path is not None and store is not None:
            raise ConfigError("give either path (an LMDB index directory) or store, not both")
        if config is not None and not isinstance(config, FilterConfig):
            raise ConfigError(
                f"config must be a FilterConfig, got {type(config).__name__}: build one with FilterConfig(...)"
            )
        if store is not None and not isinstance(store, BandStore):
            raise ConfigError(
                f"store must be a BandStore such as LMDBStore(path) or MemoryStore(), got {type(store).__name__}"
            )
        number = isinstance(commit_within, int | float) and not isinstance(commit_within, bool)
        if not number or not 0 <= commit_within < 3600:
            raise ConfigError(f"commit_within is in seconds, from 0 up to an hour, got {commit_within!r}")
        self._commit_within = float(commit_within)
        self.config = config if config is not None else FilterConfig()
        self._adapter = adapter or record_adapter(
            format, id_field=id_field, text_field=text_field, time_field=time_field
        )
        self._temporary_dir: str | None = None
        if store is None:
            if path is None:
                self._temporary_dir = tempfile.mkdtemp(prefix="streamfilter-")
                path = self._temporary_dir
            store = LMDBStore(path)
        self.store = store
        self._engine: Engine | None = None
        self._task_group: TaskGroup | None = None
        self._line = 0
        self._line_lock = threading.Lock()
        self._index_posts: tuple[int, float] | None = None  # the last count, and when it may be taken again
        self._depth = 0  # nested with / async with blocks: the filter closes when the outermost one ends

    # -- lifecycle -------------------------------------------------------------
    def open(self) -> None:
        """Open the index; ``config`` is then the one it runs with (its
        ``seed`` the index's own, where the config left it to the index)."""
        if self._engine is None:
            self._engine = Engine(self.config, self.store, self._adapter, commit_within=self._commit_within)
            self.config = self._engine.config

    def close(self) -> None:
        """Close the index; a temporary one is removed (and made anew if the filter is opened again)."""
        try:
            if self._engine is not None:
                self._engine.close()
                self._engine = None
        finally:
            if self._temporary_dir is not None:
                shutil.rmtree(self._temporary_dir, ignore_errors=True)

    def __enter__(self) -> StreamFilter:
        self._depth += 1
        if self._depth == 1:
            self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.close()

    async def __aenter__(self) -> StreamFilter:
        self._depth += 1
        if self._depth > 1:  # a nested block: the outermost one opened it, and closes it
            return self
        try:
            await anyio.to_thread.run_sync(self.open)
            task_group = anyio.create_task_group()
            await task_group.__aenter__()
        except BaseException:
            self._depth -= 1
            raise
        self._task_group = task_group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        task_group, self._task_group = self._task_group, None
        try:
            if task_group is not None:
                # Pipelines whose consumers went away are cancelled; each still
                # finishes the store transaction it is in.
                task_group.cancel_scope.cancel()
                if exc is None or isinstance(exc, anyio.get_cancelled_exc_class()):
                    await task_group.__aexit__(exc_type, exc, traceback)
                else:
                    # The caller's own error: the pipelines are wound down
                    # without it, so it leaves the block as raised, not
                    # wrapped in an ExceptionGroup.
                    await task_group.__aexit__(None, None, None)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.close)

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise StreamFilterError("the filter is not open: use it in a with or async with block")
        return self._engine

    # -- async API ---------------------------------------------------------------
    async def judge_batches(
        self,
        source: AsyncIterable[Any] | Iterable[Any] | Chunks,
        hooks: CommitHooks | None = None,
    ) -> AsyncGenerator[Verdicts, None]:
        """Like ``judge``, one sequence of verdicts per internal batch
        (``Verdicts``: its columns, and a ``Verdict`` for each item taken).

        ``hooks`` run in step with each store transaction (see CommitHooks).
        """
        engine = self._require_engine()
        if self._task_group is None:
            raise StreamFilterError("judge() and filter() need the filter opened with async with")
        engine.stats.watch(source)
        send, receive = anyio.create_memory_object_stream[Verdicts | BaseException](2)
        scope = anyio.CancelScope()
        self._task_group.start_soon(run_pipeline, engine, source, send, scope, hooks)
        try:
            async with receive:
                async for item in receive:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
        finally:
            scope.cancel()
            engine.stats.unwatch(source)

    async def judge(self, source: AsyncIterable[Any] | Iterable[Any]) -> AsyncGenerator[Verdict, None]:
        """Yield one Verdict per post (and per invalid record), in arrival order."""
        async with aclosing(self.judge_batches(source)) as batches:
            async for verdicts in batches:
                for verdict in verdicts:
                    yield verdict

    async def filter(self, source: AsyncIterable[Any] | Iterable[Any]) -> AsyncGenerator[Post, None]:
        """Yield only the novel posts of ``source``; invalid records are logged and skipped."""
        async with aclosing(self.judge_batches(source)) as batches:
            async for verdicts in batches:
                for at, kind in enumerate(verdicts.kinds):
                    if kind is VerdictKind.NOVEL and (post := verdicts.post(at)) is not None:
                        yield post
                    elif kind is VerdictKind.INVALID:
                        logger.warning("record %d is invalid: %s", verdicts.lines[at], verdicts.reasons[at])

    # -- what it has done -----------------------------------------------------------
    def stats(self, *, recount: bool = False) -> FilterStats:
        """Counts by verdict, arrival-to-verdict latency, the index's size,
        posts purged, and the state of the sources being filtered, since the
        filter opened. Safe to call from any thread.

        The index is counted at most every 100 times as long as counting took
        (an LMDB count is instant; a Redis one scans the keys), and at most
        every second, unless ``recount`` asks for a count now (as the stats
        line does). A count blocks the caller, so async code calls
        ``await anyio.to_thread.run_sync(sf.stats)``. On a shared store it
        counts every worker's posts, not this filter's. The open group of
        ``check`` and ``is_novel`` calls is committed first, so the index's
        counts include what they recorded."""
        engine = self._require_engine()
        engine.flush()
        now = time.monotonic()
        if recount or self._index_posts is None or now >= self._index_posts[1]:
            count = self.store.post_count()
            took = time.monotonic() - now
            self._index_posts = (count, now + max(1.0, 100 * took))
        return engine.stats.snapshot(self._index_posts[0], self.store.purged_count(), engine.newest_event_time)

    def resume_point(self, url: str) -> str | None:
        """The position recorded for ``follow(url)`` by the last committed
        batch it ended, to pass as ``follow(url, resume_from=...)``; None
        when the index has none for that URL."""
        from .sources import resume_key

        point = self._require_engine().store.progress().get(resume_key(url))
        return point if isinstance(point, str) else None

    # -- sync API ----------------------------------------------------------------
    def _numbered(self, records: Iterable[Any]) -> list[tuple[int, Any]]:
        with self._line_lock:
            numbered = []
            for record in records:
                self._line += 1
                numbered.append((self._line, record))
            return numbered

    def check_many(self, records: Iterable[Any]) -> list[Verdict]:
        """Verdicts for a batch of records, judged in order in one transaction."""
        return list(self._require_engine().judge(self._numbered(records)))

    def check(self, record: Any) -> Verdict:
        """The verdict for one record that carries one post. It is durable
        within ``commit_within`` seconds (see the class docstring).

        A record that carries several (a response page) raises
        StreamFilterError before anything is judged or indexed; ``check_many``
        and ``judge`` take such records."""
        return self._judged_one(record)[0]

    def _judged_one(self, record: Any) -> Verdicts:
        """``check``'s verdict, as the columns of a batch of one."""
        engine = self._require_engine()
        prepared = engine.prepare(self._numbered([record]))
        if len(prepared.entries) != 1:
            raise StreamFilterError(
                f"the record carries {len(prepared.entries)} posts (a response page?): nothing was indexed; "
                "judge it with check_many([record]) or judge()"
            )
        return engine.commit(prepared, grouped=True)

    def flush(self) -> None:
        """Make every verdict given so far durable: commit the open group of
        ``check`` and ``is_novel`` calls (see ``commit_within``). Blocks for
        one fsync at most; async code runs it in a thread."""
        self._require_engine().flush()

    def forget(self, *post_ids: str | int, platform: str | None = None) -> int:
        """Remove posts from the index by id, as a platform's delete asks: a
        later copy of a forgotten post is no longer its duplicate (it is novel,
        or the duplicate of another live copy). Returns how many live posts
        were forgotten; an id the index does not hold is not an error.

        Ids are unique only within a platform: ``platform`` (``"twitter"``,
        ``"mastodon"``, ``"bluesky"``, ``"generic"`` or ``"text"``, as
        ``Post.platform`` names it) forgets only that platform's posts, and
        None those of every platform with these ids. An id that is not a
        string or an integer is a TypeError.

        Delete notices in the stream are honoured without this call unless
        ``FilterConfig(honour_deletes=False)``, each forgetting only a post of
        its own platform. One store call, which blocks: async code calls
        ``await anyio.to_thread.run_sync(sf.forget, post_id)``."""
        for post_id in post_ids:
            if not isinstance(post_id, str | numbers.Integral) or isinstance(post_id, bool):
                raise TypeError(f"forget() takes post ids as strings (or integers), got {type(post_id).__name__}")
        return self._require_engine().forget([str(post_id) for post_id in post_ids], platform)

    def is_novel(self, record: Any) -> bool:
        """True when the record's post is novel (and is now indexed).

        An invalid record is not novel: False, and its reason is logged as a
        warning, as ``filter`` does; ``check`` gives the verdict with it."""
        judged = self._judged_one(record)  # its kind read from the columns: no Verdict is built
        kind = judged.kinds[0]
        if kind is VerdictKind.INVALID:
            logger.warning("record %d is invalid: %s", judged.lines[0], judged.reasons[0])
        return kind is VerdictKind.NOVEL
