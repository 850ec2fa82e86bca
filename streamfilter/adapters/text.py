"""Plain text lines: the text is the post; it has no id and no time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._normalize import has_retweet_prefix
from .._post import Post
from ._base import text_of

__all__ = ["TextAdapter"]


class TextAdapter:
    name = "text"

    def matches(self, record: Mapping[str, Any]) -> bool:
        return False

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        text = text_of(record.get("text"), "text")
        raw = record.get("_raw", text)
        return [Post(None, text, None, None, has_retweet_prefix(text), "text", raw)]
