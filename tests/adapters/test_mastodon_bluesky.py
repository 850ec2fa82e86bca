from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfilter import FilterConfig, MemoryStore, RetweetPolicy, StreamFilter
from streamfilter.adapters import html_to_text, record_adapter
from tests.conftest import FIXTURES, shared_payload

adapter = record_adapter()


def test_mastodon_html_keeps_visible_text_only() -> None:
    html = (
        '<p>Fish &amp; chips at <a href="https://example.org/tags/food" class="mention hashtag">#<span>food</span></a> '
        'with <span class="h-card"><a href="https://mastodon.social/@bob" class="u-url mention">@<span>bob</span></a></span></p>'
        '<p>see <a href="https://example.org/a/very/long/path"><span class="invisible">https://</span>'
        '<span class="ellipsis">example.org/a/very</span><span class="invisible">/long/path</span></a></p>'
    )
    text = html_to_text(html)
    assert "Fish & chips at #food with @bob" in text
    assert "example.org/a/very" in text and "https://" not in text and "/long/path" not in text


class _StandardLibraryReading(HTMLParser):
    """html_to_text as it was before its own tokenizer: the standard library's
    parser alone. The fast path must read every input the same way."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._hidden_depth:
            if tag == "span":
                self._hidden_depth += 1
            return
        classes = (dict(attrs).get("class") or "").split()
        if tag == "span" and "invisible" in classes:
            self._hidden_depth = 1
        elif tag in {"p", "br", "li", "div", "blockquote"}:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._hidden_depth and tag == "span":
            self._hidden_depth -= 1
        elif tag in {"p", "br", "li", "div", "blockquote"}:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self.parts.append(data)


def standard_library_reading(html: str) -> str:
    parser = _StandardLibraryReading()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.parts).split(" ")).strip()


# Pieces of the HTML Mastodon sends, and of HTML it does not: entities, tags
# in other cases and spacings, attributes with and without quotes, repeated
# and escaped classes, comments, declarations, raw-text elements, a "<" that
# opens no tag, and a tag cut off at the end.
HTML_PIECES = [
    "Fish", " chips ", "\n", "ünï", "#food", "@bob", "&amp;", "&lt;", "&#39;", "&nbsp;", "&amp", "& ", "a < b",
    " > ", "<", "</", "<p", "<p>", "</p>", "<P>", "</P >", "<br>", "<br/>", "<br />", "<BR>", "<li>", "</li>",
    "<ol>", "</ol>", "<blockquote>", "</blockquote>", "<div class=x>", "</div>", "<em>", "</em>",
    '<a href="https://example.org/tags/food" class="mention hashtag" rel="tag">', "</a>",
    "<a href='https://x.example/@bob' class='u-url mention'>", '<a href="x>y">', '<a\nhref="x">',
    '<span class="invisible">', "<span class='invisible'>", "<span class=invisible>", '<span class="ellipsis">',
    '<span class="h-card">', '<SPAN CLASS="invisible">', '<span class="INVISIBLE">', '<span class="&#105;nvisible">',
    '<span class="a" class="invisible">', '<span class="invisible" class="a">', "<span>", "</span>", "</SPAN>",
    "<span/>", '<span class="invisible"/>', "<img src=x alt='a b'>", '<a href="x"class="y">', "< p>", "</ p>",
    "</a foo>", "<a/b>", "<!-- note <p> -->", "<!DOCTYPE html>", "<?xml?>", "<script>x<p></script>",
    "<style>p{}</style>", "<![CDATA[x]]>", '<span class="invisible"',
]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(HTML_PIECES), max_size=30))
def test_html_to_text_reads_html_as_the_standard_library_parser_does(pieces: list[str]) -> None:
    html = "".join(pieces)
    assert html_to_text(html) == standard_library_reading(html)


def test_html_to_text_reads_real_statuses_as_the_standard_library_parser_does() -> None:
    contents = []
    for name in ("handle_params_max_id", "get_account_statuses_limit", "rtoot_examples", "get_timeline_public_default"):
        for status in json.loads(shared_payload(f"mastodon/{name}.statuses.json").read_text()):
            contents.append(status["content"])
            if status.get("reblog"):
                contents.append(status["reblog"]["content"])
    assert len(contents) > 300
    for content in contents:
        assert html_to_text(content) == standard_library_reading(content)


def test_mastodon_statuses_from_real_payloads() -> None:
    statuses = json.loads(shared_payload("mastodon/handle_params_max_id.statuses.json").read_text())
    posts = [post for status in statuses for post in adapter.adapt(status)]
    assert len(posts) == len(statuses) == 160
    assert all(post.platform == "mastodon" and post.timestamp and post.id for post in posts)
    assert not any("<p>" in post.text or "</a>" in post.text for post in posts)


def test_mastodon_reblog_is_a_retweet_of_its_status() -> None:
    statuses = json.loads(shared_payload("mastodon/get_account_statuses_limit.statuses.json").read_text())
    reblog = next(s for s in statuses if s.get("reblog"))
    (post,) = adapter.adapt(reblog)
    assert post.is_retweet and post.retweet_of == reblog["reblog"]["id"]
    assert post.text == html_to_text(reblog["reblog"]["content"])
    with StreamFilter(FilterConfig(retweet_policy=RetweetPolicy.DROP), store=MemoryStore()) as sf:
        assert sf.check(reblog).kind.value == "retweet"


def test_mastodon_streaming_update_event() -> None:
    status = json.loads(shared_payload("mastodon/get_status_default.statuses.json").read_text())
    status = status[0] if isinstance(status, list) else status
    (post,) = adapter.adapt({"event": "update", "payload": json.dumps(status)})
    assert post.id == str(status["id"])


@pytest.mark.parametrize("event", [{}, ["update"], {"update": 1}])
def test_an_event_named_by_a_list_or_an_object_is_no_event(event: object) -> None:
    # such a name once reached a set of names and raised TypeError ("could not be read")
    status = json.loads((FIXTURES / "mastodon_hashtag.jsonl").read_text().splitlines()[0])
    (post,) = adapter.adapt({**status, "event": event})  # a status with an odd field: still a status
    assert post.platform == "mastodon" and post.id == str(status["id"])
    with StreamFilter(store=MemoryStore()) as sf:
        verdict = sf.check({"event": event, "payload": json.dumps(status)})
    assert verdict.kind.value == "invalid" and "could not be read" not in (verdict.reason or "")


def test_bluesky_jetstream_posts_reposts_and_skips() -> None:
    lines = shared_payload("bluesky/jetstream_expected_v1.jsonl").read_bytes().splitlines()
    with StreamFilter(store=MemoryStore()) as sf:
        verdicts = sf.check_many(lines)
    events = [json.loads(line) for line in lines]
    assert len(verdicts) == len(events)
    for verdict, event in zip(verdicts, events, strict=True):
        commit = event.get("commit") or {}
        is_post = commit.get("collection") == "app.bsky.feed.post" and commit.get("operation") == "create"
        is_repost = commit.get("collection") == "app.bsky.feed.repost" and commit.get("operation") == "create"
        if is_post:
            assert verdict.post is not None
            assert verdict.post.id == f"at://{event['did']}/app.bsky.feed.post/{commit['rkey']}"
            assert verdict.post.text == commit["record"]["text"]
            assert verdict.post.timestamp == event["time_us"] / 1e6
        elif is_repost:
            assert verdict.post is not None and verdict.post.is_retweet
            assert verdict.kind.value == "novel" and "repost" in (verdict.reason or "")
        else:
            assert verdict.kind.value == "skipped" and verdict.reason


def _jetstream(collection: str) -> dict:  # type: ignore[type-arg]
    for line in (FIXTURES / "bluesky_jetstream.jsonl").read_bytes().splitlines():
        event = json.loads(line)
        commit = event.get("commit") or {}
        if commit.get("collection") == collection and commit.get("operation") == "create":
            return dict(event)
    raise AssertionError(f"no {collection} create event in the fixture")


@pytest.mark.parametrize("policy", ["content", "drop", "keep"])
def test_bluesky_repost_is_judged_by_the_post_it_reposts(policy: str) -> None:
    post = _jetstream("app.bsky.feed.post")
    post_uri = f"at://{post['did']}/app.bsky.feed.post/{post['commit']['rkey']}"
    repost = _jetstream("app.bsky.feed.repost")
    seen = json.loads(json.dumps(repost))
    seen["commit"]["record"]["subject"]["uri"] = post_uri
    seen["time_us"] = post["time_us"] + 1_000_000
    unseen = json.loads(json.dumps(seen))
    unseen["commit"]["record"]["subject"]["uri"] = "at://did:plc:nobody/app.bsky.feed.post/3zzzzzzzzzzzz"
    unseen["commit"]["rkey"] = "3unseenrepost"
    with StreamFilter(FilterConfig(retweet_policy=RetweetPolicy(policy)), store=MemoryStore()) as sf:
        _, seen_verdict, unseen_verdict = sf.check_many([post, seen, unseen])
    if policy == "content":
        assert seen_verdict.kind.value == "duplicate" and seen_verdict.duplicate_of == post_uri
        assert seen_verdict.similarity == 1.0 and seen_verdict.reason == "repost of a post already seen"
        assert unseen_verdict.kind.value == "novel" and "not in the index" in (unseen_verdict.reason or "")
    elif policy == "drop":
        assert seen_verdict.kind.value == unseen_verdict.kind.value == "retweet"
    else:
        assert seen_verdict.kind.value == unseen_verdict.kind.value == "novel"
