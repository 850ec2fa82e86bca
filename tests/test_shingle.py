from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamfilter._shingle import shingle_batch, shingle_words

words = st.lists(st.text(alphabet="abcdef", min_size=1, max_size=4), max_size=12)


def test_post_shorter_than_k_still_gets_one_shingle() -> None:
    assert len(shingle_words(["hello"], 3, 1)) == 1
    assert len(shingle_words(["hello", "world"], 3, 1)) == 1


def test_empty_post_has_no_shingles() -> None:
    assert len(shingle_words([], 2, 1)) == 0


def test_word_order_matters_for_k_above_one() -> None:
    assert set(shingle_words(["a", "b", "c"], 2, 1)) != set(shingle_words(["c", "b", "a"], 2, 1))
    assert set(shingle_words(["a", "b", "c"], 1, 1)) == set(shingle_words(["c", "b", "a"], 1, 1))


def test_repeated_shingles_count_once_and_are_sorted() -> None:
    hashes = shingle_words("a b a b a b".split(), 2, 1)
    assert len(hashes) == 2  # "a b" and "b a"
    assert list(hashes) == sorted(hashes)


def test_seed_changes_hashes() -> None:
    assert set(shingle_words(["a", "b"], 2, 1)) != set(shingle_words(["a", "b"], 2, 2))


@given(st.lists(words, max_size=8), st.integers(1, 4))
def test_batch_equals_one_at_a_time(batch: list[list[str]], k: int) -> None:
    together = shingle_batch(batch, k, 7)
    for index, post in enumerate(batch):
        assert np.array_equal(together[index], shingle_words(post, k, 7))
