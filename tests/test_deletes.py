"""Platform deletes: a deleted post is forgotten, so a later copy of it is no longer its duplicate.

Run on every store (memory, LMDB on disk, a real Redis and a real 3-node Cluster),
through the library and the command line, with each platform's own delete notice.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamfilter import FilterConfig, LMDBStore, MemoryStore, RedisStore, StreamFilter
from streamfilter.stores import BandStore

from .conftest import replay_command, unique_prefix

TEXT = "limited offer: claim your free cruise tickets before friday at the harbour"
DID = "did:plc:abcdefghijklmnopqrstuvwx"


@pytest.fixture(params=["memory", "lmdb", "redis", "redis-cluster"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BandStore]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "lmdb":
        yield LMDBStore(tmp_path / "index")
    else:
        server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
        yield RedisStore(unique_prefix(server.url))


def bluesky(rkey: str, text: str | None, second: int, operation: str = "create") -> dict[str, Any]:
    commit: dict[str, Any] = {"operation": operation, "collection": "app.bsky.feed.post", "rkey": rkey}
    if text is not None:
        commit["record"] = {"$type": "app.bsky.feed.post", "text": text, "createdAt": "2026-07-04T14:38:00Z"}
    return {"did": DID, "time_us": 1783175880000000 + second * 1_000_000, "kind": "commit", "commit": commit}


def bluesky_repost(rkey: str, of: str, second: int) -> dict[str, Any]:
    record = {"$type": "app.bsky.feed.repost", "subject": {"uri": of, "cid": "x"}, "createdAt": "2026-07-04T14:38:00Z"}
    commit = {"operation": "create", "collection": "app.bsky.feed.repost", "rkey": rkey, "record": record}
    return {"did": DID, "time_us": 1783175880000000 + second * 1_000_000, "kind": "commit", "commit": commit}


def kinds(sf: StreamFilter, records: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    verdicts = [sf.check(record) for record in records]
    return [(verdict.kind.value, verdict.duplicate_of) for verdict in verdicts]


def test_a_deleted_post_no_longer_makes_its_copies_duplicates(store: BandStore) -> None:
    original = f"at://{DID}/app.bsky.feed.post/a1"
    with StreamFilter(FilterConfig(ttl_seconds=0), store=store) as sf:
        assert kinds(sf, [bluesky("a1", TEXT, 0), bluesky("a2", TEXT + "!", 1)]) == [
            ("novel", None),
            ("duplicate", original),
        ]
        assert kinds(sf, [bluesky("a1", None, 2, operation="delete")]) == [("skipped", None)]
        # the copy that comes after the delete is the one live post of that text now
        assert kinds(sf, [bluesky("a3", TEXT, 3), bluesky("a4", TEXT, 4)]) == [
            ("novel", None),
            ("duplicate", f"at://{DID}/app.bsky.feed.post/a3"),
        ]
        # a repost of the deleted post finds nothing to be a repost of
        assert (sf.check(bluesky_repost("r1", original, 5)).reason or "").startswith(
            "repost of a post not in the index"
        )
        assert sf.forget(original) == 0  # forgotten already: nothing more to forget


def test_ignoring_deletes_keeps_the_post(store: BandStore) -> None:
    with StreamFilter(FilterConfig(honour_deletes=False), store=store) as sf:
        kinds(sf, [bluesky("b1", TEXT, 0), bluesky("b1", None, 1, operation="delete")])
        assert kinds(sf, [bluesky("b2", TEXT, 2)]) == [("duplicate", f"at://{DID}/app.bsky.feed.post/b1")]


def test_forget_by_id_from_the_library(store: BandStore) -> None:
    with StreamFilter(store=store) as sf:
        sf.check({"id": "1", "text": TEXT, "created_at": "2024-05-01T00:00:00Z"})
        assert sf.forget("1", "no-such-post") == 1
        assert sf.check({"id": "2", "text": TEXT, "created_at": "2024-05-01T00:00:01Z"}).kind.value == "novel"


def test_a_delete_naming_an_id_that_is_not_unicode_forgets_nothing(store: BandStore) -> None:
    with StreamFilter(store=store) as sf:
        sf.check({"id": "1", "text": TEXT, "created_at": "2024-05-01T00:00:00Z"})
        assert sf.forget("\ud800", "1\udfff") == 0
        assert sf.check({"id": "2", "text": TEXT, "created_at": "2024-05-01T00:00:01Z"}).kind.value == "duplicate"


def test_the_cli_goes_on_past_a_delete_notice_of_a_lone_surrogate_id(tmp_path: Path) -> None:
    # JSON's \ud800 escape is valid JSON that no UTF-8 can hold; hashing such an id killed the process
    status = {"id_str": "11", "text": TEXT, "user": {"screen_name": "a"}}
    stream = tmp_path / "s.jsonl"
    stream.write_text(
        json.dumps(status)
        + "\n"
        + '{"delete": {"status": {"id_str": "\\ud800x"}}}\n'
        + json.dumps(dict(status, id_str="12"))
        + "\n"
    )
    verdicts = tmp_path / "verdicts.jsonl"
    command = replay_command(
        str(stream), "--db", str(tmp_path / "index"), "--verdicts", str(verdicts), "--out", "/dev/null"
    )
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    found = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert [v["verdict"] for v in found] == ["novel", "skipped", "duplicate"]
    assert found[1]["reason"] == "twitter status deleted: \ud800x"


@pytest.mark.parametrize(
    ("delete", "status"),
    [
        ({"delete": {"status": {"id": 11, "id_str": "11", "user_id": 5}}}, {"id_str": "11", "text": TEXT, "user": {}}),
        ({"event": "delete", "payload": "11"}, {"id": "11", "content": f"<p>{TEXT}</p>", "account": {"acct": "a"}}),
    ],
    ids=["twitter", "mastodon"],
)
def test_the_cli_honours_each_platforms_delete_notice_unless_told_to_ignore(
    tmp_path: Path, delete: dict[str, Any], status: dict[str, Any]
) -> None:
    copy = dict(status, id_str="12", id="12") if "id_str" in status else dict(status, id="12")
    stream = tmp_path / "s.jsonl"
    stream.write_text("".join(json.dumps(record) + "\n" for record in (status, delete, copy)))
    for deletes, expected in (("honour", "novel"), ("ignore", "duplicate")):
        verdicts = tmp_path / f"{deletes}.jsonl"
        command = replay_command(str(stream), "--deletes", deletes, "--verdicts", str(verdicts), "--out", "/dev/null")
        subprocess.run(command, check=True, capture_output=True, timeout=120)
        found = [json.loads(line) for line in verdicts.read_text().splitlines()]
        assert [v["verdict"] for v in found] == ["novel", "skipped", expected], deletes
        assert "deleted: 11" in found[1]["reason"]
