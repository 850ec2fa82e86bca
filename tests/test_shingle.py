from __future__ import annotations

import pickle
import re

import mmh3
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamfilter._minhash import MinHasher
from streamfilter._shingle import (
    WordHasher,
    hash_words,
    minhash_shingles,
    shingle_batch,
    shingle_words,
    verification_hashes,
    verification_set,
)

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


@given(st.lists(words, max_size=8), st.integers(1, 4))
def test_stores_rebuild_from_words_the_set_that_was_sketched(batch: list[list[str]], k: int) -> None:
    # A store keeps a post's word hashes and rebuilds its verification set
    # from them; the query's set comes from the batch's numpy pass. Any
    # difference between the two would make a copy miss its original.
    hashes, offsets = hash_words(batch, 7)
    sketched = verification_hashes(hashes, offsets, k)
    for index in range(len(batch)):
        rebuilt = verification_set(hashes[offsets[index] : offsets[index + 1]].tolist(), k)
        assert set(sketched[index].tolist()) == rebuilt


def test_verification_set_holds_words_and_runs_up_to_k() -> None:
    post = [11, 22, 33]
    assert verification_set(post, 1) == {11, 22, 33}
    assert verification_set(post, 2) == {11, 22, 33, 11 << 32 | 22, 22 << 32 | 33}
    assert len(verification_set(post, 3)) == 6 and len(verification_set(post, 4)) == 6


def test_remembered_word_hashes_are_the_hashes_and_stay_bounded() -> None:
    hasher = WordHasher(7, capacity=4)
    for turn in range(5):  # new words each batch: a hasher that never forgot would hold 17
        batch = [[f"w{turn}-{i}" for i in range(3)], [], ["the", "flight"]]
        hashes, offsets = hasher(batch)
        # "flight" hashed as "fight": its l an i, and the i drawn out once
        read = [re.sub(r"(\D)\1+", r"\1", word.replace("l", "i")) for words in batch for word in words]
        assert read[-1] == "fight"
        assert hashes.tolist() == [mmh3.hash(word, 7, signed=False) for word in read]
        assert offsets.tolist() == [0, 3, 3, 5]
        assert len(hasher._known) <= 4 + 5  # forgotten once past its capacity: at most a batch more
    sent = pickle.loads(pickle.dumps(hasher))  # to a worker process: settings, not memory
    assert (sent.seed, sent.capacity, sent._known) == (7, 4, {})
    assert sent(batch)[0].tolist() == hashes.tolist()


@given(st.lists(words, max_size=8), st.integers(1, 4))
def test_minhash_reads_the_unsorted_shingles_as_it_reads_the_sets(batch: list[list[str]], k: int) -> None:
    # Sketching skips sorting a post's shingles and dropping repeats: the
    # signatures, and so the band keys, are those of the sets all the same.
    hashes, offsets = hash_words(batch, 3)
    minhasher = MinHasher(16, 3)
    as_sets = minhasher.signatures(shingle_batch(batch, k, 3))
    unsorted = minhash_shingles(hashes, offsets, k)
    assert np.array_equal(minhasher.signatures(unsorted), as_sets)
    for index, post in enumerate(batch):
        assert set(unsorted[index].tolist()) == set(shingle_words(post, k, 3).tolist())
