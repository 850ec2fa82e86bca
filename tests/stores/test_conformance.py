"""One suite, every store: the contract of check_and_insert."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from streamfilter import (
    FilterConfig,
    LMDBStore,
    normalize,
)
from streamfilter._lsh import band_keys, exact_keys, id_keys
from streamfilter._minhash import MinHasher
from streamfilter._normalize import words_and_cut
from streamfilter._rules import word_edits
from streamfilter._shingle import hash_words, shingles_of_words, verification_hashes
from streamfilter.stores import BandStore, IndexSettings, Sketch
from streamfilter.stores._base import by_query_newest_first

CONFIG = FilterConfig(seed=1)
SEED = 1
HASHER = MinHasher(CONFIG.num_perm, SEED)


def rekey(word_seqs: Sequence[npt.NDArray[np.uint32]]) -> npt.NDArray[np.uint64]:
    offsets = np.zeros(len(word_seqs) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in word_seqs], out=offsets[1:])
    words = np.concatenate(word_seqs).astype(np.uint32)
    shingles = shingles_of_words(words, offsets, CONFIG.shingle_size)
    keys = band_keys(HASHER.signatures(shingles), CONFIG.bands or 0, CONFIG.rows or 0)
    return np.column_stack([keys, exact_keys(words, offsets, SEED)])


def settings(
    ttl: float = 0, purge_limit: int = 1024, fingerprint: dict[str, Any] | None = None, limit: int = 64
) -> IndexSettings:
    return IndexSettings(
        fingerprint=fingerprint or CONFIG.fingerprint(),
        jaccard_threshold=CONFIG.jaccard_threshold,
        ttl_seconds=ttl,
        rekey=rekey,
        purge_limit=purge_limit,
        max_candidates_per_band=limit,
    )


def spelled(number: int) -> str:
    """``number`` as a word of letters alone, another word for each number:
    its digits as letters of two alphabets by turns. No letter stands twice
    in a row, and none is an l, m, n or r, which a word's hash reads
    otherwise (``_shingle.hashed_form``): the words of the store tests'
    texts stay distinct. (Words of letters and digits would not: x3100 is
    read as the leetspeak xeioo, and its hash draws the oo out once, as x310's.)"""
    return "".join(("abcdefghjk", "opqstuvwxy")[at % 2][int(digit)] for at, digit in enumerate(str(number)))


def sketch(post_id: str, timestamp: float, text: str) -> Sketch:
    words, offsets = hash_words([normalize(text).split()], SEED)
    shingles = shingles_of_words(words, offsets, CONFIG.shingle_size)
    keys = band_keys(HASHER.signatures(shingles), CONFIG.bands or 0, CONFIG.rows or 0)
    verified = verification_hashes(words, offsets, CONFIG.shingle_size)
    keys = np.concatenate([keys[0], exact_keys(words, offsets, SEED), id_keys([post_id], SEED)])
    return Sketch(post_id, timestamp, keys, verified[0], words, cut_off=words_and_cut(text)[1])


def repost(post_id: str, timestamp: float, reposted: str) -> Sketch:
    """A repost without text, judged by the post it reposts."""
    return Sketch(
        post_id,
        timestamp,
        id_keys([reposted], SEED),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=np.uint32),
        refers_to=reposted,
    )


TEXT = "the quick brown fox jumps over the lazy dog near the river bank"


def test_novel_then_duplicate(make_store: Callable[..., BandStore]) -> None:
    store = make_store()
    assert store.check_and_insert([sketch("a", 1000, TEXT)]) == [None]
    (match,) = store.check_and_insert([sketch("b", 1001, "@x " + TEXT.upper() + " http://t.co/1")])
    assert match is not None and match.duplicate_of == "a" and match.similarity == 1.0
    assert store.post_count() == 1  # duplicates are not indexed


def test_duplicate_inside_one_batch(make_store: Callable[..., BandStore]) -> None:
    store = make_store()
    results = store.check_and_insert(
        [
            sketch("a", 1, TEXT),
            sketch("b", 2, "something else entirely, nothing shared"),
            sketch("c", 3, TEXT),
        ]
    )
    assert results[0] is None and results[1] is None
    assert results[2] is not None and results[2].duplicate_of == "a"


def test_campaign_copies_in_one_batch_all_name_the_one_original(make_store: Callable[..., BandStore]) -> None:
    # a campaign posts one text from many accounts: in a batch of its copies
    # (each with its own mention and link), the first passes and every copy
    # names it, however many copies came before it in the batch
    store = make_store()
    text = "win a cruise for two this summer, follow us and retweet to enter the draw"
    batch = [sketch(f"c{i}", i, f"@fan{i} {text} https://t.co/{i:x}") for i in range(400)]
    batch.insert(200, sketch("other", 200, "a post about something else, shares nothing with the draw"))
    results = store.check_and_insert(batch)
    assert results[0] is None and results[200] is None
    copies = results[1:200] + results[201:]
    assert all(match is not None and match.duplicate_of == "c0" for match in copies)
    assert store.post_count() == 2


def test_near_duplicate_reports_measured_similarity(make_store: Callable[..., BandStore]) -> None:
    store = make_store()
    store.check_and_insert([sketch("a", 1, TEXT)])
    (match,) = store.check_and_insert([sketch("b", 2, TEXT.replace("lazy", "sleepy"))])
    assert match is not None and 0.5 <= match.similarity < 1.0


@pytest.mark.parametrize(
    "post_id",
    [
        "570306133677760513",  # Twitter and Mastodon: decimal, stored as a number by LMDB
        "18446744073709551615",  # 20 digits: past 64 bits, stored as text
        "9999999999999999999",  # the largest 19-digit number
        "0",
        "007",  # a leading zero a number would lose
        "line:12",
        "at://did:plc:z72i7hdynmk6r22z27h6tvur/app.bsky.feed.post/3l3qo2vutsw2b",
        "ид-" + "я" * 300,  # longer than 255 bytes
        "",
    ],
)
def test_duplicate_names_the_id_it_was_given(make_store: Callable[..., BandStore], post_id: str) -> None:
    store = make_store()
    store.check_and_insert([sketch(post_id, 1, TEXT)])
    (match,) = store.check_and_insert([sketch("copy", 2, TEXT)])
    assert match is not None and match.duplicate_of == post_id


def test_two_word_edits_of_a_short_post_are_a_duplicate(make_store: Callable[..., BandStore]) -> None:
    # One word replaced and one added: the word pairs alike are 5 of 12
    # (0.42, under the threshold), the words and pairs together 13 of 23 (0.57).
    store = make_store()
    first = sketch("a", 1, "the crew on my flight to denver was great")
    edited = sketch("b", 2, "the crew on my trip to denver was really great")
    unrelated = sketch("c", 3, "the gate agent on my flight was kind")
    results = store.check_and_insert([first, edited, unrelated])
    assert results[0] is None and results[2] is None
    assert results[1] is not None and results[1].duplicate_of == "a"


def test_band_collision_alone_is_not_a_duplicate(make_store: Callable[..., BandStore]) -> None:
    store = make_store()
    first = sketch("a", 1, TEXT)
    impostor = sketch("b", 2, "completely different words about cooking pasta at home tonight")
    impostor.band_keys = first.band_keys.copy()  # every band collides
    assert store.check_and_insert([first, impostor]) == [None, None]


LONG = "we waited four hours at the gate in denver and nobody from the crew told us why the flight was late"


def _collides_with(post: Sketch, original: Sketch) -> Sketch:
    """``post`` filed under every band key of ``original``, so that the
    store verifies it against ``original`` whatever LSH would propose."""
    post.band_keys = np.append(original.band_keys[:-1], post.band_keys[-1])
    return post


def test_a_copy_cut_off_by_an_ellipsis_matches_the_start_of_its_original(
    make_store: Callable[..., BandStore],
) -> None:
    original = sketch("a", 1, LONG)
    cut = _collides_with(sketch("b", 2, "We waited four hours at the gate in denver and nob…"), original)
    assert cut.cut_off and len(cut.words) == 10
    # Against the whole original, 19 of its 41 words and pairs: under the threshold.
    whole = set(original.shingles.tolist())
    own = set(cut.shingles.tolist())
    assert len(own & whole) / len(own | whole) < CONFIG.jaccard_threshold
    (match,) = make_store().check_and_insert([original, cut])[1:]
    assert match is not None and match.duplicate_of == "a" and match.similarity == 1.0


def test_a_cut_off_post_is_novel_when_its_start_differs_or_it_is_short(
    make_store: Callable[..., BandStore],
) -> None:
    original = sketch("a", 1, LONG)
    # the original's middle words, not its start (and fewer than an embedded copy needs)
    middle = _collides_with(sketch("b", 2, "and nobody from the crew told us…"), original)
    # the original's start, but only 3 words: too short to tell a copy from a common opening
    short = _collides_with(sketch("c", 3, "We waited four ho…"), original)
    # 5 words, one of them not the original's: a start this short must be its very words
    nearly = _collides_with(sketch("e", 3, "We waited five hours at th…"), original)
    # the same start without the "…": a post of its own, compared whole (7 words: not embedded either)
    uncut = _collides_with(sketch("d", 4, "We waited four hours at the gate"), original)
    assert middle.cut_off and short.cut_off and nearly.cut_off and not uncut.cut_off
    assert (len(short.words), len(nearly.words)) == (3, 5)
    assert make_store().check_and_insert([original, middle, short, nearly, uncut]) == [None] * 5


def test_a_post_standing_whole_in_another_is_its_copy_either_way_round(
    make_store: Callable[..., BandStore],
) -> None:
    original = sketch("a", 1, LONG)  # 21 words
    # 9 of its middle words, cut; 10 of its first, not cut: each a copy of 8 words or more
    middle = _collides_with(sketch("b", 2, "and nobody from the crew told us why the fl…"), original)
    start = _collides_with(sketch("c", 3, "We waited four hours at the gate in denver and"), original)
    # the original whole after 42 words of chaff (twice its own), and 7 of its words alone
    chaff = " ".join(f"chaff{n}" for n in range(42))
    padded = sketch("d", 4, f"{chaff} {LONG}")
    few = _collides_with(sketch("e", 5, "nobody from the crew told us why"), padded)
    padded = _collides_with(padded, original)
    matches = make_store().check_and_insert([original, middle, start, padded, few])
    assert [(m.duplicate_of, m.similarity) if m else None for m in matches] == [
        None,
        ("a", 1.0),
        ("a", 1.0),
        ("a", 1.0),
        None,
    ]


def test_a_short_cut_copy_matches_only_the_very_start_of_its_original(
    make_store: Callable[..., BandStore],
) -> None:
    # 5 words and 4 words cut from the original's start, one after punctuation: copies
    original = sketch("a", 1, LONG)
    five = _collides_with(sketch("b", 2, "We waited four hours at th…"), original)
    four = _collides_with(sketch("c", 3, "We waited four hours,…"), original)
    assert five.cut_off and four.cut_off and (len(five.words), len(four.words)) == (5, 4)
    matches = make_store().check_and_insert([original, five, four])[1:]
    assert [(m.duplicate_of, m.similarity) if m else None for m in matches] == [("a", 1.0), ("a", 1.0)]


def test_two_word_edits_are_a_duplicate_when_the_jaccard_is_under_the_threshold(
    make_store: Callable[..., BandStore],
) -> None:
    original = sketch("a", 1, "my bag never made it to denver")
    # "bag" and "denver" replaced: 8 of 18 words and pairs alike (0.44), two word edits in seven
    edited = _collides_with(sketch("b", 2, "my suitcase never made it to dallas"), original)
    whole = set(original.shingles.tolist())
    own = set(edited.shingles.tolist())
    assert 0.4 <= len(own & whole) / len(own | whole) < CONFIG.jaccard_threshold
    (match,) = make_store().check_and_insert([original, edited])[1:]
    assert match is not None and match.duplicate_of == "a"
    assert match.similarity == pytest.approx(1 - 2 / 7)


def test_word_edits_is_the_edit_distance_within_its_limit() -> None:
    def distance(first: list[int], second: list[int]) -> int:  # the whole table, every cell
        previous = list(range(len(second) + 1))
        for i, word in enumerate(first, 1):
            current = [i]
            for j, other in enumerate(second, 1):
                current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other)))
            previous = current
        return previous[-1]

    rng = random.Random(5)
    for _ in range(3000):
        first = [rng.randrange(4) for _ in range(rng.randrange(9))]
        second = [rng.randrange(4) for _ in range(rng.randrange(9))]
        exact = distance(first, second)
        for limit in (0, 1, 2, 3):
            assert word_edits(first, second, limit) == (exact if exact <= limit else limit + 1)


def test_word_edits_do_not_count_past_two_or_under_a_jaccard_of_0_4(make_store: Callable[..., BandStore]) -> None:
    first = sketch("a", 1, "you lost my bag again in denver")
    three_edits = _collides_with(sketch("b", 2, "you lost my phone again in dallas today"), first)  # Jaccard 0.4
    second = sketch("c", 3, "bag never made it to denver")
    low_jaccard = _collides_with(sketch("d", 4, "bag never got it to dallas"), second)  # two edits, Jaccard 0.375
    assert make_store().check_and_insert([first, three_edits, second, low_jaccard]) == [None] * 4


def test_ttl_in_event_time_hides_at_once_and_purges(make_store: Callable[..., BandStore]) -> None:
    store = make_store(ttl=100, purge_limit=2)
    store.check_and_insert([sketch("a", 1000, TEXT)])
    (match,) = store.check_and_insert([sketch("b", 1099, TEXT)])
    assert match is not None  # still alive 99 s later in event time
    # the clock passes a's horizon mid-batch: the copy right after it no longer matches,
    # although purging only runs at the end of the batch
    results = store.check_and_insert(
        [sketch("filler", 1101, "filler post with its own words"), sketch("c", 1102, TEXT)]
    )
    match = results[1]
    assert match is None  # "a" expired: the copy is novel again


def test_purge_is_bounded_per_batch(make_store: Callable[..., BandStore], store_kind: str) -> None:
    if store_kind.startswith("redis"):
        pytest.skip("Redis expires keys itself and never purges: see test_redis_expiry_leaves_nothing_behind")
    store = make_store(ttl=10, purge_limit=3)
    store.check_and_insert(
        [sketch(f"p{i}", 100 + i * 0.01, f"alpha{i} beta{i} gamma{i} delta{i} epsilon{i}") for i in range(10)]
    )
    assert store.post_count() == 10
    store.check_and_insert([sketch("late", 1000, "a much later post that moves the clock")])
    assert store.post_count() == 1 + 10 - 3
    for _ in range(3):
        store.check_and_insert([])
    store.check_and_insert([sketch("later", 1001, "yet another unrelated post arriving")])
    assert store.post_count() <= 1 + 10 - 6 + 1


def test_ttl_zero_never_expires(make_store: Callable[..., BandStore]) -> None:
    store = make_store(ttl=0)
    store.check_and_insert([sketch("a", 1000, TEXT)])
    store.check_and_insert([sketch("z", 10**9, "the clock jumps decades ahead")])
    (match,) = store.check_and_insert([sketch("b", 10**9 + 1, TEXT)])
    assert match is not None and match.duplicate_of == "a"


def test_out_of_order_post_is_judged_against_the_highest_clock(make_store: Callable[..., BandStore]) -> None:
    store = make_store(ttl=100)
    store.check_and_insert([sketch("new", 5000, "fresh post from the present moment")])
    # an old post arrives late: it is already past the horizon, so it never matches anything later
    store.check_and_insert([sketch("old", 1000, TEXT)])
    (match,) = store.check_and_insert([sketch("copy", 5001, TEXT)])
    assert match is None


def test_repost_is_judged_by_the_post_it_reposts(make_store: Callable[..., BandStore]) -> None:
    store = make_store(ttl=100)
    store.check_and_insert([sketch("original", 1000, TEXT)])
    (seen, unseen) = store.check_and_insert([repost("r1", 1001, "original"), repost("r2", 1002, "never-seen")])
    assert seen is not None and seen.duplicate_of == "original" and seen.similarity == 1.0
    assert unseen is None
    assert store.post_count() == 1  # reposts are never recorded
    # in one batch, after the post it reposts; and not once that post has expired
    results = store.check_and_insert([sketch("fresh", 1003, "fresh words of a new post"), repost("r3", 1004, "fresh")])
    assert results[1] is not None and results[1].duplicate_of == "fresh"
    (expired,) = store.check_and_insert([repost("r4", 1101, "original")])
    assert expired is None


# -- LMDB only ------------------------------------------------------------------------
def test_lmdb_reopen_continues_the_index(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index")
    store.open(settings())
    store.check_and_insert([sketch("a", 1, TEXT)])
    store.close()
    again = LMDBStore(tmp_path / "index")
    again.open(settings())
    (match,) = again.check_and_insert([sketch("b", 2, TEXT)])
    again.close()
    assert match is not None and match.duplicate_of == "a"
    assert {p.name for p in (tmp_path / "index").iterdir()} >= {"data.mdb", "lock.mdb"}


def test_batch_without_posts_on_a_new_index(make_store: Callable[..., BandStore]) -> None:
    # a batch of only invalid lines still commits its progress; the clock has no value yet
    store = make_store(ttl=60)
    assert store.check_and_insert([], progress={"in.jsonl": 3}) == []
    assert store.progress() == {"in.jsonl": 3}


def _mutated_stream(count: int, seed: int) -> list[Sketch]:
    """Posts, near-duplicates and copies of posts from anywhere earlier, in order."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(400)]
    texts: list[list[str]] = []
    sketches: list[Sketch] = []
    for index in range(count):
        if texts and rng.random() < 0.4:
            words = list(texts[int(rng.integers(len(texts)))])
            if rng.random() < 0.5:
                words[int(rng.integers(len(words)))] = str(rng.choice(vocabulary))
        else:
            words = [str(w) for w in rng.choice(vocabulary, size=int(rng.integers(4, 16)))]
            texts.append(words)
        sketches.append(sketch(f"p{index}", 1000 + index, " ".join(words)))
    return sketches


def test_verdicts_do_not_depend_on_batch_boundaries_under_crowded_keys(make_store: Callable[..., BandStore]) -> None:
    # A viral phrase quoted over and over: its band keys hold far more posts
    # than a key offers (max_candidates_per_band). A key still offers the same
    # newest posts whether they were stored by earlier batches or recorded
    # earlier in this one, so the verdicts, and the post each duplicate names,
    # are those of a replay one post at a time.
    rng = np.random.default_rng(3)
    vocabulary = [f"w{i}" for i in range(300)]
    stream = []
    for index in range(800):
        if rng.random() < 0.6:
            before = [str(w) for w in rng.choice(vocabulary, size=int(rng.integers(0, 4)))]
            after = [str(w) for w in rng.choice(vocabulary, size=int(rng.integers(0, 3)))]
            words = [*before, "our", "fleets", "on", "fleek", *after]
        else:
            words = [str(w) for w in rng.choice(vocabulary, size=int(rng.integers(4, 12)))]
        stream.append(sketch(f"p{index}", 1000 + index, " ".join(words)))
    named: dict[int, list[str | None]] = {}
    for batch_size in (1, 7, 64, 256, 800):
        store = make_store(index=f"-{batch_size}")
        named[batch_size] = []
        for start in range(0, len(stream), batch_size):
            batch = store.check_and_insert(stream[start : start + batch_size])
            named[batch_size].extend(None if match is None else match.duplicate_of for match in batch)
        store.close()
    assert all(named[batch_size] == named[1] for batch_size in named)
    assert 300 < named[1].count(None) < 700  # both kinds, and the crowded keys among them


def test_a_crowded_key_keeps_offering_its_oldest_posts(make_store: Callable[..., BandStore]) -> None:
    # Chaff filed under every key of an original pushes it out of each key's
    # newest places, never out of its oldest: the store still offers it.
    store = make_store(limit=4)
    shared_key = np.array([0x5EED5EED5EED5EED], dtype=np.uint64)

    def filed(post_id: str, timestamp: float, text: str) -> Sketch:
        words = sketch(post_id, timestamp, text).words + np.uint32(timestamp)  # words of its own
        shingles = verification_hashes(words, np.array([0, len(words)]), CONFIG.shingle_size)[0]
        return Sketch(post_id, timestamp, shared_key, shingles, words)

    assert store.check_and_insert([filed("original", 1000, "the original post about the harbour")]) == [None]
    chaff = [filed(f"chaff{n}", 1001 + n, f"unrelated chaff number {n} with other words") for n in range(12)]
    for start in range(0, 12, 5):  # in batches, so the stores' own look-ups do the offering
        assert store.check_and_insert(chaff[start : start + 5]) == [None] * len(chaff[start : start + 5])
    txn = store.begin()
    try:
        queries = txn.index_keys(shared_key)
        _, serials = txn.members(queries)
        offered = [post.post_id for serial in serials.tolist() if (post := txn.post(serial)) is not None]
    finally:
        txn.abort()
    assert offered == ["chaff11", "chaff10", "chaff9", "chaff8", "chaff0", "original"]  # newest four, oldest two


@pytest.mark.parametrize("largest", [10**6, 2**40 - 1, 2**45])  # the last past one sort key: lexsort
def test_hits_sort_by_query_then_newest_as_lexsort_does(largest: int) -> None:
    rng = np.random.default_rng(largest % 1000)
    query_of = rng.integers(0, 500, 5000).astype(np.int64)
    serial_of = rng.integers(1, largest, 5000, dtype=np.int64)
    order = np.lexsort((-serial_of, query_of))
    got = by_query_newest_first(query_of, serial_of)
    assert np.array_equal(got[0], query_of[order]) and np.array_equal(got[1], serial_of[order])
