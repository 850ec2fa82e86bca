"""Twitter API v1.1 statuses and API v2 tweets.

v1.1: the text is ``extended_tweet.full_text``, then ``full_text``, then
``text``; a retweet carries ``retweeted_status``, and is judged on that
status's own (untruncated) text. A search page ``{"statuses": [...]}`` gives
one post per status.

v2: ``{"data": {...}}`` is one tweet, ``{"data": [...], "includes": {...}}``
a response page. A retweet has ``referenced_tweets`` of type ``retweeted``;
its full text is looked up in ``includes.tweets`` (or in the referenced
tweet itself, in twarc's flattened form), since the retweet's own text is a
truncated ``RT @user: …``. ``note_tweet.text`` (long posts) wins over ``text``.

A text that starts with ``RT @user:`` is a manual retweet on either version.
Quote tweets are not retweets: their own text is judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import InvalidRecordError
from .._normalize import has_retweet_prefix
from .._post import Post
from .._time import parse_timestamp
from .._wording import a_type
from ._base import NotAPost, post_id_of, text_of

__all__ = ["TwitterV1Adapter", "TwitterV2Adapter"]


def _id_of(status: Mapping[str, Any]) -> str | None:
    if "id_str" in status:
        return post_id_of(status["id_str"], "id_str")
    return post_id_of(status.get("id"), "id")


def _time_of(status: Mapping[str, Any]) -> float | None:
    value = status.get("created_at")
    return None if value is None else parse_timestamp(value, "created_at")


# Below, ``x is not None`` and ``type(x) is dict`` come first: most statuses
# have no extended_tweet or retweeted_status, and a user that is a dict, and
# the ABC's isinstance is far slower, and runs several times a post.


def _v1_text(status: Mapping[str, Any]) -> str:
    extended = status.get("extended_tweet")
    if extended is not None and isinstance(extended, Mapping) and extended.get("full_text") is not None:
        return text_of(extended["full_text"], "extended_tweet.full_text")
    if status.get("full_text") is not None:
        return text_of(status["full_text"], "full_text")
    return text_of(status.get("text"), "text")


# The v1.1 streaming API's messages that are not statuses: each is one key.
_STREAM_NOTICES = frozenset(
    {"delete", "scrub_geo", "limit", "status_withheld", "user_withheld", "disconnect", "warning"}
)


def _is_notice(record: Mapping[str, Any]) -> bool:
    return len(record) == 1 and next(iter(record)) in _STREAM_NOTICES


def _notice(record: Mapping[str, Any]) -> None:
    """Raise NotAPost for a v1.1 streaming notice; a status delete names the status."""
    name, body = next(iter(record.items()))
    status = body.get("status") if name == "delete" and isinstance(body, Mapping) else None
    if isinstance(status, Mapping):
        deleted = status.get("id_str", status.get("id"))
        if isinstance(deleted, str | int) and not isinstance(deleted, bool):
            raise NotAPost(f"twitter status deleted: {deleted}", deletes=str(deleted), platform="twitter")
    raise NotAPost(f"twitter {name} notice")


class TwitterV1Adapter:
    name = "twitter"

    def matches(self, record: Mapping[str, Any]) -> bool:
        if isinstance(record.get("statuses"), list):
            return True
        if _is_notice(record):
            return True
        return ("id_str" in record or "user" in record or "retweeted_status" in record) and (
            "text" in record or "full_text" in record or "extended_tweet" in record
        )

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        if _is_notice(record):
            _notice(record)
        statuses = record.get("statuses")
        if isinstance(statuses, list):
            return [self._post(status, record) for status in statuses if isinstance(status, Mapping)]
        return [self._post(record, record)]

    def _post(self, status: Mapping[str, Any], raw: Any) -> Post:
        retweeted = status.get("retweeted_status")
        author = _screen_name(status)
        if retweeted is not None and isinstance(retweeted, Mapping):
            original = _id_of(retweeted)
            return Post(_id_of(status), _v1_text(retweeted), _time_of(status), original, True, "twitter", raw, author)
        text = _v1_text(status)
        return Post(_id_of(status), text, _time_of(status), None, has_retweet_prefix(text), "twitter", raw, author)


def _screen_name(status: Mapping[str, Any]) -> str | None:
    user = status.get("user")
    name = user.get("screen_name") if type(user) is dict or isinstance(user, Mapping) else None
    return name if isinstance(name, str) else None


def _v2_author(tweet: Mapping[str, Any], users: Mapping[str, str]) -> str | None:
    """The author's username from the page's includes.users, else the author_id."""
    author_id = tweet.get("author_id")
    if author_id is None:
        return None
    return users.get(str(author_id), str(author_id))


def _v2_text(tweet: Mapping[str, Any]) -> str:
    note = tweet.get("note_tweet")
    if isinstance(note, Mapping) and isinstance(note.get("text"), str):
        return text_of(note["text"], "note_tweet.text")
    return text_of(tweet.get("text"), "text")


class TwitterV2Adapter:
    name = "twitter"

    def matches(self, record: Mapping[str, Any]) -> bool:
        data = record.get("data")
        if isinstance(data, Mapping | list):
            return True
        return "text" in record and (
            "edit_history_tweet_ids" in record
            or "author_id" in record
            or "referenced_tweets" in record
            or "conversation_id" in record
        )

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        data = record.get("data", record)
        includes = record.get("includes")
        included: dict[str, Mapping[str, Any]] = {}
        users: dict[str, str] = {}
        if isinstance(includes, Mapping) and isinstance(includes.get("tweets"), list):
            for tweet in includes["tweets"]:
                if isinstance(tweet, Mapping) and tweet.get("id") is not None:
                    included[str(tweet["id"])] = tweet
        if isinstance(includes, Mapping) and isinstance(includes.get("users"), list):
            for user in includes["users"]:
                if isinstance(user, Mapping) and isinstance(user.get("username"), str):
                    users[str(user.get("id"))] = user["username"]
        if isinstance(data, list):
            if not data:
                raise InvalidRecordError("response page has no tweets in data")
            return [self._post(tweet, included, users, record) for tweet in data if isinstance(tweet, Mapping)]
        if not isinstance(data, Mapping):
            raise InvalidRecordError(f"data is {a_type(data)}, not a tweet object")
        return [self._post(data, included, users, record)]

    def _post(
        self, tweet: Mapping[str, Any], included: Mapping[str, Mapping[str, Any]], users: Mapping[str, str], raw: Any
    ) -> Post:
        own_text = _v2_text(tweet)
        author = _v2_author(tweet, users)
        references = tweet.get("referenced_tweets")
        if isinstance(references, list):
            for reference in references:
                if isinstance(reference, Mapping) and reference.get("type") == "retweeted":
                    original_id = None if reference.get("id") is None else str(reference["id"])
                    original = included.get(original_id or "") or reference
                    text = own_text
                    if isinstance(original.get("text"), str):
                        text = _v2_text(original)
                    return Post(_id_of(tweet), text, _time_of(tweet), original_id, True, "twitter", raw, author)
        retweet = has_retweet_prefix(own_text)
        return Post(_id_of(tweet), own_text, _time_of(tweet), None, retweet, "twitter", raw, author)
