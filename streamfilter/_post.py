"""What every stage passes on: a Post in, a Verdict out."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from json.encoder import encode_basestring
from typing import Any

__all__ = [
    "Post",
    "RetweetPolicy",
    "Verdict",
    "VerdictKind",
    "json_line",
]


@dataclass(frozen=True, slots=True)
class Post:
    """One social-media post, as the adapters see it.

    ``text`` is the text the post is judged on: for a retweet it is the
    retweeted post's own text when the payload carries it. ``timestamp`` is
    the event time in seconds since the epoch, or None when the record has
    none (the filter then gives it the newest event time of the stream's
    dated posts, or, before any, of the first dated post after it; only a
    stream with no dated post at all runs on the wall clock). ``raw`` is the record exactly
    as it arrived (a dict, a str, the bytes of an input line, or a data frame's row). ``author``
    is the account that posted it, as the platform names it (a screen name,
    a handle or a DID), or None when the record does not say.
    """

    id: str | None
    text: str
    timestamp: float | None = None
    retweet_of: str | None = None
    is_retweet: bool = False
    platform: str = "text"
    raw: Any = field(default=None, repr=False, compare=False)
    author: str | None = None

    def __init__(
        self,
        id: str | None,
        text: str,
        timestamp: float | None = None,
        retweet_of: str | None = None,
        is_retweet: bool = False,
        platform: str = "text",
        raw: Any = None,
        author: str | None = None,
    ) -> None:
        # What dataclass's own __init__ does, through the slots directly (see _slot_setters).
        set_id, set_text, set_timestamp, set_retweet_of, set_is_retweet, set_platform, set_raw, set_author = (
            _POST_SETTERS
        )
        set_id(self, id)
        set_text(self, text)
        set_timestamp(self, timestamp)
        set_retweet_of(self, retweet_of)
        set_is_retweet(self, is_retweet)
        set_platform(self, platform)
        set_raw(self, raw)
        set_author(self, author)


def _slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The stores of a frozen, slotted dataclass's fields, in order.

    Its generated __init__ stores each field with ``object.__setattr__``,
    which looks the slot up every time; these take about half as long, and
    the adapters build a Post a post."""
    return tuple(cls.__dict__[item.name].__set__ for item in fields(cls))


_POST_SETTERS = _slot_setters(Post)


class RetweetPolicy(enum.StrEnum):
    """How retweets are judged.

    CONTENT: a retweet is judged on the retweeted post's text, like any post.
    DROP: every retweet gets verdict ``retweet``; it never passes and is never indexed.
    KEEP: every retweet passes and is never indexed.
    """

    CONTENT = "content"
    DROP = "drop"
    KEEP = "keep"


class VerdictKind(enum.StrEnum):
    NOVEL = "novel"
    DUPLICATE = "duplicate"
    RETWEET = "retweet"
    INVALID = "invalid"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The filter's decision about one post (or one record that is not a post).

    ``line`` is the 1-based position of the record in its input, ``post`` is
    None only for invalid records. ``duplicate_of`` and ``similarity`` are
    set for duplicates; ``reason`` says why a record is invalid or skipped
    (a like, a follow: not a post), or why a post passed unjudged.
    ``record_id`` is an invalid record's id, where it could be read.
    """

    kind: VerdictKind
    line: int
    post: Post | None = None
    duplicate_of: str | None = None
    similarity: float | None = None
    reason: str | None = None
    raw: Any = field(default=None, repr=False, compare=False)
    record_id: str | None = None

    def __init__(
        self,
        kind: VerdictKind,
        line: int,
        post: Post | None = None,
        duplicate_of: str | None = None,
        similarity: float | None = None,
        reason: str | None = None,
        raw: Any = None,
        record_id: str | None = None,
    ) -> None:
        set_kind, set_line, set_post, set_duplicate_of, set_similarity, set_reason, set_raw, set_record_id = (
            _VERDICT_SETTERS
        )
        set_kind(self, kind)
        set_line(self, line)
        set_post(self, post)
        set_duplicate_of(self, duplicate_of)
        set_similarity(self, similarity)
        set_reason(self, reason)
        set_raw(self, raw)
        set_record_id(self, record_id)

    @property
    def is_novel(self) -> bool:
        return self.kind is VerdictKind.NOVEL

    @property
    def post_id(self) -> str:
        """The post's id; for a record without a post, its own id where it
        could be read, else ``line:N``."""
        if self.post is not None and self.post.id is not None:
            return self.post.id
        return self.record_id if self.record_id is not None else f"line:{self.line}"

    def to_json(self) -> dict[str, Any]:
        """The ``--verdicts`` line for this verdict."""
        return {
            "id": self.post_id,
            "verdict": self.kind.value,
            "duplicate_of": self.duplicate_of,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "reason": self.reason,
            "line": self.line,
        }

    def json_line(self) -> str:
        """``json.dumps(self.to_json(), ensure_ascii=False)``, written directly,
        with the line breaks besides "\\n" escaped (NEL, U+2028, U+2029)."""
        return json_line(self.post_id, self.kind, self.duplicate_of, self.similarity, self.reason, self.line)


# The characters besides "\n" that str.splitlines, editors and log viewers
# break a line at, and that JSON may leave raw inside a string.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _json_string(text: str) -> str:
    """``text`` as ``json.dumps(ensure_ascii=False)`` writes it, but with NEL,
    U+2028 and U+2029 escaped too: a verdict line stays one line wherever it is read."""
    quoted: str = encode_basestring(text)
    return quoted if text.isascii() else quoted.translate(_LINE_BREAKS)


def json_line(
    post_id: str, kind: VerdictKind, duplicate_of: str | None, similarity: float | None, reason: str | None, line: int
) -> str:
    """A verdict's ``--verdicts`` line (``Verdict.to_json`` as JSON), from its values."""
    duplicate = "null" if duplicate_of is None else _json_string(duplicate_of)
    rounded = "null" if similarity is None else repr(round(similarity, 4))
    why = "null" if reason is None else _json_string(reason)
    return (
        f'{{"id": {_json_string(post_id)}, "verdict": "{kind._value_}", "duplicate_of": {duplicate}, '
        f'"similarity": {rounded}, "reason": {why}, "line": {line}}}'
    )


_VERDICT_SETTERS = _slot_setters(Verdict)
