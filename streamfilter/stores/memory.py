"""An in-process store for tests, notebooks and short-lived filters.

It is the plain reference of the matching rules (``_rules``): one post at a
time, over dicts, in the words of the rules. Every other store must give the
same verdicts, naming the same posts with the same similarity; a differential
test runs them all over the same streams. It keeps nothing after the process
ends and is shared by nothing but this process.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import _rules
from .._exceptions import StoreError
from .._rules import CachedPost, Match
from ._base import FORGOTTEN, IndexSettings, PostCache, Sketch, check_fingerprint, key_bytes
from ._records import decode_record, encode_record

__all__ = ["MemoryStore"]


class MemoryStore:
    """A band store held in this process's memory."""

    def __init__(self) -> None:
        self._bands: dict[bytes, list[int]] = {}  # band key -> serials, oldest first
        self._posts: dict[int, bytes] = {}  # serial -> record, oldest first
        self._clock = float("-inf")
        self._next_serial = 1
        self._fingerprint: dict[str, int | str] | None = None
        self._progress: dict[str, int | str] = {}
        self._purged = 0
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

    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int | str] | None = None,
        before_commit: Callable[[list[Match | None]], None] | None = None,
    ) -> list[Match | None]:
        settings = self._settings
        if settings is None:
            raise StoreError("the memory store is not open")
        with self._lock:
            # A dict cannot roll back: the callback runs after the batch is
            # recorded. Nothing here survives the process anyway.
            results = [self._judge(sketch, settings) for sketch in sketches]
            if settings.ttl_seconds > 0 and self._clock > float("-inf"):
                self._purge(self._clock - settings.ttl_seconds, settings.purge_limit)
            if progress:
                self._progress.update(progress)
            if before_commit is not None:
                before_commit(results)
        return results

    def _judge(self, sketch: Sketch, settings: IndexSettings) -> Match | None:
        self._clock = max(self._clock, sketch.timestamp)
        after = _rules.horizon(self._clock, settings.ttl_seconds)
        band_keys = key_bytes(sketch.band_keys)
        shared: dict[int, int] = {}
        for band_key in band_keys:
            for serial in _rules.newest_per_key(self._bands.get(band_key, ()), settings.max_candidates_per_band):
                shared[serial] = shared.get(serial, 0) + 1
        read = self._posts.get
        if sketch.refers_to is not None:
            newest_first = sorted(shared, reverse=True)
            return _rules.referenced(self._cache.posts(read, newest_first), sketch.refers_to, after)
        own = CachedPost.of(sketch)
        candidates = self._cache.posts(read, _rules.rank_candidates(shared))
        best = _rules.best_match(candidates, sketch, own, after, settings.jaccard_threshold, settings.shingle_size)
        if best is None:
            serial = self._next_serial
            self._next_serial += 1
            self._posts[serial] = encode_record(sketch.timestamp, sketch.post_id, own.words)
            for band_key in band_keys:
                self._bands.setdefault(band_key, []).append(serial)
            self._cache.put(serial, own)
        return best

    def _purge(self, cutoff: float, limit: int) -> None:
        """Delete up to ``limit`` posts from the oldest serial on, while they have expired."""
        assert self._settings is not None
        for serial in list(itertools.islice(self._posts, limit)):
            record = self._posts[serial]
            timestamp, post_id, words = decode_record(record)
            if timestamp > cutoff:
                break
            keys = self._settings.rekey([np.frombuffer(words, dtype=np.uint32)], [post_id])[0]
            for band_key in key_bytes(keys):
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
                band_key = key_bytes(np.array([id_key], dtype=np.uint64))[0]
                for serial in self._bands.get(band_key, ()):
                    timestamp, stored_id, words = decode_record(self._posts[serial])
                    if stored_id == post_id and timestamp != FORGOTTEN:
                        self._posts[serial] = encode_record(FORGOTTEN, stored_id, bytes(words))
                        forgotten += 1
            self._cache.clear()
        return forgotten

    def progress(self) -> dict[str, int | str]:
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
        self._settings = None
