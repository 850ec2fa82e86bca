"""The LMDB store: the environment, its transactions, and the one operation.

Named sub-databases:

- ``posts``: serial -> the post's record (``stores/_records``). Serials only
  grow, so posts are appended at the end and purged from the front.
- ``runs``: the band index, log-structured (``_runs``): every batch appends
  one run for its novel posts, and runs of similar size are merged
  (``_merging``).
- ``meta``: the format, the pinned signature settings, the clock, the next
  serial and the input progress.

Every batch is one write transaction (``_batch``): LMDB allows one writer at
a time across all processes that open the directory, and look-ups happen
inside that transaction, so two processes can never both let copies of a
text through. When the map fills, the transaction is aborted, the map
doubled, and the batch run again; nothing of the failed attempt is kept.

Expiry. A post is invisible as soon as its timestamp falls ``ttl`` behind the
clock (the highest timestamp seen). Purging walks ``posts`` from the front
(the oldest serial) and deletes while the post there has expired, at most
``purge_limit`` a batch; a post that arrived with a newer timestamp than the
ones recorded after it holds the walk until it expires too. Runs that hold
only purged serials are deleted, and merges drop purged entries.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import lmdb
import numpy as np
import numpy.typing as npt

from ..._clock import checked_clock
from ..._exceptions import StoreError, StreamFilterError
from ..._judge import TransactionalStore
from ..._rules import CachedPost
from ..._values import BandKeys, Matches, Sketches
from .._base import FORGOTTEN, IndexSettings, PostCache, RetryBatch, pinned_fingerprint
from .._records import decode_record, encode_record
from ._batch import Batch, Hits, StoreParts
from ._caches import KeyFilter, NewRun, RunCache
from ._errors import DECODING_ERRORS, map_error, raise_failure
from ._guard import MapGuard
from ._header import check_index_file
from ._held import HeldPosts
from ._merging import Merger, merge_entries, merge_plan, release_freed_memory
from ._runs import RUN_HEADER, decode_run, encode_run, put_run, short_keys
from ._tuning import LMDBTuning

if TYPE_CHECKING:
    from ..._judge import Judgement

__all__ = ["LMDBStore"]

_U64 = struct.Struct(">Q")
_CLOCK = struct.Struct("<d")
_CONFIG_KEY = b"config"
_CLOCK_KEY = b"clock"
_SERIAL_KEY = b"next_serial"
_FORMAT_KEY = b"format"
_PROGRESS_KEY = b"progress"
_FORMAT = b"streamfilter-lmdb-7"
# what the decoders raise on a damaged file


class LMDBStore(TransactionalStore):
    """A band store in an LMDB directory; the directory is created if needed.

    ``map_size`` is only the starting size: the map doubles whenever it fills.
    ``durable=False`` skips the fsync at each commit; a killed process still
    loses nothing, but a power cut may lose the last few batches. ``tuning``
    sets the sizes at which the index changes layout (never a verdict).
    """

    holds = True  # the sync API's one-record calls share a transaction (_group)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        map_size: int = 64 << 20,
        durable: bool = True,
        tuning: LMDBTuning | None = None,
    ) -> None:
        self.path = Path(path)
        self.tuning = tuning if tuning is not None else LMDBTuning()
        self._initial_map_size = map_size
        self._durable = durable
        self._env: lmdb.Environment | None = None
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()
        self._cache = PostCache()
        self._key_filter = KeyFilter(self.tuning)
        self._merger = Merger(self._merge_step)
        self._purged = 0  # posts purged by committed batches since this object opened
        self._map_guard = MapGuard()
        self._run_cache = RunCache(self.tuning)

    # -- opening -------------------------------------------------------------
    def open(self, settings: IndexSettings) -> dict[str, int | str]:
        """Open the index, creating it if needed, and pin ``settings`` in it or check them against
        what it pinned; returns the pinned fingerprint, with the index's seed."""
        self._refuse_empty_file()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            env = lmdb.open(
                str(self.path),
                map_size=self._initial_map_size,
                max_dbs=4,
                subdir=True,
                sync=self._durable,
                # Without metasync a power cut may undo the last commit, but
                # never breaks the index; sync stays on, as NOSYNC could.
                metasync=False,
                writemap=False,
                readahead=False,
                lock=True,
            )
        except (OSError, lmdb.Error) as exc:
            raise map_error(exc, f"cannot open LMDB index at {self.path}", self.path) from exc
        self._env = env
        # A process killed inside a read transaction (the merge thread's) leaves
        # its reader slot behind, and LMDB keeps every page that reader could
        # see until the slot is cleared: the file would grow after each kill.
        env.reader_check()
        self._page_size = int(env.stat()["psize"])
        try:
            self._meta = env.open_db(b"meta")
            pinned = self._pin(settings)  # before anything else is created in an index of another format
            self._posts = env.open_db(b"posts")
            self._runs = env.open_db(b"runs")
            self._parts = StoreParts(
                self._posts, self._runs, self._cache, self._run_cache, self._key_filter, self.tuning, Hits()
            )
        except BaseException:
            self.close()
            raise
        self._settings = settings
        return pinned

    def _pin(self, settings: IndexSettings) -> dict[str, int | str]:
        requested = dict(settings.fingerprint)

        def pin(txn: lmdb.Transaction) -> dict[str, int | str]:
            stored_format = txn.get(_FORMAT_KEY, db=self._meta)
            if stored_format is not None and stored_format != _FORMAT:
                raise StoreError(
                    f"{self.path} holds an index of format {bytes(stored_format).decode(errors='replace')}, "
                    f"this streamfilter reads {_FORMAT.decode()} only: it cannot be converted in place; "
                    "replay the stream into a new --db directory"
                )
            stored = txn.get(_CONFIG_KEY, db=self._meta)
            if stored is None:
                if stored_format is None:
                    txn.put(_FORMAT_KEY, _FORMAT, db=self._meta)
                pinned = pinned_fingerprint(str(self.path), None, requested)
                txn.put(_CONFIG_KEY, json.dumps(pinned, sort_keys=True).encode(), db=self._meta)
                return pinned
            with self._corruption_reported():
                loaded = json.loads(bytes(stored))
            return pinned_fingerprint(str(self.path), loaded, requested)

        return self._write(pin)  # type: ignore[no-any-return]

    def pinned_settings(self) -> dict[str, int | str] | None:
        """The settings pinned in the index, or None when there is none yet; opens nothing for writing."""
        path = self.path
        if not (Path(path) / "data.mdb").exists():
            return None
        self._refuse_empty_file()
        try:
            env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=4, subdir=True)
        except lmdb.Error as exc:
            raise map_error(exc, f"cannot read LMDB index at {path}") from exc
        try:
            meta = env.open_db(b"meta", create=False)
            with env.begin(db=meta) as txn:
                stored = txn.get(_CONFIG_KEY)
        except lmdb.Error:
            return None
        finally:
            env.close()
        with self._corruption_reported():
            return None if stored is None else dict(json.loads(stored))

    def _refuse_empty_file(self) -> None:
        """Refuse a data.mdb that is empty, not LMDB's, or cut short, before LMDB maps it (see _header)."""
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path} is a file, not an index directory: choose a directory for --db")
        check_index_file(self.path)

    @contextmanager
    def _corruption_reported(self) -> Iterator[None]:
        """What a damaged file makes the decoders raise, as a StoreError that says so."""
        try:
            yield
        except DECODING_ERRORS as exc:
            raise self._damaged(exc) from exc

    def _damaged(self, exc: BaseException) -> StoreError:
        return StoreError(
            f"the LMDB index at {self.path} is damaged ({type(exc).__name__}: {exc}); it cannot be "
            "repaired in place: replay the stream into a new --db directory"
        )

    # -- the one operation ---------------------------------------------------
    def begin(self) -> _Transaction:
        """A write transaction for one batch; it holds the store's lock until it commits or aborts."""
        settings = self._settings
        if settings is None:
            raise StoreError("the LMDB store is not open")
        self._raise_merge_error()
        env = self._require_env()
        self._lock.acquire()
        try:
            self._grow_ahead(env)
            txn = env.begin(None, None, True, True)
        except BaseException as exc:
            self._lock.release()
            raise_failure(self._failed(exc), exc)
        return _Transaction(self, txn, settings)

    def _failed(self, exc: BaseException) -> BaseException:
        """What a failure inside a write transaction becomes, once it is aborted:
        RetryBatch when the map grew (here, or in another process: its size is
        adopted), so the transaction can run again; else the error to raise."""
        env = self._require_env()
        if isinstance(exc, lmdb.MapFullError):
            self._grow(env, env.info()["map_size"] * 2)
            return RetryBatch()
        if isinstance(exc, lmdb.MapResizedError):
            self._remap(env, 0)
            return RetryBatch()
        # (a closed stdout, from the caller's deliver, is not the index's failure)
        if isinstance(exc, lmdb.Error | OSError) and not isinstance(exc, BrokenPipeError):
            return map_error(exc, f"LMDB index at {self.path} failed", self.path)
        if isinstance(exc, DECODING_ERRORS) and not isinstance(exc, StreamFilterError):
            return self._damaged(exc)  # what the decoders of a damaged run or record raise
        return exc

    def forget(self, posts: Sequence[tuple[str, int]]) -> int:
        """Forget each (post id, id key), in one write transaction: the post's
        record is marked as from the beginning of time (``FORGOTTEN``), so no
        rule counts it, and purging takes it in its turn."""
        settings = self._settings
        if settings is None:
            raise StoreError("the LMDB store is not open")
        queries = short_keys(np.array([id_key for _, id_key in posts], dtype=np.uint64))

        def apply(txn: lmdb.Transaction) -> int:
            batch = Batch(self._parts, txn, settings)
            serial_bytes = txn.get(_SERIAL_KEY, db=self._meta)
            first_live = batch.first_live_serial(_U64.unpack(serial_bytes)[0] if serial_bytes else 1)
            forgotten = 0
            with self._corruption_reported():
                for query, serial in zip(*batch.members(queries, first_live), strict=True):
                    key = _U64.pack(int(serial))
                    stored = txn.get(key, db=self._posts)
                    if stored is None:
                        continue
                    timestamp, post_id, words = decode_record(bytes(stored))
                    if post_id == posts[int(query)][0] and timestamp != FORGOTTEN:
                        txn.put(key, encode_record(FORGOTTEN, post_id, bytes(words)), db=self._posts)
                        forgotten += 1
            return forgotten

        forgotten: int = self._write(apply, buffers=True)
        self._cache.clear()  # the posts read before hold their old times
        return forgotten

    def _committed(self, new_runs: list[NewRun], purged: int) -> None:
        """After a batch's transaction: its runs go to the key filter, and the
        small ones to the run cache (see _RunCache.adopt)."""
        self._purged += purged
        self._key_filter.taken_in(new_runs)
        self._run_cache.adopt(run for run, _, _ in new_runs if run.count <= self.tuning.inline_merged_entries)

    def _raise_merge_error(self) -> None:
        error = self._merger.error
        if error is None:
            return
        self._merger.error = None
        if isinstance(error, StoreError):
            raise error
        if isinstance(error, DECODING_ERRORS) and not isinstance(error, StreamFilterError):
            raise self._damaged(error) from error
        raise StoreError(f"merging runs of the LMDB index at {self.path} failed: {error!r}") from error

    def _merge_step(self) -> bool:
        """One merge for the merge thread (see Merger); False when none is due."""
        with self._reading(buffers=True) as txn:
            cursor = txn.cursor(self._posts)
            if not cursor.first():
                return False  # every post is purged: the next batch drops the runs
            first_live = _U64.unpack(cursor.key())[0]
            runs = [run for run in self._run_cache.listed(txn, self._runs) if run.last >= first_live]
            plan = merge_plan(runs, self.tuning)
            if plan is None:
                return False
            merged_runs = runs[plan[0] : plan[1]]
            parts = [(run.db_key, run.identity) for run in merged_runs]
            entries = merge_entries(merged_runs, first_live)
        value = encode_run(*entries)
        merged = decode_run(b"", value)

        def swap(txn: lmdb.Transaction) -> bool:
            for part_key, identity in parts:
                stored = txn.get(part_key, db=self._runs)
                if stored is None or RUN_HEADER.unpack_from(stored)[:3] != identity:
                    return False  # merged or dropped meanwhile
            for part_key, _ in parts:
                txn.delete(part_key, db=self._runs)
            put_run(txn, self._runs, value)
            return True

        def committed(swapped: bool) -> None:
            if swapped:
                self._key_filter.taken_in([(merged, [identity for _, identity in parts], None)])

        self._write(swap, buffers=True, committed=committed)
        if merged.count >= self.tuning.filtered_run:
            release_freed_memory()
        return True

    def _write(self, body, *, buffers: bool = False, committed=None):  # type: ignore[no-untyped-def]
        """``body(txn)`` in a write transaction, run again after the map grows;
        ``committed(result)`` runs once it has committed, still under the lock."""
        env = self._require_env()
        with self._lock:
            self._grow_ahead(env)
            while True:
                try:
                    with env.begin(None, None, True, buffers) as txn:  # type: ignore[call-overload]
                        result = body(txn)
                    break
                except BaseException as exc:
                    # Posts cached from an aborted transaction may never have
                    # existed: their serials can be reused by another writer.
                    self._cache.clear()
                    failure = self._failed(exc)
                    if not isinstance(failure, RetryBatch):
                        raise_failure(failure, exc)
            if committed is not None:
                committed(result)
            return result

    def _grow_ahead(self, env: lmdb.Environment) -> None:
        """Grow ahead of need: a map that fills at commit time forces the
        batch to run again, and its output would be written twice."""
        info = env.info()
        if (info["last_pgno"] + 1) * self._page_size > 0.7 * info["map_size"]:
            self._grow(env, info["map_size"] * 2)

    def _grow(self, env: lmdb.Environment, size: int) -> None:
        try:
            self._remap(env, size)
        except lmdb.Error as exc:
            raise map_error(exc, f"cannot grow the LMDB map of {self.path} to {size} bytes", self.path) from exc

    def _remap(self, env: lmdb.Environment, size: int) -> None:
        """Map the file anew at ``size`` (0: the size another process set); what was read before is gone."""
        with self._map_guard.growing():
            self._run_cache.clear()
            env.set_mapsize(size)

    @contextmanager
    def _reading(self, *, buffers: bool = False) -> Iterator[lmdb.Transaction]:
        """A read transaction, which the map's growth waits for (see MapGuard)."""
        env = self._require_env()
        try:
            with self._map_guard.reading(), env.begin(None, None, False, buffers) as txn:  # type: ignore[call-overload]
                yield txn
        except lmdb.Error as exc:
            raise map_error(exc, f"reading the LMDB index at {self.path} failed", self.path) from exc

    # -- facts ---------------------------------------------------------------
    def progress(self) -> dict[str, int | str]:
        """The progress the committed batches recorded: input name -> lines done, or a live
        source's resume key -> its position (what ``--resume`` continues from)."""
        with self._reading() as txn:
            stored = txn.get(_PROGRESS_KEY, db=self._meta)
        if stored is None:
            return {}
        return {str(k): v if isinstance(v, str) else int(v) for k, v in json.loads(bytes(stored)).items()}

    def purged_count(self) -> int:
        return self._purged

    def post_count(self) -> int:
        with self._reading() as txn:
            return int(txn.stat(self._posts)["entries"])

    def clock(self) -> float:
        """The newest event time the index has seen (-inf for none yet)."""
        with self._reading() as txn:
            stored = txn.get(_CLOCK_KEY, db=self._meta)
        return self._checked_clock(stored)

    def _checked_clock(self, stored: bytes | memoryview | None) -> float:
        """The clock record, read; a damaged one (not 8 bytes, not finite) is refused (``checked_clock``)."""
        value = _CLOCK.unpack(stored)[0] if stored and len(stored) == _CLOCK.size else stored and bytes(stored)
        return checked_clock(value or None, f"the LMDB index at {self.path}")

    def map_size(self) -> int:
        return int(self._require_env().info()["map_size"])

    def _require_env(self) -> lmdb.Environment:
        if self._env is None:
            raise StoreError("the LMDB store is not open")
        return self._env

    def close(self) -> None:
        """Close the index; what was committed stays. Safe to call twice."""
        self._merger.stop()
        if self._env is not None:
            with self._lock:
                self._run_cache.clear()
                self._env.close()
                self._env = None


class _Transaction:
    """One batch's write transaction on an LMDBStore (see ``IndexTransaction``)."""

    replays_seen = False  # a batch commits whole or not at all: no stored post is its own replay

    def __init__(self, store: LMDBStore, txn: lmdb.Transaction, settings: IndexSettings) -> None:
        self._store = store
        self._txn = txn
        self.settings = settings
        self._open = True
        self._purged = 0
        # where the LMDB transaction must end: LMDB's writer lock belongs to
        # the thread that began it (the sync API's group, _group, sets this)
        self.ends_in: Callable[[Callable[[], object]], object] | None = None
        self.held: HeldPosts | None = None  # the group's posts, written at the commit (hold)
        try:
            clock_bytes = txn.get(_CLOCK_KEY, db=store._meta)
            self.clock = store._checked_clock(clock_bytes)
            serial_bytes = txn.get(_SERIAL_KEY, db=store._meta)
            self.next_serial = _U64.unpack(serial_bytes)[0] if serial_bytes else 1
            self._batch = Batch(store._parts, txn, settings)
            self._first_live = self._batch.first_live_serial(self.next_serial)
        except BaseException as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> NoReturn:
        self.abort()
        raise_failure(self._store._failed(exc), exc)

    def index_keys(self, band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        return short_keys(band_keys)

    def hold(self, earlier: HeldPosts | None = None) -> None:
        """Keep the posts of the batches judged from now on in memory, and
        write them at the commit, so that batch after batch can be judged in
        this transaction at the cost of none of the writes (``_group``).
        ``earlier``: the posts of an aborted transaction of the group, to
        write in this one."""
        held = HeldPosts(self.next_serial, self.settings.max_candidates_per_band)
        if earlier is not None:
            held.adopt(earlier)
            self._keep_recent(held.first, held.posts)
            self.clock, self.next_serial = max(self.clock, held.clock), held.next_serial
        self.held = held

    def _keep_recent(self, first: int, posts: Sequence[CachedPost]) -> None:
        """Held posts (serials from ``first``) among the recent ones, where the compiled judge finds them."""
        for offset, post in enumerate(posts):
            self._store._cache.put(first + offset, post)

    def members(self, queries: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        try:  # called for each batch: no context manager here
            hits = self._batch.members(queries, self._first_live)
        except DECODING_ERRORS as exc:
            self._fail(self._store._damaged(exc))
        except BaseException as exc:
            self._fail(exc)
        return hits if self.held is None else self.held.with_held(queries, hits)

    @property
    def recent_posts(self) -> object | None:
        """The posts ``post`` finds without a read: the compiled judge looks here before it calls ``post``."""
        recent: object = self._store._cache.recent
        return recent

    @property
    def record_reader(self) -> tuple[Callable[..., object], lmdb._Database] | None:
        """(get, posts table): the compiled judge reads a post the recent ones
        lack as ``post`` does, decodes it and keeps it among them, leaving
        to ``post`` any read that fails and any record it does not decode.
        None while posts are held: ``post`` finds them, a read would not."""
        return (self._txn.get, self._store._posts) if self.held is None else None

    def post(self, serial: int) -> CachedPost | None:
        if self.held is not None and (held := self.held.post(serial)) is not None:
            return held
        try:  # called for each candidate: no context manager here
            return self._store._cache.get(self._batch.get_post, serial)
        except DECODING_ERRORS as exc:
            self._fail(self._store._damaged(exc))
        except BaseException as exc:
            self._fail(exc)

    def record(self, sketches: Sketches, judgement: Judgement) -> Matches:
        held = self.held
        if held is not None:  # written at the commit
            held.add(sketches, judgement)
            self._keep_recent(judgement.first_serial, judgement.posts)
            self.clock, self.next_serial = max(self.clock, judgement.clock), held.next_serial
            return judgement.matches
        keys = sketches.keys_of(judgement.recorded)
        self._write(keys, judgement.posts, judgement.first_serial, judgement.clock)
        return judgement.matches

    def _write(self, keys: BandKeys, posts: Sequence[CachedPost], first: int, clock: float) -> None:
        """Write the recorded posts (serials from ``first``) and their run
        (``keys``: their band keys end to end, and how many each has), purge,
        and keep the clock."""
        store, batch, settings = self._store, self._batch, self.settings
        try:
            batch.record(keys, posts, first)
            next_serial = first + len(posts)
            if settings.ttl_seconds > 0 and math.isfinite(clock):
                self._purged = batch.purge(clock - settings.ttl_seconds, settings.purge_limit)
            batch.compact(batch.first_live_serial(next_serial))
            self._txn.put(_CLOCK_KEY, _CLOCK.pack(clock), db=store._meta)
            self._txn.put(_SERIAL_KEY, _U64.pack(next_serial), db=store._meta)
        except BaseException as exc:
            self._fail(exc)

    def _end(self, end: Callable[[], object]) -> None:
        """Commit or abort the LMDB transaction, in the thread ``ends_in`` names."""
        if self.ends_in is None:
            end()
        else:
            self.ends_in(end)

    def commit(self, progress: Mapping[str, int | str] | None) -> None:
        store, txn = self._store, self._txn
        held = self.held
        if held is not None:  # kept for the group, should the commit have to begin again (RetryBatch)
            self._write(held.band_keys(), held.posts, held.first, self.clock)
        try:
            if progress:
                stored = txn.get(_PROGRESS_KEY, db=store._meta)
                merged = dict(json.loads(bytes(stored))) if stored else {}
                merged.update(progress)
                txn.put(_PROGRESS_KEY, json.dumps(merged, sort_keys=True).encode(), db=store._meta)
            self._end(txn.commit)
        except BaseException as exc:
            self._fail(exc)
        self._open = False
        try:
            store._committed(self._batch.new_runs, self._purged)
        finally:
            store._lock.release()
        if self._batch.merge_wanted:
            store._merger.wake()

    def abort(self) -> None:
        if not self._open:
            return
        self._open = False
        try:
            self._end(self._txn.abort)
        finally:
            # Posts cached from an aborted transaction may never have
            # existed: their serials can be reused by another writer.
            self._store._cache.clear()
            self._store._lock.release()
