"""Every store gives the verdicts of the rules' reference, the memory store.

The rules (``streamfilter._rules``) are defined once; the LMDB store ranks
candidates with numpy for a whole batch, and Redis runs them in Lua. Over
generated streams, at several batch sizes, each store must name the same
post with the same similarity as the memory store judging one post at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies

from streamfilter import MemoryStore
from streamfilter._rules import (
    EDIT_MAX_EDITS,
    judged_similarity,
)
from streamfilter._shingle import verification_set
from streamfilter.stores import BandStore, Match, Sketch
from streamfilter.stores._records import encode_record
from streamfilter.stores.redis._scripts import rules_args, script

from .test_conformance import CONFIG, repost, settings, sketch

TTL = 400.0


def _stream(count: int, seed: int) -> list[Sketch]:
    """Originals, copies, word edits, cut-off copies, reposts and a viral
    phrase, partly out of time order, some old enough to expire."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(250)]
    texts: list[tuple[str, list[str]]] = []  # (post id, words) of every post with text
    stream: list[Sketch] = []
    for index in range(count):
        post_id = f"p{index}"
        timestamp = 1000.0 + index - float(rng.integers(0, 40))  # out of order within 40 s
        roll = rng.random()
        if texts and roll < 0.08:
            target = texts[int(rng.integers(len(texts)))][0]
            stream.append(repost(post_id, timestamp, target))
            continue
        if texts and roll < 0.5:
            words = list(texts[int(rng.integers(len(texts)))][1])
            for _ in range(int(rng.integers(0, EDIT_MAX_EDITS + 2))):  # 0 to 3 word edits
                words[int(rng.integers(len(words)))] = str(rng.choice(vocabulary))
            text = " ".join(words)
            if rng.random() < 0.3 and len(words) > 8:  # cut off by "…", as clients truncate
                text = " ".join(words[: int(rng.integers(6, len(words)))]) + "…"
        elif roll < 0.65:
            before = [str(w) for w in rng.choice(vocabulary, size=int(rng.integers(0, 3)))]
            words = [*before, "our", "fleets", "on", "fleek", "again", "today"]
            text = " ".join(words)
        else:
            words = [str(w) for w in rng.choice(vocabulary, size=int(rng.integers(4, 18)))]
            text = " ".join(words)
        texts.append((post_id, words))
        stream.append(sketch(post_id, timestamp, text))
    return stream


def _judged(store: BandStore, stream: list[Sketch], batch_size: int) -> list[Match | None]:
    verdicts: list[Match | None] = []
    for start in range(0, len(stream), batch_size):
        verdicts.extend(store.check_and_insert(stream[start : start + batch_size]))
    return verdicts


@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_every_store_names_the_reference_match(make_store: Callable[..., BandStore], batch_size: int) -> None:
    stream = _stream(900, seed=batch_size)
    reference = MemoryStore()
    reference.open(settings(ttl=TTL, purge_limit=40))
    expected = _judged(reference, stream, 1)
    got = _judged(make_store(ttl=TTL, purge_limit=40), stream, batch_size)
    mismatches = [
        (stream[index].post_id, e, g) for index, (e, g) in enumerate(zip(expected, got, strict=True)) if e != g
    ]
    assert mismatches == []
    kinds = {
        "novel": sum(m is None for m in expected),
        "exact": sum(m is not None and m.similarity == 1 for m in expected),
    }
    kinds["near"] = len(expected) - kinds["novel"] - kinds["exact"]
    assert min(kinds.values()) > 50, kinds  # the stream holds every kind of verdict


_WORDS = strategies.lists(strategies.sampled_from([f"w{i}" for i in range(12)]), min_size=1, max_size=14)


@pytest.mark.usefixtures("redis_server")
@hypothesis.settings(max_examples=300, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(
    pairs=strategies.lists(strategies.tuples(_WORDS, _WORDS, strategies.booleans()), min_size=1, max_size=20)
)
def test_lua_similarity_equals_the_rules(redis_server, pairs: list[tuple[list[str], list[str], bool]]) -> None:  # type: ignore[no-untyped-def]
    import redis

    client = redis.Redis.from_url(redis_server.url)
    try:
        args: list[bytes | str] = [*rules_args(CONFIG.jaccard_threshold, CONFIG.shingle_size)]
        expected = []
        for first, second, cut in pairs:
            post = sketch("a", 1.0, " ".join(first) + ("…" if cut else ""))
            other = sketch("b", 2.0, " ".join(second))
            post.cut_off = cut
            query = set(post.shingles.tolist())
            theirs = verification_set(other.words.tolist(), CONFIG.shingle_size)
            expected.append(
                judged_similarity(post, query, theirs, other.words, CONFIG.shingle_size, CONFIG.jaccard_threshold)
            )
            args += [
                encode_record(1.0, "a", post.words.astype("<u4").tobytes()),
                "1" if cut else "0",
                encode_record(2.0, "b", other.words.astype("<u4").tobytes()),
            ]
        reply = client.eval(script("similarity_check"), 0, *args)
    finally:
        client.close()
    assert [float(value) for value in reply] == expected


def test_the_scripts_take_the_rules_constants_as_arguments(redis_server) -> None:  # type: ignore[no-untyped-def]
    # two words changed in an eight-word post: Jaccard under the threshold,
    # which the word-edit rule raises to 1 - 2/8; with EDIT_MAX_EDITS passed as 0
    # the same script must leave it under
    import redis

    post = sketch("a", 1.0, "the bus to the airport left late today")
    other = sketch("b", 2.0, "the car to the airport went late today")
    pair: list[bytes | str] = [
        encode_record(1.0, "a", post.words.astype("<u4").tobytes()),
        "0",
        encode_record(2.0, "b", other.words.astype("<u4").tobytes()),
    ]
    default = rules_args(CONFIG.jaccard_threshold, CONFIG.shingle_size)
    no_edits = [*default[:5], "0", *default[6:]]  # EDIT_MAX_EDITS is the sixth
    client = redis.Redis.from_url(redis_server.url)
    try:
        with_rule, without_rule = (
            float(client.eval(script("similarity_check"), 0, *args, *pair)[0]) for args in (default, no_edits)
        )
    finally:
        client.close()
    assert with_rule == 1 - 2 / 8 >= CONFIG.jaccard_threshold
    assert without_rule < CONFIG.jaccard_threshold
    assert "CUT_OFF" not in script("batch") and "EDIT_MIN" not in script("batch")  # nothing spliced in
