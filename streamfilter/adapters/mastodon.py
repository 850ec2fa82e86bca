"""Mastodon statuses (REST and the streaming API's ``update`` events).

``content`` is HTML. It is turned into text with the standard library's
HTML parser: the visible text of links, hashtags and mentions is kept, link
targets and the ``invisible`` spans that Mastodon uses to shorten URLs are
dropped, and entities are decoded. ``reblog`` is Mastodon's retweet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any

from .._exceptions import InvalidRecordError
from .._post import Post
from .._time import parse_timestamp
from ._base import text_of

__all__ = ["MastodonAdapter", "html_to_text"]

_BLOCKS = {"p", "br", "li", "div", "blockquote"}


class _TextExtractor(HTMLParser):
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
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._hidden_depth and tag == "span":
            self._hidden_depth -= 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.parts).split(" ")).strip()


def _status_id(status: Mapping[str, Any]) -> str | None:
    value = status.get("id")
    return None if value is None else str(value)


class MastodonAdapter:
    name = "mastodon"

    def matches(self, record: Mapping[str, Any]) -> bool:
        if record.get("event") == "update" and "payload" in record:
            return True
        return "content" in record and ("account" in record or "uri" in record) and "id" in record

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        status: Any = record
        if record.get("event") == "update" and "payload" in record:
            payload = record["payload"]
            if isinstance(payload, str):
                try:
                    payload = json.loads(payload)
                except json.JSONDecodeError as exc:
                    raise InvalidRecordError(f"streaming update payload is broken JSON: {exc.msg}") from None
            if not isinstance(payload, Mapping):
                raise InvalidRecordError("streaming update payload is not a status object")
            status = payload
        created = status.get("created_at")
        timestamp = None if created is None else parse_timestamp(created)
        reblog = status.get("reblog")
        if isinstance(reblog, Mapping):
            text = html_to_text(text_of(reblog.get("content"), "reblog.content"))
            return [Post(_status_id(status), text, timestamp, _status_id(reblog), True, "mastodon", record)]
        text = html_to_text(text_of(status.get("content"), "content"))
        return [Post(_status_id(status), text, timestamp, None, False, "mastodon", record)]
