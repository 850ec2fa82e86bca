"""The store Protocol, the values that cross it, and ``run_batch``: judging
one post at a time over primitive look-ups, which the memory store runs.

The LMDB store judges a whole batch's look-ups at once (``stores/lmdb.py``);
a conformance test checks that both give the same verdicts."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._exceptions import ConfigMismatchError
from .._shingle import verification_set

__all__ = ["BandStore", "CachedPost", "IndexSettings", "IndexTxn", "Match", "PostCache", "Sketch", "run_batch"]


@dataclass(slots=True)
class Sketch:
    """What a store needs of one post: who it is, when, its bands and what verifies it.

    ``shingles`` holds the values of the post's runs of 1 to k words, the set
    that verification compares (``_shingle.verification_hashes``); ``words``
    its 32-bit word hashes in order, from which a store may rebuild that set
    (``_shingle.verification_set``) and its band keys (``rekey``) instead of
    storing them.
    """

    post_id: str
    timestamp: float
    band_keys: npt.NDArray[np.uint64]
    shingles: npt.NDArray[np.uint64]
    words: npt.NDArray[np.uint32]
    # True when the post had no id and ``post_id`` was made up ("line:N"):
    # such ids can repeat across inputs, so they do not identify a post alone.
    made_up_id: bool = False
    # A reference: a repost that carries no text, judged by the post it
    # reposts. ``band_keys`` holds that post's id key; the sketch is a
    # duplicate of it when it is live in the index, and is never recorded.
    refers_to: str | None = None
    # The post's text ends in a word cut by "…" (``_normalize.is_cut_off``):
    # it is also compared with the start of each candidate (``judged_similarity``).
    cut_off: bool = False


@dataclass(frozen=True, slots=True)
class Match:
    """The earlier post that a sketch duplicates, and their similarity: the
    Jaccard of their words and word pairs, or what ``judged_similarity``
    raised it to (the start of a post a cut copy keeps, or a word edit or two)."""

    duplicate_of: str
    similarity: float


@dataclass(frozen=True)
class IndexSettings:
    """How a store verifies and expires.

    ``fingerprint`` holds the settings that shape signatures and band keys; a
    store pins it on first use and refuses to open with a different one.
    ``rekey`` turns stored word hashes and post ids back into band keys (the
    id key included), so a store can delete an expired post's bands without
    storing them. ``shingle_size`` is the longest run of words verification
    compares (``_shingle.verification_set``).
    """

    fingerprint: Mapping[str, int | str]
    jaccard_threshold: float
    ttl_seconds: float
    rekey: Callable[[Sequence[npt.NDArray[np.uint32]], Sequence[str]], npt.NDArray[np.uint64]] = field(repr=False)
    max_candidates_per_band: int = 64
    purge_limit: int = 1024

    @property
    def shingle_size(self) -> int:
        return int(self.fingerprint["shingle_size"])


@runtime_checkable
class BandStore(Protocol):
    """An LSH index with an atomic check-and-insert."""

    def open(self, settings: IndexSettings) -> None:
        """Open (creating if needed) and pin or check ``settings.fingerprint``."""

    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int] | None = None,
        before_commit: Callable[[list[Match | None]], None] | None = None,
    ) -> list[Match | None]:
        """Judge the sketches in order, in one transaction.

        A sketch gets None when it is novel, and is then recorded, so a later
        sketch of the same batch sees it. Otherwise it gets the Match that
        made it a duplicate, and nothing is recorded.

        ``progress`` (input name -> lines done) is recorded in the same
        transaction. ``before_commit`` is called with the results inside the
        transaction, before it commits: whatever it writes out is on its way
        before the index says these posts were seen, so a crash between the
        two repeats a batch instead of losing it. If it raises, nothing commits.
        """

    def progress(self) -> dict[str, int]:
        """The input progress recorded by the last committed batch."""

    def post_count(self) -> int:
        """Live and not-yet-purged posts in the index."""

    def close(self) -> None: ...


def check_fingerprint(location: str, stored: Mapping[str, object], requested: Mapping[str, object]) -> None:
    differences = {
        name: (stored.get(name), requested.get(name))
        for name in set(stored) | set(requested)
        if stored.get(name) != requested.get(name)
    }
    if differences:
        raise ConfigMismatchError(location, differences)


_POST_HEADER = struct.Struct("<dH")


def encode_post(timestamp: float, post_id: str, payload: bytes) -> bytes:
    """A post record: timestamp, id, then the store's verification data."""
    encoded_id = post_id.encode("utf-8")[:0xFFFF]
    return _POST_HEADER.pack(timestamp, len(encoded_id)) + encoded_id + payload


def decode_post(value: bytes | memoryview) -> tuple[float, str, memoryview]:
    """(timestamp, post id, the payload's bytes)."""
    timestamp, id_length = _POST_HEADER.unpack_from(value)
    start = _POST_HEADER.size
    post_id = bytes(value[start : start + id_length]).decode("utf-8", "replace")
    return timestamp, post_id, memoryview(value)[start + id_length :]


def encode_words(timestamp: float, post_id: str, words: npt.NDArray[np.uint32]) -> bytes:
    """A post record whose payload is its word hashes, 4 bytes each."""
    return encode_post(timestamp, post_id, words.astype("<u4", copy=False).tobytes())


def decode_words(value: bytes | memoryview) -> tuple[float, str, memoryview]:
    """(timestamp, post id, word hashes as a uint32 memoryview) of a record whose payload is words."""
    timestamp, post_id, payload = decode_post(value)
    return timestamp, post_id, payload.cast("I")


class _PostReader(Protocol):
    """What verification reads: a stored post's record by serial."""

    def get_post(self, serial: int) -> bytes | memoryview | None: ...


class IndexTxn(_PostReader, Protocol):
    """The primitive reads and writes of one store transaction.

    Band keys cross this interface as 8-byte big-endian strings.
    """

    def first_members(self, band_keys: Sequence[bytes]) -> list[int]:
        """One serial per band key that exists (the oldest), each serial once."""

    def members(self, band_keys: Sequence[bytes], limit: int) -> list[int]:
        """Serials recorded under any of the band keys: per key the newest
        ``limit`` at most, each serial once."""

    def insert(self, serial: int, timestamp: float, band_keys: Sequence[bytes], record: bytes) -> None: ...

    def expired(self, cutoff: float, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` (serial, record) of posts with timestamp <= cutoff, oldest first."""

    def delete(self, serial: int, timestamp: float, band_keys: Sequence[bytes]) -> None: ...


def key_bytes(band_keys: npt.NDArray[np.uint64]) -> list[bytes]:
    packed = band_keys.astype(">u8").tobytes()
    return [packed[start : start + 8] for start in range(0, len(packed), 8)]


class CachedPost:
    """What verification needs of one post: its time, id, word hashes as
    stored (bytes of little-endian uint32) and, once a comparison needed it,
    its verification set."""

    __slots__ = ("members", "post_id", "timestamp", "words")

    def __init__(self, timestamp: float, post_id: str, words: bytes, members: set[int] | None = None) -> None:
        self.timestamp = timestamp
        self.post_id = post_id
        self.words = words
        self.members = members

    @classmethod
    def of(cls, sketch: Sketch) -> CachedPost:
        return cls(sketch.timestamp, sketch.post_id, sketch.words.astype("<u4", copy=False).tobytes())


class PostCache:
    """Decoded verification data of recently checked or recorded posts, by serial.

    Stored posts never change and serials are never reused, so entries stay
    true; a purged post can linger here but is unreachable, since its band
    entries are gone. Templated streams check the same few posts over and
    over, and decoding them once saves most of the verification cost; a
    store also ``put``s the posts it records, with the set their own
    judging built, so a near-duplicate arriving soon after finds its
    original here. ``decode`` reads a record as (timestamp, post id, word
    hashes) in the store's own record format. The verification set, of runs
    of up to ``shingle_size`` words (set by the store when it opens), is
    built the first time a comparison needs it (``members``), since a copy
    with the very same words needs no set at all.

    Two generations of at most ``capacity / 2`` entries each: when the new
    one fills, the old one is dropped and the new one becomes old; an entry
    found in the old one moves to the new one.
    """

    def __init__(
        self,
        decode: Callable[[bytes | memoryview], tuple[float, str, memoryview]] = decode_words,
        capacity: int = 8192,
    ) -> None:
        self.decode = decode
        self.capacity = capacity
        self.shingle_size = 2
        self._new: dict[int, CachedPost] = {}
        self._old: dict[int, CachedPost] = {}

    def clear(self) -> None:
        self._new.clear()
        self._old.clear()

    def put(self, serial: int, post: CachedPost) -> None:
        if len(self._new) >= self.capacity // 2:
            self._old, self._new = self._new, {}
        self._new[serial] = post

    def get(self, txn: _PostReader, serial: int) -> CachedPost | None:
        post = self._new.get(serial)
        if post is None:
            post = self._old.get(serial)
            if post is None:
                record = txn.get_post(serial)
                if record is None:
                    return None
                timestamp, post_id, words = self.decode(record)
                post = CachedPost(timestamp, post_id, words.tobytes())
            self.put(serial, post)
        return post

    def members(self, post: CachedPost) -> set[int]:
        """The verification set of a post from ``get``."""
        if post.members is None:
            post.members = verification_set(self.words(post), self.shingle_size)
        return post.members

    @staticmethod
    def words(post: CachedPost) -> list[int]:
        """The word hashes of a post from ``get``, in order."""
        return memoryview(post.words).cast("I").tolist()


def jaccard(query: set[int] | frozenset[int], other: set[int] | frozenset[int]) -> float:
    """Exact Jaccard similarity of two verification sets."""
    shared = len(other & query) if len(other) < len(query) else len(query & other)
    return shared / (len(query) + len(other) - shared)


# A post cut off by "…" is also compared with the same number of words at
# the start of each earlier post (see ``judged_similarity``), when it keeps at least
# this many words and the start matches at least this well. Offline, on the
# airline tweets (``benchmarks/cuts.py``; README, "Truncated copies"): of
# copies cut to 40-60% of their characters, 71% reach the threshold this way
# against 22.5% by Jaccard with the whole post; of 9,185 distinct tweets cut
# at random, 27 match the start of an earlier one.
CUT_OFF_MIN_WORDS = 6
CUT_OFF_MIN_SIMILARITY = 0.8
# Two posts of at least this many words each, at most this many word edits
# apart (insertions, deletions, substitutions), whose Jaccard is at least
# EDIT_MIN_JACCARD, are also compared by their words in order (see
# ``judged_similarity``; README, "Word edits"). Two edits change most word
# pairs of a short post, so the Jaccard of a six-word copy with two words
# changed falls to 0.29-0.48.
EDIT_MIN_WORDS = 6
EDIT_MAX_EDITS = 2
EDIT_MIN_JACCARD = 0.4


def word_edits(first: Sequence[object], second: Sequence[object], limit: int) -> int:
    """The word-level edit distance of two posts (their words in order), or
    ``limit + 1`` once it is known to be over ``limit``: only the cells
    within ``limit`` of the diagonal are computed."""
    if abs(len(first) - len(second)) > limit:
        return limit + 1
    over = limit + 1
    previous = {j: j for j in range(min(len(second), limit) + 1)}
    for i, word in enumerate(first, 1):
        current = {0: i} if i <= limit else {}  # a cell outside the band counts as over
        for j in range(max(1, i - limit), min(len(second), i + limit) + 1):
            current[j] = min(
                previous.get(j, over) + 1,
                current.get(j - 1, over) + 1,
                previous.get(j - 1, over) + (word != second[j - 1]),
            )
        if min(current.values()) > limit:
            return over
        previous = current
    return min(previous.get(len(second), over), over)


def edit_similarity(first: Sequence[object], second: Sequence[object]) -> float:
    """1 - edits / the longer post's words, for two posts of at least
    ``EDIT_MIN_WORDS`` words at most ``EDIT_MAX_EDITS`` word edits apart;
    0.0 for any others."""
    if min(len(first), len(second)) < EDIT_MIN_WORDS:
        return 0.0
    edits = word_edits(first, second, EDIT_MAX_EDITS)
    return 1 - edits / max(len(first), len(second)) if edits <= EDIT_MAX_EDITS else 0.0


def _ints(words: Sequence[int] | npt.NDArray[np.uint32]) -> list[int]:
    """Word hashes as Python ints (a pair shifts a word 32 bits up, which a uint32 cannot hold)."""
    return words.tolist() if isinstance(words, np.ndarray) else list(words)


def judged_similarity(
    sketch: Sketch,
    query: set[int],
    other: set[int],
    other_words: Sequence[int] | npt.NDArray[np.uint32],
    shingle_size: int,
    threshold: float,
) -> float:
    """How similar a post (``sketch``, its verification set ``query``) is to
    an earlier one (its set ``other``, its word hashes in order): their
    Jaccard, raised by ``under_threshold`` when that is under the threshold."""
    return under_threshold(jaccard(query, other), sketch, query, other_words, shingle_size, threshold)


def under_threshold(
    whole: float,
    sketch: Sketch,
    query: set[int],
    other_words: Sequence[int] | npt.NDArray[np.uint32],
    shingle_size: int,
    threshold: float,
) -> float:
    """``whole``, the Jaccard of a post and an earlier one, or, when it is
    under the threshold, what one of two more comparisons raises it to:
    - a post cut off by "…" (``sketch.cut_off``) of at least
      ``CUT_OFF_MIN_WORDS`` words: the Jaccard with the earlier post's first
      n or n + 1 words (n the cut post's own), when it reaches
      ``CUT_OFF_MIN_SIMILARITY``: a cut copy keeps the start of a post, and
      the rest is missing, not different;
    - posts with a Jaccard of at least ``EDIT_MIN_JACCARD``:
      ``edit_similarity`` of their words.
    """
    if whole >= threshold:
        return whole
    best = whole
    length = len(sketch.words)
    if sketch.cut_off and length >= CUT_OFF_MIN_WORDS and len(other_words) > length:
        start_words = _ints(other_words[: length + 1])
        start = max(jaccard(query, verification_set(start_words[:size], shingle_size)) for size in (length, length + 1))
        if start >= max(threshold, CUT_OFF_MIN_SIMILARITY):
            best = max(best, start)
    if whole >= EDIT_MIN_JACCARD:
        best = max(best, edit_similarity(_ints(sketch.words), _ints(other_words)))
    return best


def best_match(
    txn: _PostReader,
    cache: PostCache,
    serials: Iterable[int],
    sketch: Sketch,
    own: CachedPost,
    horizon: float,
    threshold: float,
) -> Match | None:
    """The most similar live post among ``serials`` at or above the threshold
    (exact Jaccard, or ``judged_similarity`` under the threshold); the first
    with the sketch's very words wins at once.
    ``own`` is the sketch as a CachedPost (``CachedPost.of``); its set is
    built here when a comparison needs it, for the cache should it be recorded."""
    best: Match | None = None
    for serial in serials:
        post = cache.get(txn, serial)
        if post is None or post.timestamp <= horizon:
            continue
        if post.words == own.words:  # the same words in the same order: the same set
            return Match(post.post_id, 1.0)
        if own.members is None:
            own.members = set(sketch.shingles.tolist())
        found = jaccard(own.members, cache.members(post))
        if found < threshold and (found >= EDIT_MIN_JACCARD or sketch.cut_off):  # the rare cases
            found = under_threshold(found, sketch, own.members, cache.words(post), cache.shingle_size, threshold)
        if found >= threshold and (best is None or found > best.similarity):
            best = Match(post.post_id, found)
            if found == 1.0:
                break
    return best


def referenced(
    txn: _PostReader, cache: PostCache, serials: Iterable[int], post_id: str, horizon: float
) -> Match | None:
    """The live post ``post_id`` among ``serials`` (found under its id key), as a Match; None when it is not there."""
    for serial in serials:
        post = cache.get(txn, serial)
        if post is not None and post.post_id == post_id and post.timestamp > horizon:
            return Match(post_id, 1.0)
    return None


def run_batch(
    txn: IndexTxn,
    sketches: Sequence[Sketch],
    settings: IndexSettings,
    clock: float,
    next_serial: int,
    cache: PostCache,
) -> tuple[list[Match | None], float, int]:
    """Judge a batch inside one transaction; returns (matches, clock, next serial).

    The clock is the highest timestamp seen so far. A stored post is visible
    while its timestamp is newer than ``clock - ttl``, so expired entries stop
    matching at once even before they are purged. Purging then removes at most
    ``purge_limit`` expired posts, oldest first, through the expiry order.
    """
    ttl = settings.ttl_seconds
    threshold = settings.jaccard_threshold
    per_band = settings.max_candidates_per_band
    results: list[Match | None] = []
    for sketch in sketches:
        clock = max(clock, sketch.timestamp)
        horizon = clock - ttl if ttl > 0 else float("-inf")
        band_keys = key_bytes(sketch.band_keys)
        if sketch.refers_to is not None:
            results.append(referenced(txn, cache, txn.members(band_keys, per_band), sketch.refers_to, horizon))
            continue
        best: Match | None = None
        # Most band keys hold one post, so the first member of each key is
        # checked first; deeper lists are only read when that finds nothing.
        candidates = txn.first_members(band_keys)
        own = CachedPost.of(sketch)
        if candidates:
            best = best_match(txn, cache, candidates, sketch, own, horizon, threshold)
            if best is None:
                checked = set(candidates)
                deeper = [serial for serial in txn.members(band_keys, per_band) if serial not in checked]
                if deeper:
                    best = best_match(txn, cache, deeper, sketch, own, horizon, threshold)
        if best is None:
            record = encode_words(sketch.timestamp, sketch.post_id, sketch.words)
            txn.insert(next_serial, sketch.timestamp, band_keys, record)
            cache.put(next_serial, own)
            next_serial += 1
        results.append(best)
    if ttl > 0 and math.isfinite(clock):
        expired = txn.expired(clock - ttl, settings.purge_limit)
        if expired:
            decoded = [decode_words(record) for _, record in expired]
            word_seqs = [np.frombuffer(words, dtype=np.uint32) for _, _, words in decoded]
            all_keys = settings.rekey(word_seqs, [post_id for _, post_id, _ in decoded])
            for (serial, _), (timestamp, _, _), keys in zip(expired, decoded, all_keys, strict=True):
                txn.delete(serial, timestamp, key_bytes(keys))
    return results, clock, next_serial
