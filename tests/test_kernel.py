"""The compiled kernel computes what the mmh3 and numpy reference computes, value for value."""

from __future__ import annotations

import gc
import pickle
import re
from typing import Any

import mmh3
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamfilter import _judge, _lsh, _rules, _values
from streamfilter._compiled import compiled_kernel
from streamfilter._confusables import _c_holds_lookalike, _lookalike_bits, _lookalikes, _py_holds_lookalike
from streamfilter._json import _JSON_STRING, MAX_DEPTH, depth_ok
from streamfilter._normalize import _MENTION, _NON_ASCII_RUN, _ascii_words
from streamfilter._prepared import NO_SHINGLES, NO_WORDS
from streamfilter._rules import OLDEST_PER_KEY, CachedPost, jaccard, word_edits
from streamfilter._shingle import verification_set
from streamfilter._sketching import _CBatchSketcher, _PyBatchSketcher
from streamfilter._values import Sketches
from streamfilter.stores import Sketch
from streamfilter.stores._base import _PyRecentPosts
from streamfilter.stores._records import decode_record, encode_record

from .adapters.test_generic_text import deepest_by_characters
from .conftest import python_rules

# letters of many scripts, and the characters a normaliser leaves in words
_ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "日本語の文章を書くカタカナひらがな中文汉字繁體字",
    "ภาษาไทยการเขียน",
    "العربيةكتابة",
    "한국어글쓰기",
    "हिन्दीलेखन",
    "русскийязык",
    "ção à é ñ ü ß",
    "😀🎉👍🏽❤️\u200d\U0001f9d1",
    "lmrnooçç中é11٣٣оо",  # what the word hash reads otherwise, among characters of more than a byte
]
# and any characters at all: the kernel encodes each of the three widths CPython stores text in
_WORD = st.one_of(
    *[st.text(alphabet, min_size=1, max_size=12) for alphabet in _ALPHABETS], st.text(min_size=1, max_size=12)
)
_POSTS = st.lists(st.lists(_WORD, max_size=40), min_size=1, max_size=30)


def test_the_kernel_is_built(kernel) -> None:  # type: ignore[no-untyped-def]
    # pip install builds it wherever gcc and the Python headers are; if this
    # fails, the install fell back to the numpy path (see setup.py); under
    # STREAMFILTER_PURE=1 it is chosen away, and this is skipped
    assert kernel is compiled_kernel() and kernel is not None


@settings(max_examples=200, deadline=None)
@given(posts=_POSTS, seed=st.integers(0, 2**32 - 1))
def test_word_hashes_are_mmh3s_of_words_as_the_filter_reads_them(kernel, posts: list[list[str]], seed: int) -> None:  # type: ignore[no-untyped-def]
    # l as i and a run of one character that is no decimal digit as one, then rn as m and runs again
    def read(word: str) -> str:
        return re.sub(r"(\D)\1+", r"\1", re.sub(r"(\D)\1+", r"\1", word.replace("l", "i")).replace("rn", "m"))

    words, offsets = kernel.hash_words(posts, seed)
    expected = [mmh3.hash(read(word), seed, signed=False) for post in posts for word in post]
    assert np.frombuffer(words, dtype=np.uint32).tolist() == expected
    assert np.frombuffer(offsets, dtype=np.int64).tolist() == np.cumsum([0] + [len(p) for p in posts]).tolist()


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.text(max_size=40) | _WORD, max_size=30), seed=st.integers(0, 2**32 - 1))
@example(ids=["", "1" * 7, "1" * 8, "1" * 15, "1" * 16, "1" * 17, "é" * 9], seed=0)
def test_id_keys_are_mmh3s(kernel, ids: list[str], seed: int) -> None:  # type: ignore[no-untyped-def]
    # no lone surrogates: mmh3 crashes on one (Engine.forget keeps them from id_keys)
    ids = [post_id for post_id in ids if not any("\ud800" <= c <= "\udfff" for c in post_id)]
    expected = [mmh3.hash64("\x01post-id:" + post_id, seed, signed=False)[0] for post_id in ids]
    assert np.frombuffer(kernel.id_keys(ids, seed), dtype=np.uint64).tolist() == expected
    assert _lsh.id_keys(ids, seed).tolist() == expected
    assert _lsh._py_id_keys(ids, seed).tolist() == expected


def test_id_keys_refuse_what_has_no_key(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="seed"):
        kernel.id_keys(["1"], 2**32)
    with pytest.raises(TypeError, match="int"):
        kernel.id_keys([1], 1)
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate has no UTF-8 (where mmh3 crashes)
        kernel.id_keys(["\ud800"], 1)


@settings(max_examples=200, deadline=None)
@given(
    posts=_POSTS,
    seed=st.integers(0, 2**32 - 1),
    shingle_size=st.integers(1, 8),
    split=st.sampled_from([(16, 2), (8, 4), (32, 1), (5, 6), (1, 7)]),
    spare=st.integers(0, 3),
)
def test_sketches_equal_the_numpy_reference(  # type: ignore[no-untyped-def]
    kernel, posts: list[list[str]], seed: int, shingle_size: int, split: tuple[int, int], spare: int
) -> None:
    bands, rows = split
    num_perm = bands * rows + spare  # a split may leave permutations unused
    compiled = _CBatchSketcher(num_perm, seed, shingle_size, bands, rows)
    reference = _PyBatchSketcher(num_perm, seed, shingle_size, bands, rows)
    words, offsets = compiled.words(posts)
    reference_words, reference_offsets = reference.words(posts)
    assert words.tolist() == reference_words.tolist() and offsets.tolist() == reference_offsets.tolist()
    verified, keys = compiled.sketch(words, offsets)
    reference_verified, reference_keys = reference.sketch(reference_words, reference_offsets)
    assert verified.offsets.tolist() == reference_verified.offsets.tolist()
    assert verified.hashes.tolist() == reference_verified.hashes.tolist()
    assert keys.shape == reference_keys.shape == (len(posts), bands)
    assert keys.tolist() == reference_keys.tolist()


@settings(max_examples=200, deadline=None)
@given(
    posts=_POSTS,
    seed=st.integers(0, 2**32 - 1),
    shingle_size=st.integers(1, 4),
    firsts=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    data=st.data(),
)
def test_a_batchs_every_key_equals_the_numpy_reference(  # type: ignore[no-untyped-def]
    kernel, posts: list[list[str]], seed: int, shingle_size: int, firsts: list[int], data: st.DataObject
) -> None:
    # the one call the sync API makes a record: words, sketch, text keys and id keys
    ids = data.draw(st.lists(_WORD, min_size=len(posts), max_size=len(posts)))
    compiled = _CBatchSketcher(32, seed, shingle_size, 8, 4)
    reference = _PyBatchSketcher(32, seed, shingle_size, 8, 4)
    verified, keys = compiled.sketch_posts(posts, ids, tuple(firsts))
    expected_verified, expected_keys = reference.sketch_posts(posts, ids, tuple(firsts))
    for name in ("hashes", "offsets", "words", "word_offsets"):
        assert getattr(verified, name).tolist() == getattr(expected_verified, name).tolist()
    assert keys.shape == expected_keys.shape == (len(posts), 8 + len(firsts) + 1)
    assert keys.tolist() == expected_keys.tolist()
    assert keys[:, -1].tolist() == [mmh3.hash64("\x01post-id:" + post_id, seed, signed=False)[0] for post_id in ids]
    with pytest.raises(ValueError, match="one post id a post"):
        compiled.sketch_posts(posts, [*ids, "extra"], tuple(firsts))


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**64 - 1]), max_size=300))
def test_distinct_keys_equal_numpys(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.uint64)
    expected, expected_inverse = np.unique(array, return_inverse=True)
    for distinct in (_judge._distinct, _judge._py_distinct):
        found, inverse = distinct(array)
        assert found.tolist() == expected.tolist() and inverse.tolist() == expected_inverse.tolist()


@pytest.mark.parametrize("bits", [64, 40, 9])
def test_a_batchs_many_keys_are_told_apart_as_numpy_tells_them(bits: int) -> None:
    # a campaign's batch: tens of thousands of keys, most of them shared; a
    # store's keys keep 40 bits, and keys that differ in one byte only
    rng = np.random.default_rng(bits)
    shared = rng.integers(0, 2**63, 3000, dtype=np.uint64) >> np.uint64(64 - bits)
    keys = np.concatenate([shared[rng.integers(0, len(shared), 60000)], shared[:1] ^ np.uint64(1 << (bits - 1))])
    expected, expected_inverse = np.unique(keys, return_inverse=True)
    for distinct in (_judge._distinct, _judge._py_distinct):
        found, inverse = distinct(keys)
        assert np.array_equal(found, expected) and np.array_equal(inverse, expected_inverse)


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(0, 40), max_size=30),
    seed=st.integers(0, 2**32 - 1),
    firsts=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    data=st.data(),
)
def test_text_keys_equal_the_numpy_reference(  # type: ignore[no-untyped-def]
    kernel, counts: list[int], seed: int, firsts: list[int], data: st.DataObject
) -> None:
    words = np.array(data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=sum(counts), max_size=sum(counts))))
    words = words.astype(np.uint32)
    offsets = np.cumsum([0, *counts]).astype(np.int64)
    expected = [_lsh.exact_keys(words, offsets, seed, first).tolist() for first in firsts]
    keys = np.frombuffer(kernel.text_keys(words, offsets, seed, tuple(firsts)), dtype=np.uint64)
    assert keys.reshape(len(counts), len(firsts)).T.tolist() == expected
    assert _lsh.text_keys(words, offsets, seed, firsts).T.tolist() == expected
    assert _lsh._py_text_keys(words, offsets, seed, firsts).T.tolist() == expected


def test_text_keys_refuse_offsets_past_the_words(kernel) -> None:  # type: ignore[no-untyped-def]
    words = np.arange(4, dtype=np.uint32)
    for offsets in ([0, 9], [1, 2], [0, 3, 2]):
        with pytest.raises(ValueError):
            kernel.text_keys(words, np.array(offsets, dtype=np.int64), 1, (0,))
    with pytest.raises(ValueError):
        kernel.text_keys(words, np.array([0, 4], dtype=np.int64), 1, (-1,))


def test_bad_offsets_are_refused_not_read_past(kernel) -> None:  # type: ignore[no-untyped-def]
    words = np.arange(4, dtype=np.uint32)
    multipliers = np.ones(4, dtype=np.uint64).tobytes()
    for offsets in ([0, 9], [1, 2], [0, 3, 2]):
        with pytest.raises(ValueError):
            kernel.sketch(words, np.array(offsets, dtype=np.int64), 2, multipliers, multipliers, 2, 2)


def test_a_word_that_is_not_text_is_refused(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        kernel.hash_words([["fine", 7]], 1)
    with pytest.raises(UnicodeEncodeError):
        kernel.hash_words([["lone \ud800 surrogate"]], 1)


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(st.integers(0, 2**32 - 1), max_size=30),
    second=st.lists(st.integers(0, 2**32 - 1), max_size=30),
    overlap=st.integers(0, 30),
    shingle_size=st.integers(1, 8),
)
def test_verification_sets_and_their_jaccard_equal_the_rules(  # type: ignore[no-untyped-def]
    kernel, first: list[int], second: list[int], overlap: int, shingle_size: int
) -> None:
    second = first[:overlap] + second  # share a start, as near-duplicates do
    packed = [kernel.verification(np.array(words, dtype="<u4").tobytes(), shingle_size) for words in (first, second)]
    sets = [verification_set(words, shingle_size) for words in (first, second)]
    for values, expected in zip(packed, sets, strict=True):
        assert np.frombuffer(values, dtype=np.uint64).tolist() == sorted(expected)
    if sets[0] or sets[1]:
        assert kernel.jaccard(*packed) == jaccard(*sets)


def test_a_sketcher_sent_to_a_worker_process_keeps_the_kernel(kernel) -> None:  # type: ignore[no-untyped-def]
    # a replay pickles its Sketcher for its worker process; one that cannot be
    # pickled makes the replay sketch in its own process, at half the speed
    from streamfilter import FilterConfig
    from streamfilter._engine import Sketcher
    from streamfilter.adapters import record_adapter

    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    copy = pickle.loads(pickle.dumps(sketcher, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(copy._sketcher) is _CBatchSketcher
    records = [(1, '{"id": 1, "text": "a campaign post that many accounts copy word for word"}')]
    mine, theirs = sketcher.prepare(records), copy.prepare(records)
    assert theirs.sketches[0].band_keys.tolist() == mine.sketches[0].band_keys.tolist()


@settings(max_examples=500, deadline=None)
@example(text="1" * 20)
@example(text="-" + "1" * 19)
@example(text="1" * 19)
@example(text='"' + "1" * 25 + '" ' + "-" + "2" * 18)  # in a string: no number
@example(text='"\\"' + "[" * 70)  # an escaped quote: the string runs on
@example(text='"\\\\"' + "[" * 70)  # an escaped backslash: the string ends
@example(text="]" * 5 + "[" * 66)
@example(text='{"a": "\ud800", "b": [[' + "9" * 21 + "]]}")
@given(text=st.text(alphabet=st.sampled_from('0123456789-."\\[]{}: a\u00e9\u65e5\ud800'), max_size=120))
def test_a_json_scan_measures_as_the_python_reference(kernel, text: str) -> None:  # type: ignore[no-untyped-def]
    # _json.loads trusts it for the depth limit and for leaving long integers to json
    depth, long_number = kernel.json_scan(text)
    assert (depth <= MAX_DEPTH) is depth_ok(text)
    assert depth == deepest_by_characters(text)
    outside = _JSON_STRING.sub("", text)
    if '"' in outside:  # an unterminated string runs to the end
        outside = outside[: outside.index('"')]
    assert long_number is (re.search(r"[0-9]{20}|-[0-9]{19}", outside) is not None)
    # _json.plain_object scans a line's UTF-8 bytes: the same answer
    assert kernel.json_scan(text.encode("utf-8", "surrogatepass")) == (depth, long_number)


def test_a_json_scan_takes_only_text_or_its_bytes(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        kernel.json_scan(bytearray(b"{}"))


# What mentions and words are made of in ASCII: "@", "via" in any case, word
# characters, the whitespace regex's \s takes (and the separators it does
# not), apostrophes, underscores, punctuation.
_ASCII_PIECES = st.sampled_from(
    ["@", "via", "VIA", "vIa", "v", "i", "a", " ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "_", "'", "`",
     "x", "Q", "9", ".", ",", "-", "#", ":", "@@", " via ", "RT", "/", "&", "\x00", "\x7f"]
)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@example(pieces=["@", "x", " ", "via"])  # the via of a mention, at the very end
@example(pieces=["via", "\t", "@", "_"])  # "via @_", a mention of an underscore
@example(pieces=["x", "@", "a", "@", "b"])  # an @ after a word character is no mention
@example(pieces=["a", "via", " ", "@", "x"])  # nor is a via inside a word
@example(pieces=["@", "a", "\x1c", "via"])  # \x1c is a space to str.split, not to \s
@example(pieces=["@", "a", " ", "via", "_"])  # "via_" is a longer word: no via
@example(pieces=["d", "o", "n", "'", "t", " ", "@", "a", "`", "s"])
@given(pieces=st.lists(_ASCII_PIECES, max_size=24))
def test_ascii_words_are_the_mentions_out_and_the_words_of_the_rest(kernel, pieces: list[str]) -> None:  # type: ignore[no-untyped-def]
    # words_and_cut reads an ASCII text's words in the kernel: they must be
    # what the regex and the translate read, word for word
    text = "".join(pieces)
    assert kernel.ascii_words(text) == _ascii_words(_MENTION.sub(" ", text))


def test_ascii_words_take_only_ascii_text(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        kernel.ascii_words("café @x")
    with pytest.raises(TypeError):
        kernel.ascii_words(b"@x")


@settings(max_examples=2000, deadline=None)
@example(text="a\udc00b", limit=1)  # a lone surrogate is a run of its own
@example(text="é" * 4 + "x" + "é" * 5, limit=4)  # one run at the limit, one past it
@given(
    text=st.text(st.sampled_from("ab é😂\u200b\u0301\U0001f1fa\udc00\x7f\x80"), max_size=30) | st.text(max_size=30),
    limit=st.integers(0, 6),
)
def test_non_ascii_runs_fold_as_the_regex_sub_folds_them(kernel, text: str, limit: int) -> None:  # type: ignore[no-untyped-def]
    # words_and_cut folds a text's non-ASCII runs in the kernel: each run the
    # regex finds, whole, and by the function its length picks
    def short(run: str) -> str:
        return f"<{run}>"

    def long(run: str) -> str:
        return f"[{run}]"

    expected = _NON_ASCII_RUN.sub(lambda found: (short if len(found.group()) <= limit else long)(found.group()), text)
    assert kernel.fold_runs(text, short, long, limit) == expected


def test_folding_runs_takes_text_and_gives_text(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        kernel.fold_runs(b"caf\xc3\xa9", str, str, 16)
    with pytest.raises(TypeError):  # as re.sub: a fold must give text
        kernel.fold_runs("café", len, len, 16)
    with pytest.raises(ZeroDivisionError):  # a fold's error is raised as it is
        kernel.fold_runs("café", lambda run: str(1 / 0), str, 16)
    assert kernel.fold_runs("plain", len, len, 16) == "plain"  # no run: no call


_SOME_LOOKALIKES = sorted(_lookalikes())[::97]  # from every part of the table, astral ones too


@settings(max_examples=2000, deadline=None)
@example(text="\U0010ffff")  # the last code point, past the table's last look-alike
@example(text="a\udc00")  # a lone surrogate
@given(
    text=st.text(st.sampled_from(["a", "é", "日", "\udc00", "\U0001f602", *_SOME_LOOKALIKES]), max_size=12)
    | st.text(max_size=30)
)
def test_a_text_holds_a_lookalike_as_the_set_says(kernel, text: str) -> None:  # type: ignore[no-untyped-def]
    assert _c_holds_lookalike(text) == _py_holds_lookalike(text)


def test_every_lookalike_is_found_and_its_neighbours_are_not_by_mistake(kernel) -> None:  # type: ignore[no-untyped-def]
    lookalikes = _lookalikes()
    for char in lookalikes:
        assert _c_holds_lookalike("ab" + char)
        for near in (chr(ord(char) - 1), chr(min(ord(char) + 1, 0x10FFFF))):
            assert _c_holds_lookalike(near) == (near in lookalikes)
    with pytest.raises(TypeError):
        kernel.holds_any(b"bytes", _lookalike_bits())


@settings(max_examples=1000, deadline=None)
@given(
    first=st.lists(st.integers(0, 5), max_size=14),
    second=st.lists(st.integers(0, 5), max_size=14),
    limit=st.integers(0, 6),
    big=st.booleans(),
)
def test_word_edits_count_as_the_rules_count_them(  # type: ignore[no-untyped-def]
    kernel, first: list[int], second: list[int], limit: int, big: bool
) -> None:
    # a few distinct words, so that posts share many and differ by a few;
    # shifted high, so that words differing past 31 bits stay apart
    if big:
        first, second = [2**32 - 1 - word for word in first], [2**32 - 1 - word for word in second]
    packed = [np.array(words, dtype=np.uint32) for words in (first, second)]
    assert kernel.word_edits(*packed, limit) == word_edits(first, second, limit)


def test_bad_word_edits_are_refused(kernel) -> None:  # type: ignore[no-untyped-def]
    words = np.arange(3, dtype=np.uint32)
    with pytest.raises(ValueError):
        kernel.word_edits(words, words, -1)
    with pytest.raises(ValueError):
        kernel.word_edits(words, b"\x00\x01\x02", 2)  # not whole uint32s


@pytest.mark.parametrize(
    "shape",
    [
        np.arange(5000),  # in order
        np.arange(5000)[::-1],  # reversed
        np.concatenate([np.arange(2500), np.arange(2500)[::-1]]),  # up, then down
        np.full(5000, 7),  # one word over and over
        np.random.default_rng(5).integers(0, 40, 5000),  # a few words, repeated
    ],
    ids=["ascending", "descending", "organ-pipe", "one-word", "few-words"],
)
def test_verification_sorts_long_posts_of_every_shape(kernel, shape: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    # a single-word set is the word hashes themselves, so these orders reach
    # the sort as they are: the shapes that slow or break a quicksort
    words = shape.astype(np.uint32)
    for shingle_size in (1, 2, 3):
        packed = kernel.verification(words.astype("<u4").tobytes(), shingle_size)
        assert np.frombuffer(packed, dtype=np.uint64).tolist() == sorted(verification_set(words.tolist(), shingle_size))


def _judged(words: list[int], shingle_size: int, cut_off: bool) -> Sketch:
    hashes = np.array(words, dtype=np.uint32)
    shingles = np.array(sorted(verification_set(words, shingle_size)), dtype=np.uint64)
    return Sketch("judged", 100.0, np.zeros(0, dtype=np.uint64), shingles, hashes, cut_off=cut_off)


_CANDIDATE = st.one_of(
    st.none(),
    st.tuples(
        st.lists(st.integers(0, 19), min_size=1, max_size=24),  # its own words
        # how it is made: its own words, or the judged post's with edits, or longer, or the same words,
        # or a run of the judged post's words, or the judged post's between words of its own
        st.integers(0, 5),
        st.lists(  # word edits: a word put in, taken out or changed, where and which
            st.tuples(st.sampled_from(["in", "out", "change"]), st.integers(0, 23), st.integers(0, 19)), max_size=3
        ),
        st.sampled_from([49.0, 50.0, 51.0]),  # at, before or after the horizon (50)
    ),
)


@settings(max_examples=1500, deadline=None)
@example(  # a cut copy that matches the first n + 1 words of its original, not the first n
    words=list(range(1, 13)),
    candidates=[([13, 14, 15], 2, [("in", 3, 19)], 51.0)],
    shingle_size=2,
    cut_off=True,
    threshold=0.7,
)
@example(  # a post of 9 words padded with 12 of another's, and cut to 8 of its words
    words=list(range(1, 10)),
    candidates=[(list(range(10, 22)), 5, [], 51.0), ([0], 4, [("in", 1, 0)], 51.0)],
    shingle_size=2,
    cut_off=False,
    threshold=0.5,
)
@example(  # two posts a word apart, of 10 and 11 words: 1 - 1/11
    words=list(range(1, 11)),
    candidates=[([1], 1, [("in", 5, 19)], 51.0)],
    shingle_size=2,
    cut_off=False,
    threshold=0.9,
)
@given(
    words=st.lists(st.integers(0, 19), min_size=1, max_size=24),
    candidates=st.lists(_CANDIDATE, max_size=10),
    shingle_size=st.integers(1, 3),
    cut_off=st.booleans(),
    threshold=st.sampled_from([0.3, 0.5, 0.7, 0.9]),
)
def test_best_match_names_what_the_python_rules_name(  # type: ignore[no-untyped-def]
    kernel,
    words: list[int],
    candidates: list[tuple[list[int], int, list[tuple[str, int, int]], float] | None],
    shingle_size: int,
    cut_off: bool,
    threshold: float,
) -> None:
    # few distinct words, so candidates share most of the judged post's
    # pairs, and each rule decides some: same words, Jaccard, cut-off, edits
    posts: list[CachedPost | None] = []
    for candidate in candidates:
        if candidate is None:
            posts.append(None)
            continue
        own_words, made, edits, timestamp = candidate
        if made in (1, 2):  # the judged post's words, a few edited, and for 2 longer: the post it was cut from
            edited = list(words)
            for edit, at, word in edits:
                at %= len(edited) + 1
                if edit == "in":
                    edited.insert(at, word)
                elif edit == "out" and len(edited) > 1:
                    del edited[min(at, len(edited) - 1)]
                elif edit == "change":
                    edited[min(at, len(edited) - 1)] = word
            own_words = edited if made == 1 else edited + own_words
        elif made == 3:  # the very same words
            own_words = list(words)
        elif made == 4:  # a run of the judged post's words (edits give where it starts and ends)
            start, end = sorted(at % (len(words) + 1) for _, at, _ in [*edits, ("", 0, 0), ("", len(words), 0)][:2])
            own_words = words[start:end] or own_words
        elif made == 5:  # the judged post's words, with its own before and after them
            half = len(own_words) // 2
            own_words = own_words[:half] + words + own_words[half:]
        posts.append(CachedPost(timestamp, f"p{len(posts)}", np.array(own_words, dtype="<u4").tobytes()))
    serials = list(range(100, 100 + len(posts)))
    judged = _judged(words, shingle_size, cut_off)
    own = CachedPost(judged.timestamp, judged.post_id, judged.words.astype("<u4").tobytes())
    compiled = _rules.best_match(serials, posts, judged, own, 50.0, threshold, shingle_size)
    for post in posts:  # the sets the kernel built and kept are the rules' sets
        if post is not None and post.packed is not None:
            assert np.frombuffer(post.packed, dtype=np.uint64).tolist() == sorted(
                verification_set(np.frombuffer(post.words, dtype="<u4").tolist(), shingle_size)
            )
            post.packed = None
    own = CachedPost(judged.timestamp, judged.post_id, judged.words.astype("<u4").tobytes())
    with pytest.MonkeyPatch.context() as patch:
        python_rules(patch)  # the Python rules, sets and all
        expected = _rules.best_match(serials, posts, judged, own, 50.0, threshold, shingle_size)
    assert compiled == expected


@pytest.mark.parametrize("chaff", [600, 601])
def test_an_embedded_copy_is_looked_for_in_posts_up_to_a_thousand_words(kernel, chaff: int) -> None:  # type: ignore[no-untyped-def]
    # 400 words among 600 of chaff make a post of 1,000 words, one more makes an article
    words = list(range(1000, 1400))
    candidate = CachedPost(60.0, "padded", np.array([*range(chaff), *words], dtype="<u4").tobytes())
    judged = _judged(words, 2, False)
    own = CachedPost(judged.timestamp, judged.post_id, judged.words.astype("<u4").tobytes())
    compiled = _rules.best_match([7], [candidate], judged, own, 50.0, 0.5, 2)
    candidate.packed = None
    with pytest.MonkeyPatch.context() as patch:
        python_rules(patch)
        expected = _rules.best_match([7], [candidate], judged, own, 50.0, 0.5, 2)
    assert compiled == expected == (None if chaff == 601 else (_rules.Match("padded", 1.0), 7))


def test_best_match_takes_only_what_it_can_read(kernel) -> None:  # type: ignore[no-untyped-def]
    words = np.arange(4, dtype="<u4").tobytes()
    judged = np.array(sorted(verification_set([0, 1, 2, 3], 2)), dtype=np.uint64)
    rules = _rules._KERNEL_RULES
    with pytest.raises(TypeError):  # a candidate's words as a list, not bytes
        bad = CachedPost(1.0, "p", words)
        bad.words = [0, 1, 2, 3]  # type: ignore[assignment]
        kernel.best_match([bad], words, judged, 0.0, 0.5, 2, False, rules)
    with pytest.raises(ValueError):  # words that are not whole uint32s
        kernel.best_match([], b"\x00\x01\x02", judged, 0.0, 0.5, 2, False, rules)
    with pytest.raises(ValueError):  # no such shingle size
        kernel.best_match([], words, judged, 0.0, 0.5, 9, False, rules)
    with pytest.raises(TypeError):  # candidates in a tuple
        kernel.best_match((), words, judged, 0.0, 0.5, 2, False, rules)


@settings(max_examples=1500, deadline=None)
@given(
    keys=st.lists(st.lists(st.integers(0, 8), min_size=1, max_size=6), min_size=1, max_size=12),
    members=st.lists(st.sets(st.integers(0, 40), max_size=5), min_size=9, max_size=9),
    recorded=st.lists(st.booleans(), min_size=12, max_size=12),
    limit=st.integers(1, 4),
    verified=st.integers(1, 6),
)
def test_a_batch_ranks_its_candidates_as_the_python_judge_does(  # type: ignore[no-untyped-def]
    kernel, keys: list[list[int]], members: list[set[int]], recorded: list[bool], limit: int, verified: int
) -> None:
    # a few band keys shared by many sketches, some held twice by one, each
    # with up to ``limit`` newest stored members and its oldest, and sketches filed
    # as the batch goes, so that keys crowd their stored members out
    every = np.array([key for sketch in keys for key in sketch], dtype=np.uint64)
    owner = np.repeat(np.arange(len(keys)), [len(sketch) for sketch in keys])
    queries, inverse = np.unique(every, return_inverse=True)
    hit_query, hit_serial = [], []
    for query, key in enumerate(queries.tolist()):
        newest = _rules.offered_per_key(sorted(members[key]), limit)[::-1]
        hit_query += [query] * len(newest)
        hit_serial += newest
    hits = (np.array(hit_query, dtype=np.int64), np.array(hit_serial, dtype=np.int64))
    compiled = kernel.Ranker(
        *hits, inverse.astype(np.int64), owner, len(queries), len(keys), limit, verified, OLDEST_PER_KEY
    )
    # the keys whose buckets are full (a flood's signal), as the Python judge counts them
    full = np.count_nonzero(np.bincount(hits[0], minlength=1) >= limit + OLDEST_PER_KEY)
    assert compiled.full_buckets() == full
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_rules, "MAX_VERIFIED", verified)
        python = _judge._Ranking(
            _judge._stored_sharers(*hits, inverse, owner, len(queries)),
            _judge._InBatch(inverse, owner, len(queries), len(keys), hits, limit),
        )
        filed = 0
        for index in range(len(keys)):
            assert compiled.candidates(index, filed > 0) == python.candidates(index, filed > 0)
            if recorded[index]:
                compiled.file(index, 100 + filed)  # past every stored serial, as the batch's own are
                python.file(index, 100 + filed)
                filed += 1


def test_a_ranker_takes_only_a_batch_it_can_read(kernel) -> None:  # type: ignore[no-untyped-def]
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError):  # hits not sorted by query
        kernel.Ranker(np.array([1, 0]), np.array([5, 6]), one, one, 2, 1, 4, 64, 2)
    with pytest.raises(ValueError):  # a band key's query past the queries
        kernel.Ranker(one[:0], one[:0], np.array([3]), one, 2, 1, 4, 64, 2)
    with pytest.raises(ValueError):  # sketches out of order
        kernel.Ranker(one[:0], one[:0], np.array([0, 0]), np.array([1, 0]), 1, 2, 4, 64, 2)
    ranker = kernel.Ranker(one[:0], one[:0], one, one, 1, 1, 4, 64, 2)
    assert ranker.candidates(0, False) is None
    with pytest.raises(IndexError):
        ranker.candidates(1, False)
    with pytest.raises(IndexError):
        ranker.file(-1, 100)


def test_a_ranker_judges_its_own_batch_once(kernel) -> None:  # type: ignore[no-untyped-def]
    one = np.zeros(1, dtype=np.int64)
    post = _judged([1, 2, 3], 2, False)
    rules = _rules._KERNEL_RULES

    def judge(ranker: Any, sketches: list[Sketch], fetch: Any = lambda serial: None) -> Any:
        columns = Sketches.of(sketches).columns()
        return ranker.judge(columns, fetch, 7, 0.0, 0.0, 0.5, 2, rules, False, None, None)

    ranker = kernel.Ranker(one[:0], one[:0], one, one, 1, 1, 4, 64, 2)
    with pytest.raises(ValueError):  # a batch of another size
        judge(ranker, [post, post])
    duplicate_of, similarity, matched, recorded, posts, clock, capped = judge(ranker, [post])
    assert (duplicate_of, similarity, matched, recorded, clock, capped) == ([None], [None], {}, [0], post.timestamp, 0)
    assert [(p.post_id, p.words) for p in posts] == [(post.post_id, post.words.astype("<u4").tobytes())]
    with pytest.raises(ValueError):  # its filings are this batch's now
        judge(ranker, [post])
    filed = kernel.Ranker(one[:0], one[:0], one, one, 1, 1, 4, 64, 2)
    filed.file(0, 7)
    with pytest.raises(ValueError):
        judge(filed, [post])

    def broken(serial: int) -> None:
        raise KeyError(f"no post {serial}")

    stored = kernel.Ranker(np.zeros(1, dtype=np.int64), np.array([5]), one, one, 1, 1, 4, 64, 2)  # one candidate
    with pytest.raises(KeyError, match="no post 5"):  # a fetch's error is the judge's
        judge(stored, [post], broken)
    reference = Sketch("r", 100.0, np.zeros(1, dtype=np.uint64), NO_SHINGLES, NO_WORDS, refers_to="p5")
    stored = kernel.Ranker(np.zeros(1, dtype=np.int64), np.array([5]), one, one, 1, 1, 4, 64, 2)
    with pytest.raises(KeyError, match="no post 5"):  # a reference's too
        judge(stored, [reference], broken)


def test_a_ranker_fetches_no_candidate_after_a_live_copy_of_the_words(kernel) -> None:  # type: ignore[no-untyped-def]
    # Two stored candidates share the judged post's one key; the newer (6)
    # ranks first. A live copy of the very words there ends the search, so the
    # older is never read; an expired one does not, and the older is the match.
    one = np.zeros(1, dtype=np.int64)
    columns = Sketches.of([_judged([1, 2, 3], 2, False)]).columns()  # at 100.0
    words = np.array([1, 2, 3], dtype="<u4").tobytes()

    def judged_with_newest_at(timestamp: float) -> tuple[list[int], list[str | None]]:
        fetched: list[int] = []

        def fetch(serial: int) -> CachedPost:
            fetched.append(serial)
            return CachedPost(timestamp if serial == 6 else 90.0, f"p{serial}", words)

        ranker = kernel.Ranker(np.zeros(2, dtype=np.int64), np.array([6, 5]), one, one, 1, 1, 64, 8, 2)
        judged = ranker.judge(columns, fetch, 7, 0.0, 30.0, 0.5, 2, _rules._KERNEL_RULES, False, None, None)
        return fetched, judged[0]

    assert judged_with_newest_at(95.0) == ([6], ["p6"])
    assert judged_with_newest_at(60.0) == ([6, 5], ["p5"])  # 40 s old, past the 30 s TTL


def test_a_ranker_reads_only_columns_that_hold_its_batch(kernel) -> None:  # type: ignore[no-untyped-def]
    # the judge reads the columns as buffers: any that do not describe one
    # batch of its size, or whose offsets point past their values, is refused
    # before a value is read
    one = np.zeros(1, dtype=np.int64)
    columns = list(Sketches.of([_judged([1, 2, 3], 2, False)]).columns())
    broken = {
        1: np.zeros(2),  # two times
        2: np.zeros(0, dtype=np.bool_),  # no flag
        7: np.array([0, 99], dtype=np.int64),  # shingles past their end
        9: np.array([5, 3], dtype=np.int64),  # words ending before they start
        10: np.zeros(3, dtype=np.uint8),  # not whole uint32 words
    }
    for at, wrong in broken.items():
        changed = [*columns[:at], wrong, *columns[at + 1 :]]
        ranker = kernel.Ranker(one[:0], one[:0], one, one, 1, 1, 4, 64, 2)
        with pytest.raises(ValueError):
            ranker.judge(
                tuple(changed), lambda serial: None, 7, 0.0, 0.0, 0.5, 2, _rules._KERNEL_RULES, False, None, None
            )
    # a fetch runs Python, which could write into the arrays the judge reads:
    # the offsets are read again after it, never trusted from before
    sketches = Sketches.of([_judged([1, 2, 3], 2, False)])

    def rewriting(serial: int) -> Any:
        sketches.word_ends[1] = 10**6
        return CachedPost(50.0, "stored", np.array([1, 2, 3], dtype="<u4").tobytes())

    stored = kernel.Ranker(np.zeros(1, dtype=np.int64), np.array([5]), one, one, 1, 1, 4, 64, 2)
    with pytest.raises(ValueError, match="offsets lie outside"):
        stored.judge(sketches.columns(), rewriting, 7, 0.0, 0.0, 0.5, 2, _rules._KERNEL_RULES, False, None, None)
    ranker = kernel.Ranker(one[:0], one[:0], one, one, 1, 1, 4, 64, 2)
    with pytest.raises(TypeError):  # an id that is not text
        ranker.judge(
            tuple([[7], *columns[1:]]),
            lambda serial: None,
            7,
            0.0,
            0.0,
            0.5,
            2,
            _rules._KERNEL_RULES,
            False,
            None,
            None,
        )


@settings(max_examples=100, deadline=None)
@given(
    half=st.integers(1, 40),
    steps=st.lists(st.tuples(st.booleans(), st.integers(-3, 120)), max_size=400),
)
def test_the_compiled_recent_posts_hold_what_two_dicts_hold(kernel, half: int, steps: list[tuple[bool, int]]) -> None:  # type: ignore[no-untyped-def]
    # PostCache's two generations as two dicts (the reference, without the
    # kernel) and as the kernel's RecentPosts: the same posts, put and got
    recent = kernel.RecentPosts(half)
    reference = _PyRecentPosts(half)
    for number, (put, serial) in enumerate(steps):
        if put:
            post = CachedPost(float(number), f"p{number}", b"")
            recent.put(serial, post)
            reference.put(serial, post)
        else:
            assert recent.get(serial) is reference.get(serial)
    assert len(recent) == len(reference)
    recent.clear()
    reference.clear()
    assert len(recent) == len(reference) == 0 and all(recent.get(serial) is None for serial, _ in steps)
    with pytest.raises(ValueError):
        kernel.RecentPosts(0)
    with pytest.raises(ValueError):
        recent.put(1, None)


def test_recorded_items_are_the_records_python_encodes(kernel) -> None:  # type: ignore[no-untyped-def]
    ids = ["0", "7", "1234567890123456789", "9999999999999999999", "12345678901234567890", "007", "", "١٢٣",
           "at://did:plc:abcdefghijklmnopqrstuvwx/app.bsky.feed.post/3k", "user:42", "x" * 300]  # fmt: skip
    posts = [CachedPost(1.5 + number, post_id, bytes(range(4 * number))) for number, post_id in enumerate(ids)]
    recent = kernel.RecentPosts(64)
    items = kernel.recorded_items(posts, 1 << 33, recent, encode_record)
    assert items == [
        (((1 << 33) + number).to_bytes(8, "big"), encode_record(post.timestamp, post.post_id, post.words))
        for number, post in enumerate(posts)
    ]
    assert all(recent.get((1 << 33) + number) is post for number, post in enumerate(posts))
    assert [decode_record(record)[1] for _, record in items] == ids


def test_a_compiled_cached_post_holds_what_the_python_one_holds(kernel) -> None:  # type: ignore[no-untyped-def]
    assert _rules.CachedPost is kernel.CachedPost
    python = _values._PyCachedPost
    fields = ("timestamp", "post_id", "words", "members", "packed")
    words = np.array([7, 2**32 - 1, 0], dtype="<u4").tobytes()
    compiled, expected = kernel.CachedPost(12.5, "p1", words), python(12.5, "p1", words)
    assert [getattr(compiled, name) for name in fields] == [getattr(expected, name) for name in fields]
    given = kernel.CachedPost(1.0, "p2", b"\x01\x00\x00\x00", {3, 4})
    assert (given.members, given.packed) == ({3, 4}, None)
    given.packed, given.members = b"\x00" * 8, None  # the rules keep a post's set in it
    assert (given.members, given.packed) == (None, b"\x00" * 8)
    with pytest.raises(AttributeError):
        given.other = 1  # type: ignore[attr-defined]  # a record of five fields, as the slots of the Python one
    with pytest.raises(TypeError):
        kernel.CachedPost(1.0, "p3")  # type: ignore[call-arg]


def test_the_posts_a_store_caches_add_nothing_for_the_collector_to_walk(kernel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Python's full collection walks every object the collector tracks, and
    # an LMDB store caches up to 32,768 recent posts: as a Python class, each
    # was one more object to walk (3,000 here), and a stream paused for them
    from streamfilter import LMDBStore, StreamFilter

    rng = np.random.default_rng(3)
    texts = [" ".join(f"w{word}" for word in rng.integers(0, 50_000, 12)) for _ in range(3001)]
    with StreamFilter(store=LMDBStore(tmp_path / "index")) as sf:
        sf.check({"id": "warm", "text": texts[-1]})  # the filter builds what it keeps
        gc.collect()
        before = len(gc.get_objects())
        for n, text in enumerate(texts[:-1]):
            assert sf.is_novel({"id": str(n), "text": text})
        sf.flush()  # the open group of calls holds its posts until it commits
        gc.collect()
        assert len(gc.get_objects()) - before < 300
