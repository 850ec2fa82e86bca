"""Every store gives the verdicts of the rules, read plainly.

The one batch judge (``streamfilter._judge``) ranks candidates with numpy for
a whole batch, over what each store's transaction finds. Here the rules are
applied as ``_rules`` words them, one post at a time over plain lists, with
none of that machinery; over generated streams, at several batch sizes,
every store must name the same post with the same similarity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamfilter import LMDBStore, _judge, _rules
from streamfilter._rules import EDIT_MAX_EDITS, CachedPost
from streamfilter._values import recorded_post
from streamfilter.stores import BandStore, IndexSettings, Match, Sketch
from streamfilter.stores._base import key_bytes
from streamfilter.stores.redis._layout import Layout

from ..conftest import python_rules
from .test_conformance import repost, settings, sketch

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


def _reference(stream: list[Sketch], rules: IndexSettings, batch_size: int, slices: bool = False) -> list[Match | None]:
    """The rules, one post at a time: each band key's newest and oldest posts
    the store still holds, ranked by keys shared then newest, verified in that
    order. A store drops expired posts after each batch of ``batch_size``: by
    purging (LMDB, memory: oldest serial first, while expired, at most
    ``purge_limit``), or with ``slices`` whole time slices a TTL old (Redis's
    ``Layout``); an expired post not yet dropped can hold one of a key's
    oldest places. In Python throughout: the stores' judge verifies with
    the compiled kernel."""
    with pytest.MonkeyPatch.context() as patch:
        python_rules(patch)
        return _reference_in_python(stream, rules, batch_size, slices)


def _reference_in_python(
    stream: list[Sketch], rules: IndexSettings, batch_size: int, slices: bool
) -> list[Match | None]:
    bands: dict[bytes, list[int]] = {}  # band key -> serials, oldest first
    posts: dict[int, tuple[CachedPost, list[bytes]]] = {}  # serial -> post, its band keys
    clock = float("-inf")
    layout = Layout.for_ttl(rules.ttl_seconds)
    first_slice = -math.inf  # with ``slices``: the oldest slice not dropped
    verdicts: list[Match | None] = []
    for judged in stream:
        clock = max(clock, judged.timestamp)
        after = _rules.horizon(clock, rules.ttl_seconds)
        keys = key_bytes(judged.band_keys)
        shared: dict[int, int] = {}
        for key in keys:
            held = [s for s in bands.get(key, []) if layout.slice_of(posts[s][0].timestamp) >= first_slice]
            for serial in _rules.offered_per_key(held, rules.max_candidates_per_band):
                shared[serial] = shared.get(serial, 0) + 1
        if judged.refers_to is not None:
            newest_first = [(s, posts[s][0]) for s in sorted(shared, reverse=True)]
            found = _rules.referenced(newest_first, judged.refers_to, after)
            verdicts.append(found[0] if found else None)
        else:
            own = recorded_post(judged)
            ranked = _rules.rank_candidates(shared)[: _rules.MAX_VERIFIED]
            candidates: list[CachedPost | None] = [posts[s][0] for s in ranked]
            found = _rules.best_match(
                ranked, candidates, judged, own, after, rules.jaccard_threshold, rules.shingle_size
            )
            verdicts.append(found[0] if found else None)
            if found is None:
                serial = len(verdicts)
                posts[serial] = (own, keys)
                for key in keys:
                    bands.setdefault(key, []).append(serial)
        if len(verdicts) % batch_size and len(verdicts) < len(stream):
            continue
        if slices:
            first_slice = layout.live_from(clock, rules.ttl_seconds)
            continue
        for serial in list(posts)[: rules.purge_limit]:  # purge, oldest first, while expired
            post, post_keys = posts[serial]
            if post.timestamp > after:
                break
            for key in post_keys:
                bands[key].remove(serial)
            del posts[serial]
    return verdicts


def _judged(store: BandStore, stream: list[Sketch], batch_size: int) -> list[Match | None]:
    verdicts: list[Match | None] = []
    for start in range(0, len(stream), batch_size):
        verdicts.extend(store.check_and_insert(stream[start : start + batch_size]))
    return verdicts


@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_every_store_names_the_reference_match(
    make_store: Callable[..., BandStore], store_kind: str, batch_size: int
) -> None:
    stream = _stream(900, seed=batch_size)
    expected = _reference(stream, settings(ttl=TTL, purge_limit=40), batch_size, slices=store_kind.startswith("redis"))
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


@pytest.mark.parametrize("batch_size", [1, 64])
def test_the_judge_without_the_kernel_names_the_reference_match(tmp_path: Path, batch_size: int) -> None:
    # where the kernel is not built, the judge ranks and verifies in Python
    stream = _stream(600, seed=100 + batch_size)
    expected = _reference(stream, settings(ttl=TTL, purge_limit=40), batch_size)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_judge, "_judge_candidates", _judge._py_judge_candidates)
        python_rules(patch)
        store = LMDBStore(tmp_path / "index")
        store.open(settings(ttl=TTL, purge_limit=40))
        try:
            assert _judged(store, stream, batch_size) == expected
        finally:
            store.close()


@pytest.mark.parametrize("batch_size", [7, 64])
def test_the_compiled_judge_keeps_what_the_python_loop_keeps(tmp_path: Path, batch_size: int) -> None:
    # the judgement of every batch, field by field: what each post matched
    # and under which serial, which posts were recorded, as which CachedPost,
    # and the clock; the kernel's loop against judge_batch's Python loop
    stream = _stream(700, seed=200 + batch_size)
    judged: dict[str, list[tuple[Sequence[Any], dict[int, int], list[int], object, float, int, int]]] = {
        "compiled": [],
        "python": [],
    }
    judge_batch = _judge.judge_batch

    def recording(txn, sketches, rules):  # type: ignore[no-untyped-def]
        judgement = judge_batch(txn, sketches, rules)
        posts = [(post.timestamp, post.post_id, post.words) for post in judgement.posts]
        judged[way].append(
            (
                judgement.matches,
                judgement.matched,
                judgement.recorded,
                posts,
                judgement.clock,
                judgement.first_serial,
                judgement.full_buckets,
            )
        )
        return judgement

    for way in judged:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_judge, "judge_batch", recording)
            if way == "python":
                # its loop, still verifying with the compiled best_match
                patch.setattr(_judge, "_judge_candidates", _judge._py_judge_candidates)
            store = LMDBStore(tmp_path / way)
            store.open(settings(ttl=TTL, purge_limit=40))
            try:
                _judged(store, stream, batch_size)
            finally:
                store.close()
    assert judged["compiled"] == judged["python"]
    recorded = sum(len(batch[2]) for batch in judged["python"])
    matched = sum(len(batch[1]) for batch in judged["python"])
    assert recorded > 200 and matched > 200  # both ways were taken often
