"""The sync API's group commit: one-record calls share a transaction (streamfilter/_group.py)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from streamfilter import FilterConfig, LMDBStore, StreamFilter, Verdict, _group
from streamfilter._exceptions import ConfigError
from streamfilter.stores.lmdb._held import HeldPosts

from .conftest import distinct_text

_START = 1_600_000_000


def _records(count: int, seed: int = 5) -> list[dict[str, object]]:
    """Originals and their copies, as a campaign posts them: the same text
    with another mention and link, a word changed, cut short by "…", or with
    an emoji; in shuffled order, a second apart."""
    rng = random.Random(seed)
    texts = [distinct_text(seed * 10_000 + n, 14) for n in range(count // 4)]
    made = []
    for n in range(count):
        words = rng.choice(texts).split()
        way = rng.randrange(5)
        if way == 1:
            words[rng.randrange(len(words))] = f"changed{n}"
        elif way == 2:
            words = [*words[:9], "…"]
        elif way == 3:
            words.append("🎉🎉")
        made.append(f"@user{n} {' '.join(words)} https://t.co/x{n}")
    return [{"id": str(n), "text": text, "created_at": _START + n} for n, text in enumerate(made)]


def _seen(verdicts: Sequence[Verdict]) -> list[tuple[str, str | None]]:
    return [(verdict.kind.value, verdict.duplicate_of) for verdict in verdicts]


def test_one_record_calls_give_the_verdicts_of_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records(1200)
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "batch") as sf:
        batch = _seen(sf.check_many(records))
    assert 200 < sum(kind == "novel" for kind, _ in batch) < 1000
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "each", commit_within=0) as sf:
        assert _seen([sf.check(record) for record in records]) == batch
    monkeypatch.setattr(_group, "GROUP_LIMIT", 7)  # groups end every 7 calls, within one post's copies
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "grouped", commit_within=3599) as sf:
        assert _seen([sf.check(record) for record in records]) == batch


@pytest.mark.parametrize("way", ["bound", "python"])
def test_a_key_that_holds_more_posts_than_it_offers_offers_what_a_batch_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    # 40 novel posts that open with the same six words share their start
    # keys; copies cut after those words find, of them, what the key offers
    # (its oldest 2 and newest 8), whether the posts are stored, held by the
    # open group, or some of each; with_held as bound (compiled where built)
    # and its Python twin
    opening = distinct_text(1, 6)
    posts = [f"{opening} {distinct_text(100 + n, 12)}" for n in range(40)]
    texts = [*posts[:30], f"{opening} …", *posts[30:], f"{opening} …", f"{posts[15]} …"]
    records = [{"id": str(n), "text": text, "created_at": _START + n} for n, text in enumerate(texts)]
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "batch") as sf:
        batch = _seen(sf.check_many(records))
    assert sum(kind == "novel" for kind, _ in batch) >= 40
    filed_in = HeldPosts._py_with_held if way == "python" else HeldPosts.with_held
    longest: list[int] = []

    def with_held(self: HeldPosts, queries: Any, hits: Any) -> Any:
        held = [self._under.get(key, []) for key in queries.tolist()]
        longest.append(max(1 if isinstance(serials, int) else len(serials) for serials in held))
        return filed_in(self, queries, hits)

    monkeypatch.setattr(HeldPosts, "with_held", with_held)
    for limit in (1000, 25):  # every post held; the first 25 stored, the rest held
        monkeypatch.setattr(_group, "GROUP_LIMIT", limit)
        with StreamFilter(FilterConfig(seed=3), path=tmp_path / f"grouped{limit}", commit_within=3599) as sf:
            assert _seen([sf.check(record) for record in records]) == batch
    assert max(longest) > 10  # a key held more posts than it offers: they were cut


def test_calls_and_batches_taking_turns_see_each_other(tmp_path: Path) -> None:
    records = _records(400, seed=7)
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "batch") as sf:
        batch = _seen(sf.check_many(records))
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "turns", commit_within=3599) as sf:
        turns: list[tuple[str, str | None]] = []
        for at in range(0, len(records), 10):
            part = records[at : at + 10]
            turns += _seen(sf.check_many(part) if at % 20 else [sf.check(record) for record in part])
    assert turns == batch


def test_threads_calling_at_once_share_one_group(tmp_path: Path) -> None:
    texts = [distinct_text(n, 12) for n in range(60)]
    records = [{"id": f"{n}-{copy}", "text": text} for copy in range(4) for n, text in enumerate(texts)]
    random.Random(2).shuffle(records)
    novel: list[bool] = []
    with StreamFilter(path=tmp_path / "index", commit_within=3599) as sf:

        def work(part: list[dict[str, object]]) -> None:
            novel.extend(sf.is_novel(record) for record in part)

        threads = [threading.Thread(target=work, args=(records[n::4],)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        assert len(novel) == len(records)
        assert sum(novel) == len(texts)  # each text passed once, whichever thread had it first
        assert sf.forget("0-0", "0-1", "0-2", "0-3") == 1  # a write of another kind commits the group first


def test_a_crash_costs_only_the_open_groups_index_entries(tmp_path: Path) -> None:
    index = tmp_path / "index"
    flushed = [{"id": f"a{n}", "text": distinct_text(n, 10)} for n in range(50)]
    open_group = [{"id": f"b{n}", "text": distinct_text(1000 + n, 10)} for n in range(50)]
    child = """
import json, sys
from streamfilter import StreamFilter
flushed, open_group = json.loads(sys.argv[2]), json.loads(sys.argv[3])
with StreamFilter(path=sys.argv[1], commit_within=3599) as sf:
    assert all(sf.is_novel(record) for record in flushed)
    sf.flush()
    assert all(sf.is_novel(record) for record in open_group)
    print("judged", flush=True)
    sys.stdin.read()  # killed here, the second group still open
"""
    with subprocess.Popen(
        [sys.executable, "-c", child, str(index), json.dumps(flushed), json.dumps(open_group)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline() == b"judged\n"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
    with StreamFilter(path=index) as sf:
        copies = [{**record, "id": f"copy-{record['id']}"} for record in flushed + open_group]
        verdicts = sf.check_many(copies)
    # durable once flushed: their copies are duplicates; the killed group's
    # posts were passed once and never indexed, so their copies pass again
    assert [verdict.duplicate_of for verdict in verdicts[:50]] == [record["id"] for record in flushed]
    assert all(verdict.is_novel for verdict in verdicts[50:])


def test_a_group_commits_on_its_own_when_the_calls_stop(tmp_path: Path) -> None:
    index = tmp_path / "index"
    reader = """
import sys, lmdb
while True:  # until the post is committed, which the test waits for
    env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=4, subdir=True)
    with env.begin() as txn:
        posts = txn.stat(env.open_db(b"posts", txn=txn, create=False))["entries"]
    env.close()
    if posts:
        print(posts, flush=True)
        break
"""
    with StreamFilter(path=index, commit_within=0.2) as sf:
        assert sf.is_novel({"id": "1", "text": distinct_text(1)})
        # no call, flush or close: the group's own thread commits it
        found = subprocess.run([sys.executable, "-c", reader, str(index)], capture_output=True, timeout=120)
        assert found.stdout == b"1\n", found.stderr.decode()


def test_a_map_that_fills_within_a_group_loses_nothing(tmp_path: Path) -> None:
    records = _records(3000, seed=9)
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "batch") as sf:
        batch = _seen(sf.check_many(records))
    small = LMDBStore(tmp_path / "small", map_size=1 << 16)  # a few pages: it grows many times, mid-group too
    with StreamFilter(FilterConfig(seed=3), store=small, commit_within=3599) as sf:
        assert _seen([sf.check(record) for record in records]) == batch
        assert small.map_size() > 1 << 16
    with StreamFilter(FilterConfig(seed=3), path=tmp_path / "small") as sf:  # and all of it was written
        assert sf.stats(recount=True).index_posts == sum(kind == "novel" for kind, _ in batch)


@pytest.mark.parametrize("within", [-1, 3600, float("nan"), True, "1"])
def test_commit_within_takes_seconds_below_an_hour(within: object) -> None:
    with pytest.raises(ConfigError, match="commit_within"):
        StreamFilter(commit_within=within)  # type: ignore[arg-type]


def test_the_group_thread_ends_with_the_filter(tmp_path: Path) -> None:
    with StreamFilter(path=tmp_path / "index") as sf:
        sf.is_novel({"id": "1", "text": distinct_text(1)})
        assert any(thread.name == "streamfilter-group" for thread in threading.enumerate())
    assert not any(thread.name == "streamfilter-group" for thread in threading.enumerate())
    assert os.path.exists(tmp_path / "index" / "data.mdb")


def test_a_script_that_exits_without_closing_commits_its_last_group(tmp_path: Path) -> None:
    index = tmp_path / "index"
    script = """
import sys
from streamfilter import StreamFilter
sf = StreamFilter(path=sys.argv[1], commit_within=3599)
sf.open()
assert sf.is_novel({"id": "1", "text": sys.argv[2]})
"""  # no close, no flush: the interpreter's exit commits the group
    subprocess.run([sys.executable, "-c", script, str(index), distinct_text(1)], check=True, timeout=120)
    with StreamFilter(path=index) as sf:
        assert sf.check({"id": "2", "text": distinct_text(1)}).duplicate_of == "1"
