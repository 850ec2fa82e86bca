"""Word k-shingles, hashed to 64 bits.

Each word is hashed once with mmh3 (64-bit); a shingle's hash combines the hashes of
its k words with position-dependent odd multipliers and a 64-bit finaliser,
all in numpy over a whole batch. A post with fewer than k words gets one
shingle made of all its words, so short posts can still match.

Shingle sets come out as CSR arrays: ``hashes[offsets[i]:offsets[i+1]]`` is
the sorted, de-duplicated uint64 set of post ``i``. 64 bits, because the
stored sets are what verification compares: with 32-bit hashes a stream of
a few hundred thousand templated posts ("post number N") already has
colliding shingles that make distinct short posts look identical. A post with no words has
an empty set; what that means is decided by the filter (see ``_engine``).
"""

from __future__ import annotations

from collections.abc import Sequence

import mmh3
import numpy as np
import numpy.typing as npt

__all__ = ["ShingleSets", "shingle_batch", "shingle_words"]

U64 = npt.NDArray[np.uint64]

_POSITION_MULTIPLIERS = np.array(
    [
        0x9E3779B97F4A7C15,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0xD6E8FEB86659FD93,
        0xFF51AFD7ED558CCD,
        0xC4CEB9FE1A85EC53,
        0x94D049BB133111EB,
        0xBF58476D1CE4E5B9,
    ],
    dtype=np.uint64,
)
MAX_SHINGLE_SIZE = len(_POSITION_MULTIPLIERS)


def _finalize(values: U64) -> U64:
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xFF51AFD7ED558CCD)
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xC4CEB9FE1A85EC53)
    return values ^ (values >> np.uint64(33))


class ShingleSets:
    """Shingle-hash sets of a batch of posts, in CSR form."""

    __slots__ = ("hashes", "offsets")

    def __init__(self, hashes: U64, offsets: npt.NDArray[np.int64]) -> None:
        self.hashes = hashes
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> U64:
        return self.hashes[self.offsets[index] : self.offsets[index + 1]]

    def sizes(self) -> npt.NDArray[np.int64]:
        return np.diff(self.offsets)


def shingle_batch(word_lists: Sequence[Sequence[str]], shingle_size: int, seed: int) -> ShingleSets:
    """Hash the word k-shingles of every post in one numpy pass."""
    counts = np.fromiter((len(words) for words in word_lists), dtype=np.int64, count=len(word_lists))
    total_words = int(counts.sum())
    hash64 = mmh3.hash64
    word_hashes = np.fromiter(
        (hash64(word, seed, signed=False)[0] for words in word_lists for word in words),
        dtype=np.uint64,
        count=total_words,
    )
    word_ends = np.cumsum(counts)
    word_starts = word_ends - counts
    # Shingles start at every word up to the k-th last one, and a short post
    # (fewer than k words) still starts one shingle at its first word.
    shingle_counts = np.where(counts == 0, 0, np.maximum(counts - shingle_size + 1, 1))
    owner = np.repeat(np.arange(len(word_lists)), shingle_counts)
    first = np.cumsum(shingle_counts) - shingle_counts
    starts = word_starts[owner] + (np.arange(int(shingle_counts.sum())) - first[owner])
    ends = word_ends[owner]

    padded = np.concatenate([word_hashes, np.zeros(shingle_size, dtype=np.uint64)])
    combined = np.zeros(len(starts), dtype=np.uint64)
    for position in range(shingle_size):
        index = starts + position
        contribution = padded[index] * _POSITION_MULTIPLIERS[position]
        combined += np.where(index < ends, contribution, np.uint64(0))
    hashes = _finalize(combined)

    # Sort each post's hashes and drop repeats, for all posts at once.
    order = np.lexsort((hashes, owner))
    hashes, owner = hashes[order], owner[order]
    keep = np.ones(len(hashes), dtype=bool)
    keep[1:] = (hashes[1:] != hashes[:-1]) | (owner[1:] != owner[:-1])
    hashes, owner = hashes[keep], owner[keep]
    offsets = np.zeros(len(word_lists) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=len(word_lists)), out=offsets[1:])
    return ShingleSets(hashes, offsets)


def shingle_words(words: Sequence[str], shingle_size: int, seed: int) -> U64:
    """The sorted shingle-hash set of one post."""
    return shingle_batch([words], shingle_size, seed)[0]
