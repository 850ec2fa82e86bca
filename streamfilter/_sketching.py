"""A batch's word hashes, verification sets and band keys: compiled, or in numpy.

``_kernel`` (``_kernel.c``, built by ``pip install``) runs the per-post loops
in C; the numpy path (``_shingle``, ``_minhash``, ``_lsh``) is the reference
it must equal value for value (tests/test_kernel.py), and what runs where the
extension could not be built.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ._compiled import chosen, kernel
from ._lsh import _py_id_keys, _py_text_keys, band_keys
from ._minhash import MinHasher
from ._shingle import ShingleSets, WordHasher, minhash_shingles, verification_hashes

__all__ = ["BatchSketcher"]


class _PyBatchSketcher:
    """Sketches batches for one set of settings, in numpy."""

    def __init__(self, num_perm: int, seed: int, shingle_size: int, bands: int, rows: int):
        self._settings = (num_perm, seed, shingle_size, bands, rows)
        self.seed = seed
        self.shingle_size = shingle_size
        self.bands = bands
        self.rows = rows
        self._minhasher = MinHasher(num_perm, seed)
        self._hash_words = WordHasher(seed)

    # A sketch worker process gets its sketcher pickled: the settings travel,
    # and the word cache and the permutations' bytes are set up again there.
    def __getstate__(self) -> tuple[int, int, int, int, int]:
        return self._settings

    def __setstate__(self, state: tuple[int, int, int, int, int]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def words(self, word_lists: Sequence[Sequence[str]]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """Every post's word hashes in order, as CSR arrays (hashes, offsets)."""
        return self._hash_words(word_lists)

    def sketch(
        self, words: npt.NDArray[np.uint32], word_offsets: npt.NDArray[np.int64]
    ) -> tuple[ShingleSets, npt.NDArray[np.uint64]]:
        """(the verification sets, with the word hashes; a (posts, bands) matrix of band keys)."""
        signatures = self._minhasher.signatures(minhash_shingles(words, word_offsets, self.shingle_size))
        verified = verification_hashes(words, word_offsets, self.shingle_size)
        return verified, band_keys(signatures, self.bands, self.rows)

    def sketch_posts(
        self, word_lists: Sequence[Sequence[str]], post_ids: list[str], firsts: tuple[int, ...]
    ) -> tuple[ShingleSets, npt.NDArray[np.uint64]]:
        """``sketch`` of the posts' words, and every key each post is filed
        under: a (posts, bands + len(firsts) + 1) matrix, its band keys, its
        text keys (``_lsh.text_keys`` for ``firsts``) and its id key
        (``_lsh.id_keys`` of ``post_ids``, scoped)."""
        words, offsets = self.words(word_lists)
        verified, keys = self.sketch(words, offsets)
        starts = _py_text_keys(words, offsets, self.seed, firsts)
        return verified, np.concatenate([keys, starts, _py_id_keys(post_ids, self.seed)[:, None]], axis=1)


class _CBatchSketcher(_PyBatchSketcher):
    """``_PyBatchSketcher``'s loops over each post, in C (``_kernel.c``)."""

    def __init__(self, num_perm: int, seed: int, shingle_size: int, bands: int, rows: int):
        super().__init__(num_perm, seed, shingle_size, bands, rows)
        self._multipliers = self._minhasher.multipliers.tobytes()
        self._increments = self._minhasher.increments.tobytes()

    def words(self, word_lists: Sequence[Sequence[str]]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        words, offsets = kernel.hash_words(word_lists, self.seed)
        return np.frombuffer(words, dtype=np.uint32), np.frombuffer(offsets, dtype=np.int64)

    def sketch(
        self, words: npt.NDArray[np.uint32], word_offsets: npt.NDArray[np.int64]
    ) -> tuple[ShingleSets, npt.NDArray[np.uint64]]:
        words = np.ascontiguousarray(words, dtype=np.uint32)
        word_offsets = np.ascontiguousarray(word_offsets, dtype=np.int64)
        hashes, offsets, keys = kernel.sketch(
            words, word_offsets, self.shingle_size, self._multipliers, self._increments, self.bands, self.rows
        )
        verified = ShingleSets(
            np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(offsets, dtype=np.int64), words, word_offsets
        )
        return verified, np.frombuffer(keys, dtype=np.uint64).reshape(len(word_offsets) - 1, self.bands)

    def sketch_posts(
        self, word_lists: Sequence[Sequence[str]], post_ids: list[str], firsts: tuple[int, ...]
    ) -> tuple[ShingleSets, npt.NDArray[np.uint64]]:
        settings = (self.shingle_size, self._multipliers, self._increments, self.bands, self.rows)
        words, offsets, hashes, ends, keys = kernel.sketch_posts(word_lists, self.seed, *settings, firsts, post_ids)
        words, offsets = np.frombuffer(words, dtype=np.uint32), np.frombuffer(offsets, dtype=np.int64)
        hashes, ends = np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(ends, dtype=np.int64)
        width = self.bands + len(firsts) + 1
        return ShingleSets(hashes, ends, words, offsets), np.frombuffer(keys, dtype=np.uint64).reshape(-1, width)


BatchSketcher = chosen(_CBatchSketcher, _PyBatchSketcher)
