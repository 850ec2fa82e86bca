from __future__ import annotations

import gc
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamfilter import (
    Chunks,
    FilterConfig,
    LMDBStore,
    MemoryStore,
    RetweetPolicy,
    StreamFilter,
    StreamFilterError,
    VerdictKind,
)
from tests.conftest import FIXTURES

from .conftest import distinct_text

pytestmark = pytest.mark.anyio

CAMPAIGN = [json.loads(line) for line in (FIXTURES / "campaign.jsonl").read_text().splitlines()]
EXPECTED = [json.loads(line) for line in (FIXTURES / "campaign.expected.jsonl").read_text().splitlines()]
EXPECTED_NOVEL = [e["id"] for e in EXPECTED if e["verdict"] == "novel"]


async def network_like(records: list[dict[str, Any]], delay: float = 0.003) -> AsyncGenerator[dict[str, Any], None]:
    """Yields records over time, the way a streaming API does."""
    for record in records:
        await anyio.sleep(delay)
        yield record


async def test_async_filter_yields_novel_posts_in_order(tmp_path: Path) -> None:
    async with StreamFilter(path=tmp_path / "index") as sf:
        novel = [post.id async for post in sf.filter(network_like(CAMPAIGN))]
    assert novel == EXPECTED_NOVEL


async def test_async_judge_matches_expected_verdicts_with_sync_source() -> None:
    async with StreamFilter() as sf:
        verdicts = [v async for v in sf.judge(iter(CAMPAIGN))]
    assert [(v.post_id, v.kind.value, v.duplicate_of) for v in verdicts] == [
        (e["id"], e["verdict"], e["duplicate_of"]) for e in EXPECTED
    ]


async def test_trickle_is_flushed_on_time_not_held_for_a_full_batch() -> None:
    # A source that sends one post and then waits: the post must come out
    # before the source sends anything else.
    arrived = anyio.Event()
    release = anyio.Event()

    async def source() -> AsyncGenerator[dict[str, str], None]:
        yield {"id": "1", "text": "first post of a slow stream"}
        await release.wait()
        yield {"id": "2", "text": "an unrelated reply arrives much later"}

    async with StreamFilter(FilterConfig(batch_size=1000, max_delay=0.01)) as sf:
        seen = []
        with anyio.fail_after(5):
            async for post in sf.filter(source()):
                seen.append(post.id)
                if post.id == "1":
                    arrived.set()
                    release.set()
    assert arrived.is_set() and seen == ["1", "2"]


async def test_a_post_that_finds_the_filter_idle_is_judged_at_once() -> None:
    # A live source's post does not wait for others to fill its batch, even
    # with a long max_delay (that applies to replayed files).
    release = anyio.Event()

    async def source() -> AsyncGenerator[dict[str, str], None]:
        yield {"id": "1", "text": "first post of a slow stream"}
        await release.wait()

    async with StreamFilter(FilterConfig(batch_size=1000, max_delay=60)) as sf:
        with anyio.fail_after(5):
            async with aclosing(sf.filter(source())) as novel:
                async for post in novel:
                    assert post.id == "1"
                    release.set()


async def test_a_live_stream_makes_the_collectors_full_pass_before_its_first_post() -> None:
    # CPython's first full collection comes a few seconds into a stream,
    # whatever the heap holds, and stalls every post behind it for tens of
    # ms; the filter makes it before it reads a record, where nothing waits
    full_passes = []

    async def source() -> AsyncGenerator[dict[str, str], None]:
        full_passes.append(gc.get_stats()[2]["collections"])
        yield {"id": "1", "text": "the first post of a live stream"}

    before = gc.get_stats()[2]["collections"]
    async with StreamFilter() as sf:
        verdicts = [verdict async for verdict in sf.judge(source())]
    assert [verdict.kind for verdict in verdicts] == [VerdictKind.NOVEL]
    assert full_passes[0] > before


async def test_a_burst_is_judged_in_full_batches() -> None:
    # Posts that arrive together (no wait between them) share batches, so a
    # backlog is judged at full speed rather than one post per transaction.
    async def burst() -> AsyncGenerator[dict[str, str], None]:
        for i in range(600):
            yield {"id": str(i), "text": distinct_text(i)}

    async with StreamFilter(FilterConfig(batch_size=256), store=MemoryStore()) as sf:
        sizes = [len(verdicts) async for verdicts in sf.judge_batches(burst())]
    assert sizes == [256, 256, 88]


async def test_closing_early_leaves_the_store_open_and_consistent(tmp_path: Path) -> None:
    async with StreamFilter(path=tmp_path / "index") as sf:
        stream = sf.filter(network_like(CAMPAIGN, 0.001))
        async for _ in stream:
            break
        await stream.aclose()
        # the same filter keeps working; what was indexed before still counts
        again = [v async for v in sf.judge([CAMPAIGN[0]])]
        assert again[0].kind is VerdictKind.DUPLICATE


async def test_cancellation_mid_stream_keeps_the_filter_usable() -> None:
    async with StreamFilter() as sf:
        with anyio.move_on_after(0.05):
            async for _ in sf.filter(network_like(CAMPAIGN * 10, 0.002)):
                pass
        verdicts = [v async for v in sf.judge([{"id": "new", "text": "a brand new post after the cancel"}])]
        assert verdicts[0].is_novel


async def test_source_errors_reach_the_consumer_after_the_posts_before_them() -> None:
    # The posts a source yielded before it broke are judged and passed on
    # first: a caller that reconnects after the last post it saw loses none.
    async def broken() -> AsyncGenerator[dict[str, str], None]:
        yield {"id": "1", "text": "fine"}
        yield {"id": "2", "text": "another post that came in the same burst"}
        raise ConnectionError("stream dropped")

    seen = []
    async with StreamFilter() as sf:
        with pytest.raises(ConnectionError, match="stream dropped"):
            async for post in sf.filter(broken()):
                seen.append(post.id)
    assert seen == ["1", "2"]


@pytest.mark.parametrize(
    ("policy", "kinds"),
    [
        (RetweetPolicy.CONTENT, ["novel", "duplicate", "novel", "duplicate"]),
        (RetweetPolicy.DROP, ["novel", "retweet", "retweet", "retweet"]),
        (RetweetPolicy.KEEP, ["novel", "novel", "novel", "novel"]),
    ],
)
async def test_retweet_policies(policy: RetweetPolicy, kinds: list[str]) -> None:
    original = "The museum opens a new wing for modern art this weekend, free entry"
    unseen = "Tickets for the harbour festival go on sale at noon on Friday"
    records = [
        {"id_str": "1", "text": original, "user": {}},
        {"id_str": "2", "text": "RT @museum: " + original},  # manual retweet
        {
            "id_str": "3",
            "text": "RT @fest: " + unseen[:30] + "…",
            "retweeted_status": {"id_str": "9", "text": unseen},
        },
        {
            "id_str": "4",
            "text": "RT @fest: " + unseen[:30] + "…",
            "retweeted_status": {"id_str": "9", "text": unseen},
        },
    ]
    async with StreamFilter(FilterConfig(retweet_policy=policy)) as sf:
        verdicts = [v async for v in sf.judge(records)]
    assert [v.kind.value for v in verdicts] == kinds
    if policy is RetweetPolicy.KEEP:
        # kept retweets are never indexed: a later original copy of their text is still novel
        async with StreamFilter(FilterConfig(retweet_policy=policy), store=MemoryStore()) as sf:
            verdicts = [v async for v in sf.judge(records[2:] + [{"id_str": "5", "text": unseen, "user": {}}])]
        assert verdicts[-1].is_novel


def test_sync_api_wraps_the_same_core(tmp_path: Path) -> None:
    # TTL 0: the untimed posts below move the clock to the wall clock, which
    # would otherwise expire the 2012 campaign
    forever = FilterConfig(ttl_seconds=0)
    with StreamFilter(forever, path=tmp_path / "index") as sf:
        verdicts = [sf.check(record) for record in CAMPAIGN]
        assert [v.kind.value for v in verdicts] == [e["verdict"] for e in EXPECTED]
        assert sf.is_novel({"text": "an entirely new sentence about trains"})
        assert not sf.is_novel({"text": "An entirely NEW sentence about trains!!"})
        with pytest.raises(StreamFilterError, match="check_many"):
            sf.check(json.loads((FIXTURES / "twitter_v2_brexit.jsonl").read_text()))

    # reopening the index keeps what the sync API recorded
    async def reopen() -> list[str]:
        async with StreamFilter(forever, path=tmp_path / "index") as sf:
            return [v.kind.value async for v in sf.judge([CAMPAIGN[0]])]

    assert anyio.run(reopen) == ["duplicate"]


def test_a_post_keeps_its_record_as_it_arrived() -> None:
    line = b'{"id": "7", "text": "seat 14C has no power outlet and the screen is dead"}'
    parsed = {"id": "8", "text": "the lounge in terminal B closes before the last departure"}
    with StreamFilter() as sf:
        from_line, from_dict, from_text = sf.check_many([line, parsed, "a plain text post about delays"])
    assert from_line.post is not None and from_line.post.raw == line
    assert from_dict.post is not None and from_dict.post.raw is parsed
    assert from_text.post is not None and from_text.post.raw == "a plain text post about delays"


def test_filter_not_opened_is_a_clear_error() -> None:
    sf = StreamFilter()
    with pytest.raises(StreamFilterError, match="not open"):
        sf.check({"text": "x"})
    sf.close()


texts = st.sampled_from(
    [
        "win a free cruise today click the link",
        "WIN a free cruise TODAY!! click the link",
        "the bus was late again this morning",
        "the bus was late again this morning 😡",
        "new phone who dis",
        "lunch at the new ramen place was great",
        "Lunch at the new ramen place was GREAT #foodie",
        "😂😂",
        "",
    ]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(texts, max_size=30), st.integers(1, 7))
def test_batched_verdicts_equal_one_at_a_time(posts: list[str], batch_size: int) -> None:
    records = [{"id": str(i), "text": text} for i, text in enumerate(posts)]
    with StreamFilter(store=MemoryStore()) as one:
        single = [one.check(record).kind for record in records]
    with StreamFilter(store=MemoryStore()) as many:
        batched: list[VerdictKind] = []
        for start in range(0, len(records), batch_size):
            batched.extend(v.kind for v in many.check_many(records[start : start + batch_size]))
    assert batched == single


@settings(max_examples=30, deadline=None)
@given(texts.filter(bool))
def test_a_post_is_a_duplicate_of_itself(text: str) -> None:
    with StreamFilter(store=MemoryStore()) as sf:
        assert sf.check({"id": "a", "text": text}).is_novel
        second = sf.check({"id": "b", "text": text})
    assert second.kind is VerdictKind.DUPLICATE and second.duplicate_of == "a"


async def test_endless_source_is_held_back_by_a_slow_consumer() -> None:
    produced = 0

    async def endless() -> AsyncGenerator[dict[str, str], None]:
        nonlocal produced
        while True:
            produced += 1
            yield {"id": str(produced), "text": distinct_text(produced)}

    consumed = 0
    async with StreamFilter(FilterConfig(batch_size=8), store=MemoryStore()) as sf:
        async with aclosing(sf.filter(endless())) as novel:
            async for _ in novel:
                consumed += 1
                await anyio.sleep(0.002)
                if consumed == 100:
                    break
    # bounded buffers between the stages: the source ran only a few batches ahead
    assert produced - consumed < 120


async def test_eight_tasks_share_one_filter(tmp_path: Path) -> None:
    texts = [distinct_text(i) for i in range(60)]
    passed: list[str] = []

    async def worker(n: int, sf: StreamFilter) -> None:
        copies = [{"id": f"{n}-{i}", "text": f"@fan{n} {text} http://t.co/{n}{i}"} for i, text in enumerate(texts)]
        copies = copies[n * 7 % 60 :] + copies[: n * 7 % 60]  # every task in its own order
        async for post in sf.filter(network_like(copies, 0.0005)):
            passed.append(post.text.split(" ", 1)[1].rsplit(" ", 1)[0])

    async with StreamFilter(FilterConfig(batch_size=4), path=tmp_path / "index") as sf:
        async with anyio.create_task_group() as tasks:
            for n in range(8):
                tasks.start_soon(worker, n, sf)
    assert sorted(passed) == sorted(texts)  # each campaign text exactly once across the 8 tasks


def test_a_batch_larger_than_the_post_cache_still_finds_its_own_early_posts(tmp_path: Path) -> None:
    # 9,000 distinct posts push the first ones out of the store's cache of
    # recent posts (8,192) before the batch ends; copies of them at the end
    # must still find them, written to the index or not.
    posts = [{"id": str(i), "text": distinct_text(i, 9)} for i in range(9000)]
    copies = [{"id": f"copy-{i}", "text": f"@someone {posts[i]['text']} http://t.co/x{i}"} for i in (0, 1, 2)]
    with StreamFilter(FilterConfig(batch_size=10_000, ttl_seconds=0), path=tmp_path / "index") as sf:
        verdicts = sf.check_many(posts + copies)
    assert [(v.kind, v.duplicate_of) for v in verdicts[-3:]] == [(VerdictKind.DUPLICATE, str(i)) for i in (0, 1, 2)]
    assert sum(v.is_novel for v in verdicts) == 9000


async def test_a_nested_async_with_leaves_the_filter_open_until_the_outer_block_ends() -> None:
    sf = StreamFilter()
    async with sf:
        async with sf:
            first = [v.kind.value async for v in sf.judge([{"id": "1", "text": "nested blocks share one index"}])]
        again = [v.kind.value async for v in sf.judge([{"id": "2", "text": "nested blocks share one index"}])]
    assert first == ["novel"] and again == ["duplicate"]
    with pytest.raises(StreamFilterError, match="not open"):
        sf.check({"id": "3", "text": "closed now"})


def test_a_temporary_index_is_removed_on_every_close_even_after_reopening() -> None:
    sf = StreamFilter()
    with sf:
        assert isinstance(sf.store, LMDBStore)
        directory = sf.store.path
        sf.check({"id": "1", "text": "in a temporary index"})
    assert not directory.exists()
    with sf:
        assert sf.check({"id": "1", "text": "in a temporary index"}).kind.value == "novel"  # a new, empty index
    assert not directory.exists()


def test_is_novel_on_an_invalid_record_is_false_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    with StreamFilter(store=MemoryStore()) as sf, caplog.at_level("WARNING", logger="streamfilter"):
        assert sf.is_novel({"id": "1"}) is False
    assert "is invalid: no text field" in caplog.text


async def test_a_replayed_file_is_judged_from_an_eighth_of_a_batch_on(tmp_path: Path) -> None:
    # A file's lines all wait at once; judging starts on a small first batch
    # while the next is sketched, and batches double up to batch_size.
    lines = [distinct_text(i).encode() for i in range(3000)]

    async def chunks() -> AsyncGenerator[list[Any] | int, None]:
        yield lines

    sizes = []
    async with StreamFilter(FilterConfig(batch_size=1024), path=tmp_path / "index") as sf:
        async with aclosing(sf.judge_batches(Chunks(chunks()))) as batches:
            async for verdicts in batches:
                sizes.append(len(verdicts))
    assert sizes == [128, 256, 512, 1024, 1024, 56]
