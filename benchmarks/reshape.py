"""The labelled stream in another platform's shape, built on its real payloads.

    python benchmarks/reshape.py benchmarks/out/stream.jsonl --as mastodon --out benchmarks/out/stream_mastodon.jsonl
    python benchmarks/reshape.py benchmarks/out/stream.jsonl --as bluesky --out benchmarks/out/stream_bluesky.jsonl \
        --labels benchmarks/out/labels.jsonl --labels-out benchmarks/out/labels_bluesky.jsonl
    python benchmarks/reshape.py benchmarks/out/stream.jsonl --as twitter-v2-pages --out benchmarks/out/stream_v2_pages.jsonl

Reads the Twitter v1.1 statuses that ``make_stream.py`` writes and writes the
same posts, in the same order, so the same labels score the verdicts
(``score.py``, ``bench.py`` with streamfilter alone). A Bluesky post's id is
its ``at://`` URI, so for Bluesky ``--labels`` and ``--labels-out`` write the
labels again under those ids; the other shapes keep the ids. Each
record is a copy of a real payload from ../shared/data/payloads (read in
place) with the post's fields set:

- mastodon: a status of ``rtoot_examples.statuses.json``; the text becomes
  its HTML ``content`` (escaped, a paragraph, line breaks as ``<br />``,
  mentions, hashtags and links marked up as Mastodon writes them, a link's
  scheme hidden); an API retweet is a status whose ``reblog`` is the
  original, with its text.
- bluesky: a Jetstream ``app.bsky.feed.post`` commit event; an API retweet
  becomes a post with the original's text (a Bluesky repost carries no text,
  only the reposted post's URI, so it could not be judged by its text).
- twitter-v2-pages: response pages of 100 tweets with the ``includes`` of a
  real page (users, tweets, media, polls: about 350 KB a line); an API
  retweet is a tweet with ``referenced_tweets`` of type ``retweeted``, its
  truncated ``RT @user: …`` text, and the original in ``includes.tweets``.
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PAYLOADS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "payloads"
PAGE_SIZE = 100


def iso(created_at: str) -> str:
    moment = datetime.strptime(created_at, "%a %b %d %H:%M:%S %z %Y").astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def first_of(path: Path, keep: Any = None) -> dict[str, Any]:
    """The first record of a JSON file (an object or a list) or JSON Lines file that ``keep`` accepts."""
    text = path.read_text(encoding="utf-8")
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(records, dict):
        records = [records]
    return next(record for record in records if keep is None or keep(record))


_MARKUP = re.compile(r"(https?://)(\S+)|@(\w+)|#(\w+)")


def _markup(match: re.Match[str]) -> str:
    scheme, rest, user, tag = match.groups()
    if scheme and "…" in rest:  # a link cut by a client's "…" is no link
        return match.group(0)
    if scheme:  # the scheme hidden, as Mastodon shows a link
        return (
            f'<a href="{scheme}{rest}" rel="nofollow noopener" target="_blank"><span class="invisible">{scheme}'
            f'</span><span class="">{rest}</span><span class="invisible"></span></a>'
        )
    if user:
        return (
            f'<span class="h-card"><a href="https://mastodon.social/@{user}" class="u-url mention">'
            f"@<span>{user}</span></a></span>"
        )
    return f'<a href="https://mastodon.social/tags/{tag}" class="mention hashtag" rel="tag">#<span>{tag}</span></a>'


def mastodon_content(text: str) -> str:
    """``text`` as Mastodon's HTML: escaped, a paragraph, line breaks as
    ``<br />``, mentions, hashtags and links marked up as Mastodon does."""
    body = _MARKUP.sub(_markup, html.escape(text, quote=False)).replace("\n", "<br />")
    return f"<p>{body}</p>"


def as_mastodon(stream: str) -> Iterator[dict[str, Any]]:
    template = first_of(PAYLOADS / "mastodon" / "rtoot_examples.statuses.json", lambda s: not s.get("reblog"))
    for status in stream_records(stream):
        record = copy.deepcopy(template)
        record.update(id=status["id_str"], created_at=iso(status["created_at"]), reblog=None)
        original = status.get("retweeted_status")
        if original:
            reblog = copy.deepcopy(template)
            reblog.update(id=original["id_str"], content=mastodon_content(original["text"]), reblog=None)
            reblog["created_at"] = record["created_at"]
            record.update(content="", reblog=reblog)
        else:
            record["content"] = mastodon_content(status["text"])
        yield record


def bluesky_template() -> dict[str, Any]:
    """The first post that the Jetstream payload creates."""
    return first_of(
        PAYLOADS / "bluesky" / "jetstream_expected_v1.jsonl",
        lambda e: (
            e.get("commit", {}).get("collection") == "app.bsky.feed.post" and e["commit"].get("operation") == "create"
        ),
    )


def as_bluesky(stream: str) -> Iterator[dict[str, Any]]:
    template = bluesky_template()
    for status in stream_records(stream):
        event = copy.deepcopy(template)
        original = status.get("retweeted_status")
        created = iso(status["created_at"])
        event["time_us"] = int(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() * 1_000_000)
        event["commit"]["rkey"] = status["id_str"]
        event["commit"]["record"].pop("facets", None)
        event["commit"]["record"].update(text=(original or status)["text"], createdAt=created)
        yield event


def as_twitter_v2_pages(stream: str) -> Iterator[dict[str, Any]]:
    template = first_of(PAYLOADS / "twitter_v2" / "brexit.jsonl")
    tweet_template = {key: value for key, value in template["data"][0].items() if key != "referenced_tweets"}
    page: list[dict[str, Any]] = []
    originals: list[dict[str, Any]] = []

    def flush() -> dict[str, Any]:
        record = copy.deepcopy(template)
        record["data"] = page[:]
        record["includes"]["tweets"] = originals[:] + record["includes"].get("tweets", [])
        record["meta"] = {"result_count": len(page)}
        page.clear()
        originals.clear()
        return record

    for status in stream_records(stream):
        tweet = copy.deepcopy(tweet_template)
        tweet.update(id=status["id_str"], text=status["text"], created_at=iso(status["created_at"]))
        original = status.get("retweeted_status")
        if original:
            tweet["referenced_tweets"] = [{"type": "retweeted", "id": original["id_str"]}]
            originals.append({**copy.deepcopy(tweet_template), "id": original["id_str"], "text": original["text"]})
        page.append(tweet)
        if len(page) == PAGE_SIZE:
            yield flush()
    if page:
        yield flush()


def stream_records(stream: str) -> Iterator[dict[str, Any]]:
    """The statuses of ``make_stream.py``'s stream, one a line."""
    with open(stream, encoding="utf-8") as handle:
        for line in handle:
            status = json.loads(line)
            if "statuses" in status or "data" in status:
                raise SystemExit(f"{stream}: expected the Twitter v1.1 statuses of make_stream.py, one a line")
            yield status


SHAPES = {"mastodon": as_mastodon, "bluesky": as_bluesky, "twitter-v2-pages": as_twitter_v2_pages}


def bluesky_id(label_id: str) -> str:
    """The id streamfilter gives the Bluesky post reshaped from status ``label_id``."""
    return f"at://{bluesky_template()['did']}/app.bsky.feed.post/{label_id}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stream", help="the Twitter v1.1 stream of make_stream.py")
    parser.add_argument("--as", dest="shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels", help="make_stream.py's labels of the stream")
    parser.add_argument("--labels-out", help="where to write them under the reshaped posts' ids")
    args = parser.parse_args()
    with open(args.out, "w", encoding="utf-8") as out:
        for record in SHAPES[args.shape](args.stream):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    if args.labels and args.labels_out:
        prefix = bluesky_id("") if args.shape == "bluesky" else ""
        with open(args.labels, encoding="utf-8") as labels, open(args.labels_out, "w", encoding="utf-8") as out:
            for line in labels:
                label = json.loads(line)
                out.write(json.dumps({**label, "id": prefix + label["id"]}) + "\n")


if __name__ == "__main__":
    main()
