"""Locality-sensitive hashing: the S-curve, the choice of (bands, rows), band keys.

A pair with Jaccard similarity s becomes a candidate when all ``rows`` values
of at least one of the ``bands`` bands agree:

    P(candidate | s) = 1 - (1 - s**rows) ** bands

Every permutation is used: ``bands * rows == num_perm``.

Choosing (bands, rows). Candidates are verified against stored shingle
sets, so a false candidate costs one verification and never a wrong
verdict; a missed candidate is a missed duplicate. The chooser therefore
takes the (bands, rows) with the fewest bands (the least index and the least
work per post) whose probability of catching a pair *exactly at* the
threshold is at least ``1 - max_miss_rate``. When no split reaches that, the
one with the highest probability at the threshold wins.

The curve is over the similarity of k-word shingles, which MinHash sees.
Verification compares runs of 1 to k words (``_shingle``), which rate an
edited post higher: with one word replaced and one added, a nine-word tweet
keeps 0.42 of its word pairs and 0.57 of its words and pairs. So a pair just
at the verification threshold sits lower on the curve, and is caught less
often than the curve at the threshold says; docs/benchmarks.md has the
measured recall per kind of edit.

The areas that datasketch minimises (false positives below the threshold,
false negatives above it) are reported too, but normalised by the width of
their interval, so they read as average probabilities: datasketch's raw
integrals make a threshold of 0.9 count false negatives over a fifth of the
width they get at 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mmh3
import numpy as np
import numpy.typing as npt

from ._compiled import chosen, kernel

__all__ = [
    "BandPlan",
    "band_keys",
    "candidate_probability",
    "choose_bands",
    "choose_for_rates",
    "exact_keys",
    "id_keys",
    "scoped_id",
    "text_keys",
    "PLATFORMS",
]

_BAND_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """P(a pair with this Jaccard similarity shares at least one band)."""
    return float(1.0 - (1.0 - similarity**rows) ** bands)


def _mean_probability(low: float, high: float, bands: int, rows: int, points: int = 512) -> float:
    if high <= low:
        return 0.0
    grid = np.linspace(low, high, points)
    return float(np.mean(1.0 - (1.0 - grid**rows) ** bands))


@dataclass(frozen=True)
class BandPlan:
    """A (bands, rows) split and what it means at a given threshold."""

    bands: int
    rows: int
    threshold: float

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows

    def probability(self, similarity: float) -> float:
        """The chance that two posts of this Jaccard ``similarity`` share a band: 1 - (1 - s^r)^b."""
        return candidate_probability(similarity, self.bands, self.rows)

    @property
    def false_positive_rate(self) -> float:
        """Average P(candidate) over similarities below the threshold."""
        return _mean_probability(0.0, self.threshold, self.bands, self.rows)

    @property
    def false_negative_rate(self) -> float:
        """Average P(missed) over similarities at or above the threshold."""
        return 1.0 - _mean_probability(self.threshold, 1.0, self.bands, self.rows)

    def table(
        self, similarities: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    ) -> list[tuple[float, float]]:
        """(similarity, ``probability``) at each of ``similarities``: the S-curve, as a table."""
        return [(s, self.probability(s)) for s in similarities]


def choose_bands(threshold: float, num_perm: int, max_miss_rate: float = 0.01) -> BandPlan:
    """The split of ``num_perm`` with the fewest bands that misses at most
    ``max_miss_rate`` of the pairs at exactly ``threshold``."""
    splits = [(num_perm // rows, rows) for rows in range(1, num_perm + 1) if num_perm % rows == 0]
    good = [(b, r) for b, r in splits if candidate_probability(threshold, b, r) >= 1 - max_miss_rate]
    if good:
        bands, rows = min(good, key=lambda split: split[0])
    else:
        bands, rows = max(splits, key=lambda split: candidate_probability(threshold, *split))
    return BandPlan(bands, rows, threshold)


def choose_for_rates(
    high_similarity: float,
    max_false_negative: float,
    low_similarity: float,
    max_false_positive: float,
    max_num_perm: int = 256,
) -> BandPlan | None:
    """The cheapest (bands, rows) that misses at most ``max_false_negative`` of
    the pairs at ``high_similarity`` and makes candidates of at most
    ``max_false_positive`` of the pairs at ``low_similarity``.

    Cheapest means fewest permutations (sketching work), then fewest bands
    (look-ups and index entries per post). None when no split up to
    ``max_num_perm`` permutations meets both rates.
    """
    if not 0.0 <= low_similarity < high_similarity <= 1.0:
        raise ValueError("need 0 <= low similarity < high similarity <= 1")
    best: tuple[int, int, int] | None = None
    for rows in range(1, max_num_perm + 1):
        for bands in range(1, max_num_perm // rows + 1):
            if candidate_probability(high_similarity, bands, rows) < 1 - max_false_negative:
                continue
            if candidate_probability(low_similarity, bands, rows) > max_false_positive:
                break  # more bands only raise P(low)
            key = (bands * rows, bands, rows)
            if best is None or key < best:
                best = key
            break  # the fewest bands for this row count is found
    if best is None:
        return None
    _, bands, rows = best
    return BandPlan(bands, rows, high_similarity)


def band_keys(signatures: npt.NDArray[np.uint32], bands: int, rows: int) -> npt.NDArray[np.uint64]:
    """A (posts, bands) matrix of 64-bit band keys.

    The band index is mixed into the key, so equal values in different bands
    give different keys and one key space serves every band.
    """
    posts = signatures.shape[0]
    grouped = signatures[:, : bands * rows].reshape(posts, bands, rows).astype(np.uint64)
    keys = np.broadcast_to(np.arange(1, bands + 1, dtype=np.uint64) * _BAND_MULTIPLIER, (posts, bands)).copy()
    for row in range(rows):
        keys ^= grouped[:, :, row]
        keys *= _BAND_MULTIPLIER
        keys ^= keys >> np.uint64(29)
    keys *= np.uint64(0xBF58476D1CE4E5B9)
    keys ^= keys >> np.uint64(32)
    return keys


# Every platform a post can come from (``Post.platform``). Ids are unique
# within a platform only: Twitter's 123 is not Mastodon's 123.
PLATFORMS = ("twitter", "mastodon", "bluesky", "generic", "text")


def scoped_id(platform: str, post_id: str) -> str:
    """A post id as its id key is computed: within its platform, so a delete
    notice of one platform never names another platform's post."""
    return f"{platform}\x00{post_id}"


def _fmix64(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """MurmurHash3's 64-bit finaliser, element by element."""
    values = values ^ (values >> np.uint64(33))
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values


def exact_keys(
    words: npt.NDArray[np.uint32], offsets: npt.NDArray[np.int64], seed: int, first: int = 0
) -> npt.NDArray[np.uint64]:
    """One more band key per post, from all its words in order (post i has
    ``words[offsets[i]:offsets[i + 1]]``); with ``first``, a start key from
    its first ``first`` words (all of them, if it has fewer), salted apart.

    A post with the very same normalised text as a live one shares this key
    with it, and no other post does, whatever the posts in between: posts
    crafted to share every band key with an original, and so to push it out
    of each band's candidates, cannot push it out of this one's. Its words
    are hashed with the index's seed, so the key cannot be computed offline
    either. A start key finds the original of a copy cut short by "…",
    which keeps its first words and may share no band with it."""
    counts = np.diff(offsets)
    positions = np.arange(len(words), dtype=np.int64) - np.repeat(offsets[:-1], counts)  # each word's, in its post
    if first:
        kept = positions < first
        words, positions, counts = words[kept], positions[kept], np.minimum(counts, first)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    with np.errstate(over="ignore"):
        salt = _fmix64(np.array([(seed + 0x9E3779B97F4A7C15 * (first + 1)) % 2**64], dtype=np.uint64))[0]
        mixed = _fmix64((words.astype(np.uint64) | (positions.astype(np.uint64) << np.uint64(32))) ^ salt)
        sums = np.zeros(len(counts), dtype=np.uint64)
        filled = counts > 0
        if len(words):
            sums[filled] = np.add.reduceat(mixed, offsets[:-1][filled])
        return _fmix64(sums ^ (counts.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ salt)


def _c_text_keys(
    words: npt.NDArray[np.uint32], offsets: npt.NDArray[np.int64], seed: int, firsts: Sequence[int]
) -> npt.NDArray[np.uint64]:
    keys = kernel.text_keys(
        np.ascontiguousarray(words, dtype=np.uint32), np.ascontiguousarray(offsets, dtype=np.int64), seed, tuple(firsts)
    )
    return np.frombuffer(keys, dtype=np.uint64).reshape(len(offsets) - 1, len(firsts))


def _py_text_keys(
    words: npt.NDArray[np.uint32], offsets: npt.NDArray[np.int64], seed: int, firsts: Sequence[int]
) -> npt.NDArray[np.uint64]:
    """A (posts, len(firsts)) matrix: column c is ``exact_keys(words, offsets, seed, firsts[c])``."""
    return np.column_stack([exact_keys(words, offsets, seed, first) for first in firsts])


text_keys = chosen(_c_text_keys, _py_text_keys)


def _c_id_keys(post_ids: Sequence[str], seed: int) -> npt.NDArray[np.uint64]:
    return np.frombuffer(kernel.id_keys(list(post_ids), seed), dtype=np.uint64)


def _py_id_keys(post_ids: Sequence[str], seed: int) -> npt.NDArray[np.uint64]:
    """One extra band key per post, from its id alone (``scoped_id``).

    Every indexed post is also filed under it, so a repost that carries no
    text can find the post it reposts (``Sketch.refers_to``). A collision
    with a band key only proposes a candidate, which verification then
    weighs like any other.
    """
    return np.array(
        [mmh3.hash64("\x01post-id:" + post_id, seed, signed=False)[0] for post_id in post_ids], dtype=np.uint64
    )


id_keys = chosen(_c_id_keys, _py_id_keys)
