"""MinHash signatures of shingle-hash sets, a whole batch in one numpy call.

The 64-bit shingle hash is folded to 32 bits x (high half XOR low half), and
permutation i maps x to ``((a_i * x + b_i) mod 2**64) >> 32``
with random 64-bit a_i (odd) and b_i: Dietzfelbinger's multiply-add-shift
scheme, which is strongly universal for 32-bit keys and costs one multiply
and one add per value in numpy. The signature is the minimum per permutation.
"""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

from ._shingle import ShingleSets

__all__ = ["MinHasher"]

_HIGH_HALF = 1 if sys.byteorder == "little" else 0


class MinHasher:
    """``num_perm`` hash permutations drawn from ``seed``."""

    def __init__(self, num_perm: int, seed: int) -> None:
        generator = np.random.Generator(np.random.PCG64(seed))
        high = np.iinfo(np.uint64).max
        self.num_perm = num_perm
        self.multipliers = generator.integers(0, high, size=num_perm, dtype=np.uint64, endpoint=True) | np.uint64(1)
        self.increments = generator.integers(0, high, size=num_perm, dtype=np.uint64, endpoint=True)

    def signatures(self, shingles: ShingleSets) -> npt.NDArray[np.uint32]:
        """A (posts, num_perm) uint32 matrix; rows of posts with no shingles are all 0xFFFFFFFF."""
        posts = len(shingles)
        result = np.full((posts, self.num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
        sizes = shingles.sizes()
        nonempty = np.flatnonzero(sizes)
        if len(nonempty) == 0:
            return result
        folded = (shingles.hashes ^ (shingles.hashes >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
        values = np.multiply(folded[:, None], self.multipliers[None, :])
        values += self.increments
        # ``>> 32`` is the high half of each value: read it in place as uint32
        # instead of shifting and casting a copy
        permuted = values.view(np.uint32)[:, _HIGH_HALF::2]
        result[nonempty] = np.minimum.reduceat(permuted, shingles.offsets[nonempty], axis=0)
        return result
