from __future__ import annotations

import numpy as np

from streamfilter._minhash import MinHasher
from streamfilter._shingle import ShingleSets, shingle_batch


def test_signature_agreement_estimates_jaccard() -> None:
    rng = np.random.default_rng(3)
    base = [f"w{i}" for i in range(200)]
    other = base[:150] + [f"x{i}" for i in range(50)]  # unigram Jaccard 150/250 = 0.6
    shingles = shingle_batch([base, other], 1, 1)
    signatures = MinHasher(1024, int(rng.integers(1000))).signatures(shingles)
    estimate = float((signatures[0] == signatures[1]).mean())
    assert abs(estimate - 0.6) < 0.05


def test_identical_sets_have_identical_signatures_and_different_sets_differ() -> None:
    shingles = shingle_batch([["a", "b", "c"], ["a", "b", "c"], ["x", "y", "z"]], 2, 1)
    signatures = MinHasher(64, 1).signatures(shingles)
    assert np.array_equal(signatures[0], signatures[1])
    assert not np.array_equal(signatures[0], signatures[2])


def test_batch_signatures_equal_single_ones_and_empty_posts_are_marked() -> None:
    posts = [["a", "b"], [], ["c", "d", "e"], []]
    hasher = MinHasher(32, 9)
    together = hasher.signatures(shingle_batch(posts, 2, 1))
    for index, post in enumerate(posts):
        alone = hasher.signatures(shingle_batch([post], 2, 1))[0]
        assert np.array_equal(together[index], alone)
    assert (together[1] == 0xFFFFFFFF).all()


def test_no_shingles_at_all() -> None:
    empty = ShingleSets(
        np.zeros(0, dtype=np.uint64),
        np.zeros(3, dtype=np.int64),
        np.zeros(0, dtype=np.uint32),
        np.zeros(3, dtype=np.int64),
    )
    assert MinHasher(8, 1).signatures(empty).shape == (2, 8)
