"""Word hashes, their k-shingles for MinHash, and the sets verification compares.

Each word is hashed once with mmh3 (32 bits, ``words``), its l's read as
i's (``hashed_form``): case folding makes the capital I that passes for an l
an i (``PayPaI``, ``pIease``), and leetspeak's 1 reads as either, so to the
filter the two letters are one. An rn is read as the m it passes for in
Unicode's confusables data (``arnazon``), and a letter drawn out as that
letter once (``freeeee``, ``goood``, and so ``good`` and ``god`` are one
word to the filter; a number keeps its digits). A k-shingle's
64-bit hash combines the hashes of its k words with position-dependent odd
multipliers and a 64-bit finaliser, all in numpy over a whole batch; MinHash
and the band keys are computed from those. A post with fewer than k words
gets one shingle made of all its words, so short posts can still match.

Verification compares another set: every run of 1 to k words
(``verification_set``; for the default k = 2, the words and the word
pairs). Tweets are short: two word edits of an eight-word tweet leave it
sharing about a third of its word pairs, below any useful threshold, while
its words alone cannot tell word order or a reworded template apart. Words
and pairs together measured best (docs/design/tuning.md).
Both sets come from the same word hashes, so a store keeps only a post's
word hashes, in order, and rebuilds what it needs: the verification set,
and the shingles again to re-derive band keys (``shingles_of_words``).

Shingle sets come out as CSR arrays: ``hashes[offsets[i]:offsets[i+1]]`` is
the sorted, de-duplicated uint64 set of post ``i``, and
``words[word_offsets[i]:word_offsets[i+1]]`` its word hashes in order. A
post with no words has empty sets; what that means is decided by the filter
(see ``_engine``). Two distinct words share a 32-bit hash with odds of
2**-32; posts that differ only in such a pair of words look alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import mmh3
import numpy as np
import numpy.typing as npt

__all__ = [
    "ShingleSets",
    "WordHasher",
    "hash_words",
    "hashed_form",
    "minhash_shingles",
    "shingle_batch",
    "shingle_words",
    "shingles_of_words",
    "verification_hashes",
    "verification_set",
]

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
_MULTIPLIERS = [int(multiplier) for multiplier in _POSITION_MULTIPLIERS]


def _finalize(values: U64) -> U64:
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xFF51AFD7ED558CCD)
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xC4CEB9FE1A85EC53)
    return values ^ (values >> np.uint64(33))


class ShingleSets:
    """Shingle-hash sets of a batch of posts, in CSR form."""

    __slots__ = ("hashes", "offsets", "word_offsets", "words")

    def __init__(
        self,
        hashes: U64,
        offsets: npt.NDArray[np.int64],
        words: npt.NDArray[np.uint32],
        word_offsets: npt.NDArray[np.int64],
    ) -> None:
        self.hashes = hashes
        self.offsets = offsets
        self.words = words
        self.word_offsets = word_offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> U64:
        return self.hashes[self.offsets[index] : self.offsets[index + 1]]

    def sizes(self) -> npt.NDArray[np.int64]:
        return np.diff(self.offsets)

    def words_of(self, index: int) -> npt.NDArray[np.uint32]:
        """Post ``index``'s word hashes, in order."""
        return self.words[self.word_offsets[index] : self.word_offsets[index + 1]]


def shingle_batch(word_lists: Sequence[Sequence[str]], shingle_size: int, seed: int) -> ShingleSets:
    """Hash the words and the word k-shingles of every post in one numpy pass."""
    words, word_offsets = hash_words(word_lists, seed)
    return shingles_of_words(words, word_offsets, shingle_size)


_HASHED_FORM = str.maketrans("l", "i")
_DRAWN_OUT = re.compile(r"(\D)\1+")  # a run of one character, digits aside: a number keeps its digits


def hashed_form(text: str) -> str:
    """``text`` as its words are hashed: each l an i, each rn the m it
    passes for (Unicode's confusables data gives rn as the look of an m:
    ``arnazon``), and a character drawn out once (``freeeee``, ``sooo``)."""
    # drawn-out letters first, so that "morrrrning" holds the rn of "morning"
    return _DRAWN_OUT.sub(r"\1", _DRAWN_OUT.sub(r"\1", text.translate(_HASHED_FORM)).replace("rn", "m"))


def hash_words(word_lists: Sequence[Sequence[str]], seed: int) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Every post's word hashes, in order, as CSR arrays (hashes, offsets)."""
    return WordHasher(seed)(word_lists)


class WordHasher:
    """``hash_words`` for one seed, remembering the hashes of the words it saw.

    Most words of a stream recur (on the labelled stream, 12,848 distinct
    words make 432,000), and looking one up costs half of hashing it. It
    forgets them all once it holds ``capacity`` words (about 100 bytes
    each), and a pickled one (sent to a worker process) starts empty.
    """

    def __init__(self, seed: int, capacity: int = 1 << 16) -> None:
        self.seed = seed
        self.capacity = capacity
        self._known: dict[str, int] = {}

    def __getstate__(self) -> tuple[int, int]:
        return self.seed, self.capacity

    def __setstate__(self, state: tuple[int, int]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def __call__(self, word_lists: Sequence[Sequence[str]]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        known = self._known
        if len(known) > self.capacity:
            known.clear()
        hash32, seed = mmh3.hash, self.seed
        hashes: list[int] = []
        for words in word_lists:
            for word in words:
                value = known.get(word)
                if value is None:
                    value = known[word] = hash32(hashed_form(word), seed, False)  # unsigned
                hashes.append(value)
        word_offsets = np.zeros(len(word_lists) + 1, dtype=np.int64)
        np.cumsum([len(words) for words in word_lists], out=word_offsets[1:])
        return np.array(hashes, dtype=np.uint32), word_offsets


def shingles_of_words(
    words: npt.NDArray[np.uint32], word_offsets: npt.NDArray[np.int64], shingle_size: int
) -> ShingleSets:
    """The k-shingle sets (for MinHash) of posts given by their word hashes.

    A post with fewer than k words still gets one shingle, of all its words.
    """
    return _runs(words, word_offsets, [(shingle_size, _shingle_counts(word_offsets, shingle_size))], _shingle_hashes)


def minhash_shingles(
    words: npt.NDArray[np.uint32], word_offsets: npt.NDArray[np.int64], shingle_size: int
) -> ShingleSets:
    """``shingles_of_words`` as MinHash takes them: each post's k-shingle
    hashes in the order they occur, repeats kept. A minimum depends on
    neither, and skipping the sort saves most of a batch's shingling time."""
    run_counts = _shingle_counts(word_offsets, shingle_size)
    offsets = np.zeros(len(run_counts) + 1, dtype=np.int64)
    np.cumsum(run_counts, out=offsets[1:])
    hashes, _ = _unsorted_runs(words, word_offsets, [(shingle_size, run_counts)], _shingle_hashes)
    return ShingleSets(hashes, offsets, words, word_offsets)


def _shingle_counts(word_offsets: npt.NDArray[np.int64], shingle_size: int) -> npt.NDArray[np.int64]:
    """k-shingles per post: one per start of k words, and one for a shorter post that has words."""
    counts = np.diff(word_offsets)
    return np.where(counts == 0, 0, np.maximum(counts - shingle_size + 1, 1))


def verification_hashes(
    words: npt.NDArray[np.uint32], word_offsets: npt.NDArray[np.int64], shingle_size: int
) -> ShingleSets:
    """Every run of 1 to k words of each post, as the 64-bit values that
    ``verification_set`` makes of them: the set verification compares."""
    counts = np.diff(word_offsets)
    sizes = [(size, np.maximum(counts - size + 1, 0)) for size in range(1, shingle_size + 1)]
    return _runs(words, word_offsets, sizes, _run_values)


def _shingle_hashes(padded: U64, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], size: int) -> U64:
    combined = np.zeros(len(starts), dtype=np.uint64)
    for position in range(size):
        index = starts + position
        contribution = padded[index] * _POSITION_MULTIPLIERS[position]
        combined += np.where(index < ends, contribution, np.uint64(0))
    return _finalize(combined)


def _run_values(padded: U64, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], size: int) -> U64:
    # runs are whole here: verification_hashes only starts them where they fit
    if size == 1:
        return padded[starts]
    if size == 2:
        return (padded[starts] << np.uint64(32)) | padded[starts + 1]
    combined = np.full(len(starts), size, dtype=np.uint64)
    for position in range(size):
        combined += padded[starts + position] * _POSITION_MULTIPLIERS[position]
    return combined


def _unsorted_runs(
    words: npt.NDArray[np.uint32],
    word_offsets: npt.NDArray[np.int64],
    sizes: Sequence[tuple[int, npt.NDArray[np.int64]]],
    value: Callable[[U64, npt.NDArray[np.int64], npt.NDArray[np.int64], int], U64],
) -> tuple[U64, npt.NDArray[np.int64]]:
    """(``value``s of runs of words, the post of each): for each (size, runs
    per post), that many runs of up to ``size`` words (cut at the post's
    end), from each post's first word on; within a size, in post order."""
    posts = len(word_offsets) - 1
    word_starts, word_ends = word_offsets[:-1], word_offsets[1:]
    longest = max(size for size, _ in sizes)
    padded = np.concatenate([words.astype(np.uint64), np.zeros(longest, dtype=np.uint64)])
    parts: list[U64] = []
    owners: list[npt.NDArray[np.int64]] = []
    for size, run_counts in sizes:
        owner = np.repeat(np.arange(posts), run_counts)
        first = np.cumsum(run_counts) - run_counts
        starts = word_starts[owner] + (np.arange(int(run_counts.sum())) - first[owner])
        parts.append(value(padded, starts, word_ends[owner], size))
        owners.append(owner)
    return np.concatenate(parts), np.concatenate(owners)


def _runs(
    words: npt.NDArray[np.uint32],
    word_offsets: npt.NDArray[np.int64],
    sizes: Sequence[tuple[int, npt.NDArray[np.int64]]],
    value: Callable[[U64, npt.NDArray[np.int64], npt.NDArray[np.int64], int], U64],
) -> ShingleSets:
    """``_unsorted_runs`` as sorted, de-duplicated sets, one per post."""
    posts = len(word_offsets) - 1
    hashes, owner = _unsorted_runs(words, word_offsets, sizes, value)

    # Sort each post's hashes and drop repeats, for all posts at once: by
    # hash, then stably by post, which sorts the small post numbers by radix
    # (faster than lexsort).
    order = np.argsort(hashes)
    order = order[np.argsort(owner[order].astype(np.uint16 if posts <= 1 << 16 else np.int64), kind="stable")]
    hashes, owner = hashes[order], owner[order]
    keep = np.ones(len(hashes), dtype=bool)
    keep[1:] = (hashes[1:] != hashes[:-1]) | (owner[1:] != owner[:-1])
    hashes, owner = hashes[keep], owner[keep]
    offsets = np.zeros(posts + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=posts), out=offsets[1:])
    return ShingleSets(hashes, offsets, words, word_offsets)


def shingle_words(words: Sequence[str], shingle_size: int, seed: int) -> U64:
    """The sorted shingle-hash set of one post."""
    return shingle_batch([words], shingle_size, seed)[0]


def verification_set(words: Sequence[int], shingle_size: int) -> set[int]:
    """Every run of 1 to ``shingle_size`` words of a post, from its word hashes
    in order: the same values as ``verification_hashes``. A word is its hash;
    a pair, the two hashes side by side in 64 bits (it equals a word only when
    its first word hashes to 0); a longer run, a sum of the hashes times odd
    multipliers, plus its length, modulo 2**64."""
    values = set(words)
    if shingle_size >= 2:
        values.update([first << 32 | second for first, second in zip(words, words[1:], strict=False)])
    multipliers = _MULTIPLIERS
    for size in range(3, shingle_size + 1):
        for start in range(len(words) - size + 1):
            total = size
            for position in range(size):
                total += words[start + position] * multipliers[position]
            values.add(total & 0xFFFFFFFFFFFFFFFF)
    return values
