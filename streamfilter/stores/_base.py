"""The store Protocol and the values that cross it.

Stores keep the index and nothing more: the one batch judge (``_judge``)
applies the rules (``_rules``) to what a store's transaction finds, and a
differential test runs every store over the same streams."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._compiled import chosen, from_kernel
from .._exceptions import ConfigMismatchError
from .._rules import MAX_CANDIDATES_PER_BAND, OLDEST_PER_KEY
from .._values import CachedPost, Judgement, Match, Matches, Sketch, Sketches
from ._records import decode_record

__all__ = [
    "FORGOTTEN",
    "BandStore",
    "IndexSettings",
    "IndexTransaction",
    "Match",
    "Matches",
    "PostCache",
    "RetryBatch",
    "Sketch",
    "Sketches",
    "check_fingerprint",
    "pinned_fingerprint",
    "with_seed",
    "is_same_post",
    "key_bytes",
    "rank_in_group",
    "offered",
    "by_query_newest_first",
]


@dataclass(frozen=True)
class IndexSettings:
    """How a store verifies and expires.

    ``fingerprint`` holds the settings that shape signatures and band keys; a
    store pins it on first use (drawing the seed, when it is None:
    ``with_seed``) and refuses to open with a different one. ``rekey`` turns
    stored word hashes back into the keys a post's text filed it under (its
    band keys, exact-words key and start keys; not its id key), so a store
    can find another post's keys without storing them. ``shingle_size`` is the longest run of words verification
    compares (``_shingle.verification_set``).
    """

    fingerprint: Mapping[str, int | str | None]
    jaccard_threshold: float
    ttl_seconds: float
    rekey: Callable[[Sequence[npt.NDArray[np.uint32]]], npt.NDArray[np.uint64]] = field(repr=False)
    max_candidates_per_band: int = MAX_CANDIDATES_PER_BAND
    purge_limit: int = 1024

    @functools.cached_property
    def shingle_size(self) -> int:  # read by every judged batch; a frozen dataclass keeps it in __dict__
        return int(self.fingerprint["shingle_size"] or 0)


class RetryBatch(Exception):  # noqa: N818 - a signal to the judge, not an error
    """Raised by a store's transaction that must begin again (its map grew, or
    another writer changed what the batch read): it has aborted, and the batch
    is judged anew (``_judge.run_batch``)."""


class IndexTransaction(Protocol):
    """What a store offers the one batch judge (``_judge``): a narrow index
    transaction, from ``BandStore.begin`` to ``commit`` or ``abort``.

    Posts are known by serial: a store gives its recorded posts increasing
    serials, so a larger serial is a newer post.
    """

    settings: IndexSettings
    # the newest event time the index had seen when the transaction began
    # (read once ``members`` has answered: a store may read it with them)
    clock: float
    next_serial: int  # the serial the batch's first recorded post will get
    # a stored post with the id of a post being judged may be that post itself,
    # recorded by an earlier attempt at its batch that was not acknowledged
    replays_seen: bool

    def index_keys(self, band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """The band keys as the index files them (a store may keep fewer bits)."""

    def members(self, queries: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(query index, serial) of the posts filed under each of ``queries``
        (distinct index keys): sorted by query, newest first, those each
        offers (``_rules.offered_per_key``: its newest ``max_candidates_per_band``
        and oldest ``OLDEST_PER_KEY``), none that is purged."""

    def post(self, serial: int) -> CachedPost | None:
        """A stored post, or None when it is gone."""

    def record(self, sketches: Sketches, judgement: Judgement) -> Matches:
        """Record the judgement's novel posts (``judgement.recorded``, with
        serials from ``next_serial`` on) and its clock; returns the matches,
        which a shared index may change (a concurrent writer recorded the
        same text first)."""

    def commit(self, progress: Mapping[str, int | str] | None) -> None:
        """Record ``progress`` (input name -> lines done, or a live source's
        resume key -> its position) and make the batch durable."""

    def abort(self) -> None:
        """Give the transaction up: nothing of it is kept."""


@runtime_checkable
class BandStore(Protocol):
    """An LSH index with an atomic check-and-insert."""

    def open(self, settings: IndexSettings) -> Mapping[str, int | str]:
        """Open (creating if needed) and pin or check ``settings.fingerprint``;
        returns the fingerprint pinned, with the index's seed."""

    def begin(self) -> IndexTransaction:
        """An index transaction for one batch (see ``_judge.run_batch``)."""

    def progress(self) -> dict[str, int | str]:
        """The progress recorded by the committed batches, by input or source."""

    def post_count(self) -> int:
        """Live and not-yet-purged posts in the index."""

    def purged_count(self) -> int | None:
        """Posts this store object purged since it opened; None when the
        store leaves expiry to its server (Redis) and cannot count it."""

    def clock(self) -> float:
        """The newest event time the index has seen (-inf for none yet)."""

    def pinned_settings(self) -> dict[str, int | str] | None:
        """The settings pinned in the index, or None when none are pinned yet.

        Works before ``open`` and changes nothing, so a caller can choose
        settings that match an existing index."""

    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int | str] | None = None,
        deliver: Callable[[Matches], None] | None = None,
    ) -> Matches:
        """Judge ``sketches`` in order in one transaction, record the novel
        ones, and commit (``_judge.TransactionalStore`` gives it to every store).
        The matches are a sequence of ``Match | None``, one a sketch."""

    def forget(self, posts: Sequence[tuple[str, int]]) -> int:
        """Forget each (post id, id key): no later post matches it. Returns
        how many of them the index held."""

    def close(self) -> None: ...


def is_same_post(sketch: Sketch, post_id: str, timestamp: float) -> bool:
    """Whether a stored record (its post id and time) is the post ``sketch``
    itself, recorded by an earlier attempt at its batch (a lost reply, or a
    run killed before its output was written) on a shared index.

    A post id from the platform says so alone: a post without a timestamp gets
    the wall clock, which differs on the second attempt. A made-up id
    ("line:N") repeats across inputs, so the timestamp must match too.
    """
    return post_id == sketch.post_id and (timestamp == sketch.timestamp or not sketch.made_up_id)


# The event time a forgotten post is given (``forget``): before any horizon,
# -inf included, so no rule counts it, and purging takes it in its turn.
FORGOTTEN = float("-inf")


def with_seed(requested: Mapping[str, object]) -> dict[str, object]:
    """``requested`` as a new index pins it: a seed left to the index (None)
    drawn now, from the operating system's secure source, and kept secret
    in the index, so nobody can compute its band keys offline."""
    pinned = dict(requested)
    if pinned.get("seed") is None:
        import secrets  # here: only a new index draws one, and its import is a start-up cost

        pinned["seed"] = secrets.randbelow(2**32)
    return pinned


def pinned_fingerprint(
    location: str, stored: Mapping[str, object] | None, requested: Mapping[str, object]
) -> dict[str, int | str]:
    """The fingerprint an index keeps: for a new one (``stored`` None),
    ``requested`` with its seed drawn (``with_seed``); else ``stored``, once
    ``check_fingerprint`` found that ``requested`` asks for it."""
    if stored is None:
        return with_seed(requested)  # type: ignore[return-value]
    check_fingerprint(location, stored, requested)
    return dict(stored)  # type: ignore[arg-type]


def check_fingerprint(location: str, stored: Mapping[str, object], requested: Mapping[str, object]) -> None:
    """ConfigMismatchError unless ``requested`` is what the index pinned; a
    seed of None asks for the index's own, whatever it is."""
    if requested.get("seed") is None:
        requested = {**requested, "seed": stored.get("seed")}
    differences = {
        name: (stored.get(name), requested.get(name))
        for name in set(stored) | set(requested)
        if stored.get(name) != requested.get(name)
    }
    if differences:
        raise ConfigMismatchError(location, differences)


def key_bytes(band_keys: npt.NDArray[np.uint64]) -> list[bytes]:
    packed = band_keys.astype(">u8").tobytes()
    return [packed[start : start + 8] for start in range(0, len(packed), 8)]


class _PyRecentPosts:
    """Two generations of at most ``half`` posts each, by serial: when the
    new one fills, the old one is dropped and the new one becomes old; a
    post found in the old one moves to the new one (``PostCache``)."""

    def __init__(self, half: int) -> None:
        if half < 1:
            raise ValueError("RecentPosts needs room for a post")
        self._half = half
        self._new: dict[int, CachedPost] = {}
        self._old: dict[int, CachedPost] = {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def clear(self) -> None:
        self._new.clear()
        self._old.clear()

    def put(self, serial: int, post: CachedPost) -> None:
        if len(self._new) >= self._half:
            self._old, self._new = self._new, {}
        self._new[serial] = post

    def get(self, serial: int) -> CachedPost | None:
        post = self._new.get(serial)
        return post if post is not None else self._old.get(serial)


# the kernel's (_kernel_cache.c), which the compiled judge reads and adds to itself
RecentPosts = chosen(from_kernel("RecentPosts"), _PyRecentPosts)


class PostCache:
    """Decoded verification data of recently checked or recorded posts, by serial.

    Stored posts never change and serials are never reused, so entries stay
    true; a purged post can linger here but is unreachable, since its band
    entries are gone. Templated streams check the same few posts over and
    over, and decoding them once saves most of the verification cost; a
    store also ``put``s the posts it records, so a near-duplicate arriving
    soon after finds its original here. A post's verification set is built
    the first time a comparison needs it (``CachedPost``), since a copy
    with the very same words needs no set at all, and is kept with it.

    Its posts are a ``RecentPosts`` of ``capacity / 2`` a generation.
    """

    def __init__(self, capacity: int = 32768) -> None:
        self.capacity = capacity
        self.recent = RecentPosts(max(1, capacity // 2))  # what the compiled judge reads and adds to

    def clear(self) -> None:
        self.recent.clear()

    def put(self, serial: int, post: CachedPost) -> None:
        self.recent.put(serial, post)

    def get(self, read: Callable[[int], bytes | memoryview | None], serial: int) -> CachedPost | None:
        post: CachedPost | None = self.recent.get(serial)
        if post is None:
            record = read(serial)
            if record is None:
                return None
            timestamp, post_id, words = decode_record(record)
            post = CachedPost(timestamp, post_id, words.tobytes())
        self.recent.put(serial, post)
        return post


def rank_in_group(groups: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each element's position within its run of equal values (``groups`` sorted)."""
    count = len(groups)
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    return np.arange(count) - np.repeat(starts, np.diff(np.append(starts, count)))


def offered(query_of: npt.NDArray[np.int64], limit: int) -> npt.NDArray[np.bool_]:
    """Which hits each query offers (``_rules.offered_per_key``), of hits
    sorted by query, newest first, each once: its newest ``limit`` and its
    oldest ``OLDEST_PER_KEY``."""
    rank = rank_in_group(query_of)
    starts = np.flatnonzero(np.concatenate(([True], query_of[1:] != query_of[:-1]))) if len(query_of) else query_of
    sizes = np.diff(np.append(starts, len(query_of)))
    from_oldest = np.repeat(sizes, sizes) - 1 - rank
    return (rank < limit) | (from_oldest < OLDEST_PER_KEY)


_SERIAL_BITS = 40  # serials below 2**40, queries below 2**23: one int64 sort key holds both


def by_query_newest_first(
    query_of: npt.NDArray[np.int64], serial_of: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Hits sorted by query, each query's newest (largest serial) first.

    One sort of a combined int64 key where both fit in it, far cheaper than
    ``np.lexsort`` over a flood's hits (the commit that made it says how
    much), the lexsort otherwise."""
    if len(query_of) == 0:
        return query_of, serial_of
    mask = (1 << _SERIAL_BITS) - 1
    if int(serial_of.max()) > mask or int(query_of.max()) >= 1 << (63 - _SERIAL_BITS) or int(serial_of.min()) < 0:
        order = np.lexsort((-serial_of, query_of))
        return query_of[order], serial_of[order]
    combined = (query_of.astype(np.int64) << _SERIAL_BITS) | (mask - serial_of.astype(np.int64))
    combined.sort()
    return combined >> _SERIAL_BITS, mask - (combined & mask)
