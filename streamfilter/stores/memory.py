"""An in-process store for tests, notebooks and short-lived filters.

It keeps the index in dicts and nothing more: the one batch judge
(``_judge``) applies the rules to what it finds. A batch's writes wait in its
transaction until it commits, so an aborted batch leaves no trace. It keeps
nothing after the process ends and is shared by nothing but this process.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .. import _rules
from .._exceptions import StoreError
from .._judge import TransactionalStore
from .._rules import CachedPost
from ._base import FORGOTTEN, IndexSettings, Matches, Sketches, pinned_fingerprint

if TYPE_CHECKING:
    from .._judge import Judgement

__all__ = ["MemoryStore"]

_NO_HITS = np.zeros(0, dtype=np.int64)


class MemoryStore(TransactionalStore):
    """A band store held in this process's memory."""

    def __init__(self) -> None:
        self._bands: dict[int, list[int]] = {}  # band key -> serials, oldest first
        self._posts: dict[int, CachedPost] = {}  # serial -> post, oldest first
        self._keys: dict[int, list[int]] = {}  # serial -> the band keys it is filed under
        self._clock = float("-inf")
        self._next_serial = 1
        self._fingerprint: dict[str, int | str] | None = None
        self._progress: dict[str, int | str] = {}
        self._purged = 0
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()

    def open(self, settings: IndexSettings) -> dict[str, int | str]:
        """Open the index, creating it if needed, and pin ``settings`` in it or check them against
        what it pinned; returns the pinned fingerprint, with the index's seed."""
        self._fingerprint = pinned_fingerprint("memory store", self._fingerprint, dict(settings.fingerprint))
        self._settings = settings
        return dict(self._fingerprint)

    def begin(self) -> _Transaction:
        if self._settings is None:
            raise StoreError("the memory store is not open")
        self._lock.acquire()  # one batch at a time, as LMDB's one writer
        return _Transaction(self, self._settings)

    def _purge(self, cutoff: float, limit: int) -> None:
        """Delete up to ``limit`` posts from the oldest serial on, while they have expired."""
        assert self._settings is not None
        for serial in list(itertools.islice(self._posts, limit)):
            post = self._posts[serial]
            if post.timestamp > cutoff:
                break
            for band_key in self._keys.pop(serial):
                members = self._bands.get(band_key)
                if members is not None and serial in members:
                    members.remove(serial)
                    if not members:
                        del self._bands[band_key]
            del self._posts[serial]
            self._purged += 1

    def forget(self, posts: Sequence[tuple[str, int]]) -> int:
        """Forget each (post id, id key): its record is marked as from the
        beginning of time, so no rule counts it, and purging takes it."""
        forgotten = 0
        with self._lock:
            for post_id, id_key in posts:
                for serial in self._bands.get(id_key, ()):
                    post = self._posts[serial]
                    if post.post_id == post_id and post.timestamp != FORGOTTEN:
                        self._posts[serial] = CachedPost(FORGOTTEN, post_id, post.words)
                        forgotten += 1
        return forgotten

    def progress(self) -> dict[str, int | str]:
        """The progress the committed batches recorded: input name -> lines done, or a live
        source's resume key -> its position (what ``--resume`` continues from)."""
        return dict(self._progress)

    def post_count(self) -> int:
        return len(self._posts)

    def purged_count(self) -> int:
        return self._purged

    def clock(self) -> float:
        return self._clock

    def pinned_settings(self) -> dict[str, int | str] | None:
        return None if self._fingerprint is None else dict(self._fingerprint)

    def close(self) -> None:
        """Close the index; what was committed stays. Safe to call twice."""
        self._settings = None


class _Transaction:
    """One batch on a MemoryStore, holding its lock until it commits or aborts."""

    replays_seen = False

    def __init__(self, store: MemoryStore, settings: IndexSettings) -> None:
        self._store = store
        self.settings = settings
        self.clock = store._clock
        self.next_serial = store._next_serial
        self._judgement: Judgement | None = None
        self._sketches: Sketches = Sketches.empty()
        self._open = True

    def index_keys(self, band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        return band_keys

    def members(self, queries: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        limit = self.settings.max_candidates_per_band
        hit_query: list[int] = []
        hit_serial: list[int] = []
        bands = self._store._bands
        for index, key in enumerate(queries.tolist()):
            members = bands.get(key)
            if members:
                newest = _rules.offered_per_key(members, limit)[::-1]
                hit_query += [index] * len(newest)
                hit_serial += newest
        if not hit_serial:
            return _NO_HITS, _NO_HITS
        return np.array(hit_query, dtype=np.int64), np.array(hit_serial, dtype=np.int64)

    def post(self, serial: int) -> CachedPost | None:
        return self._store._posts.get(serial)

    def record(self, sketches: Sketches, judgement: Judgement) -> Matches:
        self._sketches, self._judgement = sketches, judgement  # written at commit
        return judgement.matches

    def commit(self, progress: Mapping[str, int | str] | None) -> None:
        store, judgement = self._store, self._judgement
        self._open = False
        try:
            if judgement is not None:
                for offset, (index, post) in enumerate(zip(judgement.recorded, judgement.posts, strict=True)):
                    serial = judgement.first_serial + offset
                    # a copy, as a record read back would be: the judge's set stays its own
                    store._posts[serial] = CachedPost(post.timestamp, post.post_id, post.words)
                    store._keys[serial] = self._sketches.band_keys(index).tolist()
                    for band_key in store._keys[serial]:
                        store._bands.setdefault(band_key, []).append(serial)
                store._next_serial = judgement.first_serial + len(judgement.recorded)
                store._clock = judgement.clock
                ttl = self.settings.ttl_seconds
                if ttl > 0 and store._clock > float("-inf"):
                    store._purge(store._clock - ttl, self.settings.purge_limit)
            if progress:
                store._progress.update(progress)
        finally:
            store._lock.release()

    def abort(self) -> None:
        if self._open:
            self._open = False
            self._store._lock.release()
