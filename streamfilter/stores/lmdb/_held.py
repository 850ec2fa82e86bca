"""The posts a held transaction keeps in memory until it commits (``_group``).

The sync API's one-record calls share one write transaction, a group. The
posts they find novel are kept here, not written, until the group commits:
a call then costs no LMDB write, no run and no merge. Each later call of the
group sees them as the index would: their serials under their index keys,
with the stored ones, newest first and cut to what a key offers
(``_base.offered``), and the posts themselves by serial. They are all newer
than any stored post, and purging waits for the commit, so they are live.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ..._compiled import chosen, kernel
from ..._rules import OLDEST_PER_KEY, offered_per_key
from ..._values import BandKeys, CachedPost, Judgement, Sketches
from ._runs import short_keys

__all__ = ["HeldPosts"]


class HeldPosts:
    """A group's recorded posts, in serial order from ``first``."""

    def __init__(self, first: int, limit: int) -> None:
        self.first = first
        self.limit = limit  # max_candidates_per_band
        self.clock = -math.inf  # the newest time its batches were judged at
        self.keys: list[npt.NDArray[np.uint64]] = []  # each held post's band keys
        self.posts: list[CachedPost] = []
        self._by_serial: dict[int, CachedPost] = {}
        # index key -> the serial of its one held post, or a list of serials, oldest first
        self._under: dict[int, int | list[int]] = {}

    def __len__(self) -> int:
        return len(self.posts)

    @property
    def next_serial(self) -> int:
        return self.first + len(self.posts)

    def add(self, sketches: Sketches, judgement: Judgement) -> None:
        """Keep a judged batch's recorded posts (serials from ``next_serial``) and its clock."""
        assert judgement.first_serial == self.next_serial
        for index, post in zip(judgement.recorded, judgement.posts, strict=True):
            self._keep(sketches.band_keys(index), post)
        self.clock = max(self.clock, judgement.clock)

    def adopt(self, earlier: HeldPosts) -> None:
        """Keep the posts another transaction held (it aborted), with serials from ``next_serial``."""
        for band_keys, post in zip(earlier.keys, earlier.posts, strict=True):
            self._keep(band_keys, post)
        self.clock = max(self.clock, earlier.clock)

    def band_keys(self) -> BandKeys:
        """The held posts' band keys, end to end, and how many each has."""
        if not self.keys:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        return np.concatenate(self.keys), np.array([len(keys) for keys in self.keys], dtype=np.int64)

    def _keep(self, band_keys: npt.NDArray[np.uint64], post: CachedPost) -> None:
        serial = self.next_serial
        self.keys.append(band_keys)
        self.posts.append(post)
        self._by_serial[serial] = post
        under = self._under
        keys = set(short_keys(band_keys).tolist())
        shared = keys & under.keys()  # keys an earlier held post has too: few
        for key in shared:
            held = under[key]
            if isinstance(held, int):
                under[key] = [held, serial]
            else:
                held.append(serial)
        # most keys are new: one serial each, filed in one call
        under.update(dict.fromkeys(keys - shared if shared else keys, serial))

    def post(self, serial: int) -> CachedPost | None:
        return self._by_serial.get(serial)

    def _c_with_held(
        self, queries: npt.NDArray[np.uint64], hits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        query_of = np.ascontiguousarray(hits[0], dtype=np.int64)
        serial_of = np.ascontiguousarray(hits[1], dtype=np.int64)
        queries = np.ascontiguousarray(queries, dtype=np.uint64)
        found = kernel.with_held(queries, self._under, query_of, serial_of, self.limit, OLDEST_PER_KEY)
        if found is None:
            return hits
        return np.frombuffer(found[0], dtype=np.int64), np.frombuffer(found[1], dtype=np.int64)

    def _py_with_held(
        self, queries: npt.NDArray[np.uint64], hits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``hits`` (the stored members of each query, as ``members`` gives
        them: by query, newest first, cut to what each offers) with the held
        posts filed under the queries: what the index would offer had they
        been written. The held posts are newer than every stored one, so a
        query's members are its stored ones, then its held ones, oldest
        first; and the stored ones are each key's newest and oldest already,
        so cutting the two together (``_rules.offered_per_key``) gives what
        cutting all would. A batch of one post has a few dozen hits at most:
        lists, not arrays."""
        under = self._under
        held = [[serials] if isinstance(serials := under.get(key), int) else serials for key in queries.tolist()]
        if not any(held):
            return hits
        stored: dict[int, list[int]] = {}  # a few hits in all: most queries have none
        for query, serial in zip(hits[0].tolist(), hits[1].tolist(), strict=True):
            stored.setdefault(query, []).append(serial)
        most = OLDEST_PER_KEY + self.limit
        query_of: list[int] = []
        serial_of: list[int] = []
        for index, serials in enumerate(held):
            members = stored.get(index)  # newest first
            if serials:
                every = [*reversed(members), *serials] if members else serials  # oldest first
                members = (every if len(every) <= most else offered_per_key(every, self.limit))[::-1]
            if members:
                query_of += [index] * len(members)
                serial_of += members
        return np.array(query_of, dtype=np.int64), np.array(serial_of, dtype=np.int64)

    with_held = chosen(_c_with_held, _py_with_held)
