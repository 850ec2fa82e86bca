"""Bluesky Jetstream events.

A ``commit`` creating an ``app.bsky.feed.post`` is a post: its text is
``record.text``, its id ``at://did/app.bsky.feed.post/rkey``, its time
``time_us`` (or ``record.createdAt``). A created ``app.bsky.feed.repost`` is
a repost: it carries no text, so under the ``content`` policy the store
judges it by the post it reposts (``retweet_of``, the subject URI): a
duplicate when that post is live in the index, novel otherwise, and never
indexed itself; ``drop`` and ``keep`` apply as usual. Everything else
(likes, follows, blocks, deletes, identity and account events) is not a post:
it gets verdict ``skipped`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import InvalidRecordError
from .._post import Post
from .._time import parse_timestamp
from ._base import NotAPost, text_of

__all__ = ["BlueskyAdapter"]

_POST = "app.bsky.feed.post"
_REPOST = "app.bsky.feed.repost"


class BlueskyAdapter:
    name = "bluesky"

    def matches(self, record: Mapping[str, Any]) -> bool:
        return "did" in record and "kind" in record and "time_us" in record

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        kind = record.get("kind")
        if kind != "commit":
            raise NotAPost(f"bluesky {kind} event")
        commit = record.get("commit")
        if not isinstance(commit, Mapping):
            raise InvalidRecordError("bluesky commit event has no commit object")
        collection = commit.get("collection")
        operation = commit.get("operation")
        if operation == "delete" and collection == _POST and isinstance(commit.get("rkey"), str):
            deleted = f"at://{record.get('did')}/{collection}/{commit['rkey']}"
            raise NotAPost(f"bluesky post deleted: {deleted}", deletes=deleted, platform="bluesky")
        if operation != "create" or collection not in (_POST, _REPOST):
            raise NotAPost(f"bluesky {collection} {operation}")
        body = commit.get("record")
        if not isinstance(body, Mapping):
            raise InvalidRecordError(f"bluesky {collection} create has no record")
        post_id = f"at://{record.get('did')}/{collection}/{commit.get('rkey')}"
        author = str(record["did"]) if record.get("did") is not None else None  # Jetstream gives the DID
        time_us = record.get("time_us")
        timestamp = (
            parse_timestamp(time_us, "time_us")
            if time_us is not None
            else parse_timestamp(body.get("createdAt"), "record.createdAt")
        )
        if collection == _REPOST:
            subject = body.get("subject")
            reposted = subject.get("uri") if isinstance(subject, Mapping) else None
            reposted_id = None if reposted is None else str(reposted)
            return [Post(post_id, "", timestamp, reposted_id, True, "bluesky", record, author)]
        text = text_of(body.get("text"), "record.text")
        return [Post(post_id, text, timestamp, None, False, "bluesky", record, author)]
