"""An in-process store for tests, notebooks and short-lived filters.

It runs ``_base.run_batch`` over dicts, one post at a time; the conformance
suite checks that its verdicts equal the LMDB store's. It keeps nothing
after the process ends and is shared by nothing but this process.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Mapping, Sequence

from .._exceptions import StoreError
from ._base import IndexSettings, Match, PostCache, Sketch, check_fingerprint, run_batch

__all__ = ["MemoryStore"]


class _MemoryTxn:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def first_members(self, band_keys: Sequence[bytes]) -> list[int]:
        serials: list[int] = []
        bands = self._store._bands
        for band_key in band_keys:
            members = bands.get(band_key)
            if members and members[0] not in serials:
                serials.append(members[0])
        return serials

    def members(self, band_keys: Sequence[bytes], limit: int) -> list[int]:
        serials: list[int] = []
        seen: set[int] = set()
        bands = self._store._bands
        for band_key in band_keys:
            for serial in reversed(bands.get(band_key, [])[-limit:]):
                if serial not in seen:
                    seen.add(serial)
                    serials.append(serial)
        return serials

    def get_post(self, serial: int) -> bytes | None:
        return self._store._posts.get(serial)

    def insert(self, serial: int, timestamp: float, band_keys: Sequence[bytes], record: bytes) -> None:
        store = self._store
        store._posts[serial] = record
        heapq.heappush(store._expiry, (timestamp, serial))
        for band_key in band_keys:
            store._bands.setdefault(band_key, []).append(serial)

    def expired(self, cutoff: float, limit: int) -> list[tuple[int, bytes]]:
        found: list[tuple[int, bytes]] = []
        expiry = self._store._expiry
        while expiry and expiry[0][0] <= cutoff and len(found) < limit:
            _, serial = heapq.heappop(expiry)
            record = self._store._posts.get(serial)
            if record is not None:
                found.append((serial, record))
        return found

    def delete(self, serial: int, timestamp: float, band_keys: Sequence[bytes]) -> None:
        store = self._store
        for band_key in band_keys:
            members = store._bands.get(band_key)
            if members is not None:
                members.remove(serial)
                if not members:
                    del store._bands[band_key]
        store._posts.pop(serial, None)


class MemoryStore:
    """A band store held in this process's memory."""

    def __init__(self) -> None:
        self._bands: dict[bytes, list[int]] = {}
        self._posts: dict[int, bytes] = {}
        self._expiry: list[tuple[float, int]] = []
        self._clock = float("-inf")
        self._next_serial = 1
        self._fingerprint: dict[str, int | str] | None = None
        self._progress: dict[str, int] = {}
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()
        self._cache = PostCache()

    def open(self, settings: IndexSettings) -> None:
        requested = dict(settings.fingerprint)
        if self._fingerprint is None:
            self._fingerprint = requested
        else:
            check_fingerprint("memory store", self._fingerprint, requested)
        self._settings = settings
        self._cache.shingle_size = settings.shingle_size

    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int] | None = None,
        before_commit: Callable[[list[Match | None]], None] | None = None,
    ) -> list[Match | None]:
        if self._settings is None:
            raise StoreError("the memory store is not open")
        with self._lock:
            # A dict cannot roll back: the callback runs after the batch is
            # recorded. Nothing here survives the process anyway.
            results, self._clock, self._next_serial = run_batch(
                _MemoryTxn(self), sketches, self._settings, self._clock, self._next_serial, self._cache
            )
            if progress:
                self._progress.update(progress)
            if before_commit is not None:
                before_commit(results)
        return results

    def progress(self) -> dict[str, int]:
        return dict(self._progress)

    def post_count(self) -> int:
        return len(self._posts)

    def clock(self) -> float:
        """The newest event time the index has seen (-inf for none yet)."""
        return self._clock

    def close(self) -> None:
        self._settings = None
