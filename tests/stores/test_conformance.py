"""One suite, every store: the contract of check_and_insert."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import hypothesis
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import strategies

from streamfilter import (
    ConfigMismatchError,
    FilterConfig,
    LMDBStore,
    MemoryStore,
    StoreError,
    normalize,
)
from streamfilter._lsh import band_keys, id_keys
from streamfilter._minhash import MinHasher
from streamfilter._normalize import is_cut_off
from streamfilter._shingle import hash_words, shingles_of_words, verification_hashes
from streamfilter.stores import BandStore, IndexSettings, Match, Sketch
from streamfilter.stores._base import word_edits
from streamfilter.stores.redis import RedisStore

from ..conftest import distinct_text, unique_prefix

CONFIG = FilterConfig()
HASHER = MinHasher(CONFIG.num_perm, CONFIG.seed)


def rekey(word_seqs: Sequence[npt.NDArray[np.uint32]], post_ids: Sequence[str]) -> npt.NDArray[np.uint64]:
    offsets = np.zeros(len(word_seqs) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in word_seqs], out=offsets[1:])
    shingles = shingles_of_words(np.concatenate(word_seqs).astype(np.uint32), offsets, CONFIG.shingle_size)
    keys = band_keys(HASHER.signatures(shingles), CONFIG.bands or 0, CONFIG.rows or 0)
    return np.column_stack([keys, id_keys(post_ids, CONFIG.seed)])


def settings(ttl: float = 0, purge_limit: int = 1024, fingerprint: dict[str, Any] | None = None) -> IndexSettings:
    return IndexSettings(
        fingerprint=fingerprint or CONFIG.fingerprint(),
        jaccard_threshold=CONFIG.jaccard_threshold,
        ttl_seconds=ttl,
        rekey=rekey,
        purge_limit=purge_limit,
    )


def sketch(post_id: str, timestamp: float, text: str) -> Sketch:
    words, offsets = hash_words([normalize(text).split()], CONFIG.seed)
    shingles = shingles_of_words(words, offsets, CONFIG.shingle_size)
    keys = band_keys(HASHER.signatures(shingles), CONFIG.bands or 0, CONFIG.rows or 0)
    verified = verification_hashes(words, offsets, CONFIG.shingle_size)
    keys = np.append(keys[0], id_keys([post_id], CONFIG.seed))
    return Sketch(post_id, timestamp, keys, verified[0], words, cut_off=is_cut_off(text))


def repost(post_id: str, timestamp: float, reposted: str) -> Sketch:
    """A repost without text, judged by the post it reposts."""
    return Sketch(
        post_id,
        timestamp,
        id_keys([reposted], CONFIG.seed),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=np.uint32),
        refers_to=reposted,
    )


@pytest.fixture(params=["memory", "lmdb", "redis", "redis-cluster"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> Iterator[Callable[..., BandStore]]:
    opened: list[BandStore] = []
    url = ""
    if store_kind == "redis":
        url = unique_prefix(request.getfixturevalue("redis_server").url)
    elif store_kind == "redis-cluster":
        url = unique_prefix(request.getfixturevalue("redis_cluster").url)

    def make(ttl: float = 0, purge_limit: int = 1024, index: str = "") -> BandStore:
        """A store on the test's index, or on another one named ``index``."""
        store: BandStore
        if store_kind == "memory":
            store = MemoryStore()
        elif store_kind == "lmdb":
            store = LMDBStore(tmp_path / f"index{index}")
        else:
            store = RedisStore(url + index)
        store.open(settings(ttl, purge_limit))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


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
    # the original's middle words, not its start
    middle = _collides_with(sketch("b", 2, "and nobody from the crew told us why the fl…"), original)
    # the original's start, but only 5 words: too short to tell a copy from a common opening
    short = _collides_with(sketch("c", 3, "We waited four hours at th…"), original)
    # the same start without the "…": a post of its own, compared whole
    uncut = _collides_with(sketch("d", 4, "We waited four hours at the gate in denver and"), original)
    assert middle.cut_off and short.cut_off and not uncut.cut_off and len(short.words) == 5
    assert make_store().check_and_insert([original, middle, short, uncut]) == [None, None, None, None]


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


def test_lmdb_config_mismatch_names_the_settings(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index")
    store.open(settings())
    store.close()
    other = dict(CONFIG.fingerprint(), shingle_size=3, num_perm=64)
    with pytest.raises(ConfigMismatchError) as caught:
        LMDBStore(tmp_path / "index").open(settings(fingerprint=other))
    message = str(caught.value)
    assert "shingle_size: index has 2, requested 3" in message
    assert "num_perm: index has 32, requested 64" in message
    assert "open it with the stored settings" in message
    assert LMDBStore.read_fingerprint(tmp_path / "index") == CONFIG.fingerprint()


def test_lmdb_index_of_an_older_normaliser_asks_for_a_new_index(tmp_path: Path) -> None:
    fingerprint = CONFIG.fingerprint()
    older = dict(fingerprint, normalizer_version=int(fingerprint["normalizer_version"]) - 1)
    store = LMDBStore(tmp_path / "index")
    store.open(settings(fingerprint=older))
    store.close()
    with pytest.raises(ConfigMismatchError) as caught:
        LMDBStore(tmp_path / "index").open(settings())
    message = str(caught.value)
    assert "another version of streamfilter" in message and "use a new index" in message
    assert "open it with the stored settings" not in message  # no setting brings an old normaliser back


def test_lmdb_map_grows_when_full(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index", map_size=64 * 1024, durable=False)
    store.open(settings())
    initial = store.map_size()
    for batch in range(20):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", batch, f"post {batch} {i} words {batch * 1000 + i} more {i}") for i in range(200)]
        )
    assert store.post_count() == 4000
    assert store.map_size() > initial
    store.close()


def test_lmdb_unusable_path_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open LMDB index"):
        LMDBStore(blocker).open(settings())


def test_batch_without_posts_on_a_new_index(make_store: Callable[..., BandStore]) -> None:
    # a batch of only invalid lines still commits its progress; the clock has no value yet
    store = make_store(ttl=60)
    assert store.check_and_insert([], progress={"in.jsonl": 3}) == []
    assert store.progress() == {"in.jsonl": 3}


def _run_count(path: Path) -> int:
    import lmdb

    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=4)
    try:
        runs = env.open_db(b"runs", create=False)
        with env.begin() as txn:
            return int(txn.stat(runs)["entries"])
    finally:
        env.close()


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


def test_lmdb_runs_merge_and_the_oldest_post_still_matches(tmp_path: Path) -> None:
    # every batch writes a run; merging keeps a few, and merged runs still hold the first post
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    store.check_and_insert([sketch("first", 1, TEXT)])
    for batch in range(300):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", 2 + batch, f"post {batch} {i} about {batch * 7 + i}") for i in range(5)]
        )
    (match,) = store.check_and_insert([sketch("copy", 400, TEXT)])
    store.close()
    assert match is not None and match.duplicate_of == "first"
    assert _run_count(tmp_path / "index") <= 12  # 301 batches, log-structured


def test_lmdb_runs_of_purged_posts_are_dropped(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings(ttl=10))
    for batch in range(40):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", batch, f"post {batch} {i} about {batch * 7 + i}") for i in range(5)]
        )
    assert store.post_count() == 5 * 10  # timestamps 30..39 are live at clock 39
    store.check_and_insert([sketch("late", 10_000, "a much later post that expires every other")])
    assert store.post_count() == 1
    store.close()
    assert _run_count(tmp_path / "index") == 1


@pytest.mark.parametrize("variant", ["default", "merge-thread", "kept-runs"])
@pytest.mark.parametrize("batch_size", [1, 7, 256])
def test_lmdb_judges_like_the_memory_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_size: int, variant: str
) -> None:
    # same stream, same verdicts, whatever the batching: runs, merges and the
    # batch's own earlier posts agree with a store that looks up one post at a time.
    # With "merge-thread", every merge of more than 64 entries runs on the
    # store's merge thread, while later batches are judged. Runs are kept
    # decoded across batches, smaller ones as copies; "kept-runs" also keeps
    # every run of 4 KB or more in place in the map, while merges replace
    # them, purges drop them and the map, starting at 64 KB, grows several times.
    from streamfilter.stores import lmdb as lmdb_store

    map_size = 64 << 20
    reused: list[int] = []
    if variant != "default":
        monkeypatch.setattr(lmdb_store, "_INLINE_MERGED_ENTRIES", 64)
    if variant == "kept-runs":
        monkeypatch.setattr(lmdb_store, "_CACHED_RUN_BYTES", 4096)
        map_size = 64 << 10
        listed = lmdb_store._RunCache.listed

        def counted(cache: lmdb_store._RunCache, txn: object, db: object) -> list[object]:
            known = set(cache._runs)
            runs = listed(cache, txn, db)  # type: ignore[arg-type]
            reused.append(sum(run.db_key in known for run in runs))
            return runs  # type: ignore[return-value]

        monkeypatch.setattr(lmdb_store._RunCache, "listed", counted)
    stream = _mutated_stream(1500, seed=batch_size)
    verdicts: dict[str, list[bool]] = {}
    lmdb = LMDBStore(tmp_path / "index", durable=False, map_size=map_size)
    for name, store in (("memory", MemoryStore()), ("lmdb", lmdb)):
        store.open(settings(ttl=300, purge_limit=50))
        novel: list[bool] = []
        for start in range(0, len(stream), batch_size):
            novel.extend(match is None for match in store.check_and_insert(stream[start : start + batch_size]))
            if store is lmdb and variant == "kept-runs":
                lmdb._merger.settle()  # every merge due is made: runs large enough to keep, replaced often
        if store is lmdb:
            grown_to = lmdb._require_env().info()["map_size"]
        store.close()
        verdicts[name] = novel
    assert verdicts["lmdb"] == verdicts["memory"]
    assert 300 < sum(verdicts["lmdb"]) < 1200  # the stream holds both kinds
    if variant == "kept-runs":
        assert grown_to >= 4 * map_size and sum(reused) > 0  # the map grew, and kept runs were used


def test_lmdb_large_merges_run_on_the_merge_thread_and_keep_runs_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no batch merges runs into more than _INLINE_MERGED_ENTRIES entries; the
    # merge thread does, and the index still keeps a few runs that find every post
    from streamfilter.stores import lmdb as lmdb_store

    monkeypatch.setattr(lmdb_store, "_INLINE_MERGED_ENTRIES", 200)
    inline: list[int] = []
    original = lmdb_store._Batch._merge

    def counted(self: lmdb_store._Batch, older: bytes, newer: bytes, first_live: int) -> tuple[bytes, int] | None:
        merged = original(self, older, newer, first_live)
        inline.append(0 if merged is None else merged[1])
        return merged

    monkeypatch.setattr(lmdb_store._Batch, "_merge", counted)
    write_pending = lmdb_store._Batch._write_pending

    def counted_pending(
        self: lmdb_store._Batch, pending: lmdb_store._Run, newest: tuple[bytes, int] | None, first_live: int
    ) -> tuple[tuple[bytes, int], bool]:
        written, replaced = write_pending(self, pending, newest, first_live)
        if replaced:  # the batch's run merged with the newest
            inline.append(written[1])
        return written, replaced

    monkeypatch.setattr(lmdb_store._Batch, "_write_pending", counted_pending)
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    texts = [f"post {i} x{i * 31} y{i * 17} z{i * 13} about it" for i in range(1000)]
    for start in range(0, 1000, 5):
        batch = [sketch(f"a{i}", i, texts[i]) for i in range(start, start + 5)]
        assert store.check_and_insert(batch) == [None] * 5
    store._merger.settle()
    with store._require_env().begin() as txn:
        runs = int(txn.stat(store._runs)["entries"])
    matches = store.check_and_insert([sketch(f"copy{i}", 2000 + i, texts[i]) for i in range(0, 1000, 37)])
    store.close()
    assert inline and max(inline) <= 200  # batches merged small runs only
    assert runs <= 10  # 200 batches of 85 entries: the merge thread merged the rest
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(0, 1000, 37)]


def test_lmdb_map_grows_only_once_no_read_transaction_is_open(tmp_path: Path) -> None:
    # LMDB may resize a process's map only while none of its transactions is
    # open (py-lmdb invalidates them): the merge thread's read, open while a
    # batch grows the map, broke off a 10 M-post replay at 1 M posts
    import threading
    import time

    store = LMDBStore(tmp_path / "index", durable=False, map_size=1 << 20)
    store.open(settings())
    store.check_and_insert([sketch("first", 1, TEXT)])
    opened, seen = threading.Event(), []

    def read() -> None:
        with store._reading(buffers=True) as txn:
            opened.set()
            time.sleep(0.3)
            seen.append((int(txn.stat(store._posts)["entries"]), time.monotonic()))

    reader = threading.Thread(target=read)
    reader.start()
    opened.wait()
    store._grow(store._require_env(), 4 << 20)
    grown = time.monotonic()
    reader.join()
    (match,) = store.check_and_insert([sketch("copy", 2, TEXT)])
    store.close()
    assert seen and seen[0][0] == 1 and seen[0][1] <= grown  # the read finished first, unharmed
    assert match is not None and match.duplicate_of == "first"


def test_lmdb_merge_thread_error_is_raised_by_the_next_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a failed merge loses nothing: the next batch raises it before judging, and judged again it is novel
    from streamfilter.stores import lmdb as lmdb_store

    monkeypatch.setattr(lmdb_store, "_INLINE_MERGED_ENTRIES", 100)

    def broken(runs: list[object]) -> int | None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lmdb_store, "_merge_plan", broken)
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    for start in range(0, 40, 5):  # 85 entries a batch: the second batch wants a merge of 170
        store.check_and_insert(
            [sketch(f"a{i}", i, f"post {i} x{i * 31} y{i * 17} about it") for i in range(start, start + 5)]
        )
        store._merger.settle()
        if store._merger.error is not None:
            break
    last = [sketch("late", 100, "a post judged after the merge failed")]
    with pytest.raises(StoreError, match="merging runs of the LMDB index .* failed: .*No space left"):
        store.check_and_insert(last)
    assert store.check_and_insert(last) == [None]
    store.close()


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


def test_lmdb_index_of_the_old_layout_is_refused_by_name(tmp_path: Path) -> None:
    import lmdb

    env = lmdb.open(str(tmp_path / "index"), max_dbs=4)
    meta = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        txn.put(b"format", b"streamfilter-lmdb-5", db=meta)  # the layout before 40-bit keys
    env.close()
    with pytest.raises(
        StoreError,
        match="format streamfilter-lmdb-5, this streamfilter reads streamfilter-lmdb-6 and streamfilter-lmdb-7",
    ):
        LMDBStore(tmp_path / "index").open(settings())


def test_lmdb_runs_keyed_by_first_serial_alone_are_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # indexes written before run keys carried the writing transaction's id
    # keyed each run by its first serial alone: they go on judging, and their
    # runs merge with the new ones (and are never kept decoded: their keys
    # come back after a merge)
    import struct

    from streamfilter.stores import lmdb as lmdb_store

    monkeypatch.setattr(lmdb_store, "_CACHED_RUN_BYTES", 4096)
    monkeypatch.setattr(lmdb_store, "_INLINE_MERGED_ENTRIES", 64)
    new_style = lmdb_store._put_run

    def old_style(txn: object, db: object, value: bytes) -> bytes:
        db_key = struct.pack(">Q", struct.unpack_from("<Q", value)[0])
        txn.put(db_key, value, db=db)  # type: ignore[attr-defined]
        return db_key

    texts = [f"post {i} x{i * 31} y{i * 17} z{i * 13} w{i * 7} about it" for i in range(400)]
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    monkeypatch.setattr(lmdb_store, "_put_run", old_style)
    for start in range(0, 200, 10):
        assert store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(start, start + 10)]) == [None] * 10
        store._merger.settle()
    store.close()
    assert _run_count(tmp_path / "index") >= 1
    monkeypatch.setattr(lmdb_store, "_put_run", new_style)
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    for start in range(200, 400, 10):
        assert store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(start, start + 10)]) == [None] * 10
        store._merger.settle()
    matches = store.check_and_insert([sketch(f"copy{i}", 1000 + i, texts[i]) for i in range(0, 400, 7)])
    with store._require_env().begin() as txn:
        key_lengths = {len(key) for key in txn.cursor(store._runs).iternext(keys=True, values=False)}
    store.close()
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(0, 400, 7)]
    assert 16 in key_lengths  # runs written since carry the transaction's id


@pytest.mark.parametrize("variant", ["small-runs", "runs-with-own-filters", "kept-runs"])
def test_lmdb_runs_of_another_process_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    # each process keeps its own filter of the keys in the runs; runs written
    # (and merged) by another process must still be found. With
    # "runs-with-own-filters", every run of 32 entries or more (a batch of 10
    # posts has 170) is a large one, searched only for the keys its own bits
    # may hold. With "kept-runs", this process keeps runs of 4 KB or more
    # decoded across batches, while the other process merges them away.
    import subprocess
    import sys

    from streamfilter.stores import lmdb as lmdb_store

    if variant == "runs-with-own-filters":
        monkeypatch.setattr(lmdb_store, "_FILTERED_RUN", 32)
    if variant == "kept-runs":
        monkeypatch.setattr(lmdb_store, "_CACHED_RUN_BYTES", 4096)

    texts = [f"post {i} x{i * 31} y{i * 17} z{i * 13} w{i * 7} about it" for i in range(240)]
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    writer = (
        "import sys; from tests.stores.test_conformance import LMDBStore, settings, sketch\n"
        "store = LMDBStore(sys.argv[1], durable=False); store.open(settings())\n"
        "start = int(sys.argv[2])\n"
        "for i in range(start, start + 40, 10):\n"
        "    texts = [f'post {j} x{j * 31} y{j * 17} z{j * 13} w{j * 7} about it' for j in range(i, i + 10)]\n"
        "    assert store.check_and_insert([sketch(f'a{j}', j, t) for j, t in zip(range(i, i + 10), texts)]) == [None] * 10\n"
    )
    for start in range(0, 240, 40):  # alternate with another process, so merges combine runs of both
        if (start // 40) % 2:
            subprocess.run([sys.executable, "-c", writer, str(tmp_path / "index"), str(start)], check=True)
        else:
            for i in range(start, start + 40, 10):
                batch = [sketch(f"a{j}", j, texts[j]) for j in range(i, i + 10)]
                assert store.check_and_insert(batch) == [None] * 10
        # this process's view, after every round
        (match,) = store.check_and_insert([sketch(f"copy{start}", 1000 + start, texts[start + 39])])
        assert match is not None and match.duplicate_of == f"a{start + 39}"
    matches = store.check_and_insert([sketch(f"copy-{i}", 2000 + i, texts[i]) for i in range(240)])
    store.close()
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(240)]


def test_lmdb_run_masks_never_lose_a_key_of_a_live_large_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # The table that says which large runs may hold a key must hold every key
    # of every live large run, whatever came and went before: more large runs
    # than planes (shared planes), runs gone (stale planes, cleared later),
    # and a run larger than the table was sized for (the table built again).
    # A key it lost would be a duplicate let through.
    import numpy as np

    from streamfilter.stores import lmdb as lmdb_store

    monkeypatch.setattr(lmdb_store, "_FILTERED_RUN", 64)
    rng = np.random.default_rng(7)

    def run(first: int, entries: int) -> lmdb_store._Run:
        keys = rng.integers(0, 1 << lmdb_store._KEY_BITS, entries, dtype=np.uint64)
        return lmdb_store._decode_run(b"", lmdb_store._encode_run(keys, np.arange(entries, dtype=np.uint32), first))

    masks = lmdb_store._RunMasks()
    live: list[lmdb_store._Run] = []
    sizes = [64, 500, 3000, 20000] * 10 + [300_000]  # the last outgrows a table sized for the others
    for step, entries in enumerate(sizes):
        live.append(run(step * 1_000_000, entries))
        if step % 3 == 2:
            live.pop(int(rng.integers(0, len(live))))  # a run merged away or purged
        small = run(999_000_000 + step, 10)  # below _FILTERED_RUN: never in the table
        masks.sync([*live, small])
        assert masks.bit_of(small) is None
        for each in live:
            bit = masks.bit_of(each)
            assert bit is not None
            found = masks.masks(each.keys())
            assert found is not None and np.all(found & bit), f"step {step}: a key of a live run is missing"
    assert len(live) > lmdb_store._RunMasks.PLANES  # planes were shared
    # keys in no run pass for a run's plane about as often as its plane is set
    strangers = rng.integers(0, 1 << lmdb_store._KEY_BITS, 100_000, dtype=np.uint64)
    found = masks.masks(strangers)
    assert found is not None
    for each in live:
        bit = masks.bit_of(each)
        assert bit is not None
        assert np.count_nonzero(found & bit) / len(strangers) < 0.15
    masks.sync([])
    assert masks.masks(strangers) is None  # no large run left: the table is freed


@pytest.mark.parametrize("merges", ["inline", "merge-thread"])
def test_lmdb_large_run_purged_small_is_still_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merges: str
) -> None:
    # Large runs are in the run masks and small ones in the key filter's bits.
    # When purging makes a merge with a large run small, the merged run's keys
    # must go into the bits: the large run's were never there, and the posts
    # of it that are still live would never be found.
    from streamfilter.stores import lmdb as lmdb_store

    monkeypatch.setattr(lmdb_store, "_FILTERED_RUN", 600)
    if merges == "merge-thread":
        monkeypatch.setattr(lmdb_store, "_INLINE_MERGED_ENTRIES", 0)
    texts = [f"post {i} x{i * 31} y{i * 17} z{i * 13} w{i * 7} about it" for i in range(60)]
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings(ttl=55))
    # a large run: 40 posts, one a second, 17 keys each (680 entries)
    assert store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(40)]) == [None] * 40
    # at t=88 the posts up to t=33 are purged; two runs of 10 posts merge
    # (340 entries), then with the large one: 6 of its posts are left, 442 entries
    for start in (40, 50):
        assert store.check_and_insert([sketch(f"a{i}", 88, texts[i]) for i in range(start, start + 10)]) == [None] * 10
        store._merger.settle()
    with store._reading(buffers=True) as txn:
        sizes = [lmdb_store._decode_run(key, value).count for key, value in txn.cursor(db=store._runs)]
    assert sizes == [442]  # the large run is gone into a small one
    matches = store.check_and_insert([sketch(f"copy{i}", 88, texts[i]) for i in range(34, 60)])
    store.close()
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(34, 60)]


def test_lmdb_run_of_an_aborted_batch_does_not_hide_another_process_run(tmp_path: Path) -> None:
    # The key filter takes in the runs this process writes only once they commit:
    # after an aborted batch, another process writes its own run at the same
    # serials, with as many entries, and that run's keys must still be searched
    import subprocess
    import sys

    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    first = [sketch(f"a{i}", i, f"first batch post {i} x{i * 31} y{i * 17} about it") for i in range(10)]
    assert store.check_and_insert(first) == [None] * 10

    def fail(matches: list[Match | None]) -> None:
        raise RuntimeError("the verdicts could not be written")

    with pytest.raises(RuntimeError):
        store.check_and_insert([sketch("lost", 20, "an aborted post that no reader ever saw")], before_commit=fail)
    writer = (
        "import sys; from tests.stores.test_conformance import LMDBStore, settings, sketch\n"
        "store = LMDBStore(sys.argv[1], durable=False); store.open(settings())\n"
        "assert store.check_and_insert([sketch('other', 21, 'written by another process instead')]) == [None]\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path / "index")], check=True)
    (match,) = store.check_and_insert([sketch("copy", 22, "written by another process instead")])
    (again,) = store.check_and_insert([sketch("copy2", 23, "an aborted post that no reader ever saw")])
    store.close()
    assert match is not None and match.duplicate_of == "other"
    assert again is None


def test_lmdb_key_filter_at_its_size_cap_is_not_rebuilt_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # once the live keys outnumber the filter's capped bits, a rebuild must not repeat every batch
    from streamfilter.stores import lmdb as lmdb_store

    monkeypatch.setattr(lmdb_store, "_MAX_FILTER_BITS", 12)  # 4096 bits, outgrown by ~30 posts
    rebuilds: list[int] = []
    original = lmdb_store._KeyFilter._rebuild

    def counting(self: object, runs: list[object], live: int) -> None:
        rebuilds.append(live)
        original(self, runs, live)  # type: ignore[arg-type]

    monkeypatch.setattr(lmdb_store._KeyFilter, "_rebuild", counting)
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    for batch in range(60):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", batch, f"post {batch} {i} about {batch * 7 + i}") for i in range(20)]
        )
    (match,) = store.check_and_insert([sketch("copy", 100, "post 3 4 about 25")])
    store.close()
    assert match is not None and match.duplicate_of == "3-4"
    assert len(rebuilds) < 20


BLUESKY_POST = "at://did:plc:dclwtltrt2ggsryagfzk7dp4/app.bsky.feed.post/3mptbyoeyc22k"


# Bluesky post URIs and near misses (letters outside base32, other lengths and
# collections, empty and long record keys), other text ids, decimal ids.
@hypothesis.settings(max_examples=500, deadline=None)
@hypothesis.given(
    strategies.one_of(
        strategies.builds(
            lambda letters, collection, rkey: f"at://did:plc:{letters}{collection}{rkey}",
            strategies.text("abcdefghijklmnopqrstuvwxyz234567018ABZ", min_size=22, max_size=26),
            strategies.sampled_from(["/app.bsky.feed.post/", "/app.bsky.feed.repost/", "/app.bsky.feed.post"]),
            strategies.text(max_size=300),
        ),
        strategies.text(max_size=300),
        strategies.integers(0, 10**20).map(str),
    )
)
@hypothesis.example(BLUESKY_POST)
@hypothesis.example(BLUESKY_POST.replace("dclwtl", "DCLWTL"))  # base32 either way, but not the same text
@hypothesis.example(BLUESKY_POST.replace("dclwtl", "dc1wtl"))  # not base32
@hypothesis.example(BLUESKY_POST.rsplit("/", 1)[0] + "/")  # no record key
@hypothesis.example(BLUESKY_POST + "é" * 200)  # a record key longer than a byte can count
def test_lmdb_records_give_back_every_id(post_id: str) -> None:
    from streamfilter.stores.lmdb import _decode_record, _encode_record

    try:
        post_id.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates: no record holds them
    hashes = np.arange(5, dtype="<u4").tobytes()
    for packed in (True, False):  # a new index; a format-6 index
        timestamp, decoded, words = _decode_record(_encode_record(1.5, post_id, hashes, packed), packed)
        assert (timestamp, decoded, bytes(words)) == (1.5, post_id, hashes)


def test_lmdb_packs_bluesky_post_uris_in_new_indexes_only(tmp_path: Path) -> None:
    import json

    import lmdb

    from streamfilter.stores import lmdb as lmdb_store

    text, other = distinct_text(1, 12), distinct_text(2, 12)
    long_id = "x" * 253  # a length the record's marker once gave, and format 6 still does

    def shortest_record(path: Path) -> int:
        with lmdb.open(str(path), max_dbs=4, readonly=True, lock=False) as env:
            with env.begin(db=env.open_db(b"posts", create=False)) as txn:
                return min(len(value) for _, value in txn.cursor())

    old = tmp_path / "format-6"
    env = lmdb.open(str(old), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:  # as the code before format 7 left it
        txn.put(b"format", b"streamfilter-lmdb-6")
        txn.put(b"config", json.dumps(CONFIG.fingerprint(), sort_keys=True).encode())
    env.close()
    for path in (tmp_path / "new", old):
        store = LMDBStore(path)
        store.open(settings())
        assert store.check_and_insert([sketch(BLUESKY_POST, 1, text), sketch(long_id, 2, other)]) == [
            None,
            None,
        ]
        store.close()
        store = LMDBStore(path)  # read back from the file, not from the cache
        store.open(settings())
        again = store.check_and_insert([sketch("p1", 3, text), sketch("p2", 4, other)])
        assert [match.duplicate_of if match else None for match in again] == [BLUESKY_POST, long_id]
        store.close()
    words = len(sketch(BLUESKY_POST, 1, text).words) * 4
    # packed: 15 bytes of did:plc, the key's length and the key; format 6 keeps the text, as older code reads it
    assert shortest_record(tmp_path / "new") == 9 + 16 + 13 + words
    assert shortest_record(old) == 9 + len(BLUESKY_POST) + words
    with lmdb.open(str(old), max_dbs=4, readonly=True, lock=False) as env:
        with env.begin(db=env.open_db(b"meta", create=False)) as txn:
            assert txn.get(b"format") == b"streamfilter-lmdb-6"
    assert lmdb_store._FORMAT == b"streamfilter-lmdb-7"
