from __future__ import annotations

import json

import pytest

from streamfilter.adapters import record_adapter
from tests.conftest import FIXTURES, shared_payload

adapter = record_adapter()


def test_v1_search_page_and_retweets_from_real_payload() -> None:
    page = json.loads(shared_payload("twitter_v1/get_search_raw.json").read_text())
    posts = adapter.adapt(page)
    assert len(posts) == 100
    retweets = [p for p in posts if p.is_retweet]
    assert len(retweets) == 74
    first = posts[0]
    status = page["statuses"][0]
    # a retweet is judged on the retweeted status's own text
    assert first.retweet_of == status["retweeted_status"]["id_str"]
    assert first.text == status["retweeted_status"]["text"]
    assert first.id == status["id_str"]
    assert first.timestamp == pytest.approx(1453580385.0)  # Sat Jan 23 20:19:45 +0000 2016


def test_v1_quote_tweet_is_not_a_retweet() -> None:
    status = json.loads(shared_payload("twitter_v1/models/status_quoted_tweet.json").read_text())
    (post,) = adapter.adapt(status)
    assert not post.is_retweet
    assert post.text == status.get("full_text", status.get("text"))


def test_v1_extended_tweet_full_text_wins() -> None:
    status = json.loads(shared_payload("twitter_v1/streaming/streaming_extended_tweet.json").read_text())
    (post,) = adapter.adapt(status)
    assert post.text == status["extended_tweet"]["full_text"]
    assert len(post.text) > len(status["text"]) - 30


def test_v1_full_text_in_extended_mode() -> None:
    status = json.loads(shared_payload("twitter_v1/3.2/extended_tweet_in_extended_mode.json").read_text())
    (post,) = adapter.adapt(status)
    assert post.text == status["full_text"]


def test_v2_page_resolves_retweet_text_from_includes() -> None:
    line = shared_payload("twitter_v2/brexit.jsonl").read_bytes().splitlines()[0]
    page = json.loads(line)
    posts = adapter.adapt(line)
    assert len(posts) == len(page["data"]) == 100
    included = {t["id"]: t for t in page["includes"]["tweets"]}
    retweet = next(p for p in posts if p.is_retweet and p.retweet_of in included)
    assert retweet.text == included[retweet.retweet_of]["text"]
    assert not retweet.text.startswith("RT @")
    assert posts[0].timestamp is not None


def test_v2_flat_lines_and_quotes() -> None:
    lines = shared_payload("twitter_v2/flat.jsonl").read_bytes().splitlines()
    posts = [p for line in lines for p in adapter.adapt(line)]
    assert len(posts) == 100
    records = [json.loads(line) for line in lines]
    for post, record in zip(posts, records, strict=True):
        kinds = {r.get("type") for r in record.get("referenced_tweets", [])}
        assert post.is_retweet == ("retweeted" in kinds or record["text"].startswith("RT @"))
        if "quoted" in kinds and "retweeted" not in kinds:
            assert post.text == record["text"]


def test_v2_single_tweet_stream_line() -> None:
    line = (FIXTURES / "twitter_v2_stream.jsonl").read_bytes().splitlines()[0]
    (post,) = adapter.adapt(line)
    assert post.id == json.loads(line)["data"]["id"]


def test_twitter_format_rejects_other_json() -> None:
    from streamfilter import InvalidRecordError

    with pytest.raises(InvalidRecordError, match="not a Twitter"):
        record_adapter("twitter").adapt({"body": "hello"})


def test_every_adapter_names_the_author() -> None:
    from streamfilter.adapters import record_adapter

    adapter = record_adapter()
    expected = {
        "twitter_v1_search.jsonl": "alfonsohoops",
        "twitter_v2_brexit.jsonl": "WarmongerHodges",  # the username from includes.users
        "twitter_v2_stream.jsonl": "2828727288",  # no includes: the author_id
        "mastodon_hashtag.jsonl": "laborjournal@mstdn.science",
        "campaign.jsonl": "user1",
    }
    for name, author in expected.items():
        line = (FIXTURES / name).read_bytes().splitlines()[0]
        assert adapter.adapt(line)[0].author == author, name
    bluesky = [
        line
        for line in (FIXTURES / "bluesky_jetstream.jsonl").read_bytes().splitlines()
        if b'"app.bsky.feed.post"' in line and b'"create"' in line
    ][0]
    assert adapter.adapt(bluesky)[0].author.startswith("did:plc:")  # type: ignore[union-attr]
    assert adapter.adapt(b'{"id": 1, "text": "hello", "author": {"username": "ann"}}')[0].author == "ann"
