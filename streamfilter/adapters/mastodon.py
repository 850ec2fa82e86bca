"""Mastodon statuses (REST and the streaming API's ``update`` events).

``content`` is HTML. It is turned into the text a reader sees: the visible
text of links, hashtags and mentions is kept, link targets and the
``invisible`` spans that Mastodon uses to shorten URLs are dropped, a
paragraph or line break is a newline, and entities are decoded. The HTML
Mastodon sends is read by one regular expression; anything else (comments,
script, a stray "<") by the standard library's HTML parser, which reads the
simple kind the same way (a test compares the two on generated HTML) at three
to four times the cost. ``reblog`` is Mastodon's retweet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import unescape
from html.parser import HTMLParser
from typing import Any

from .._exceptions import InvalidRecordError
from .._json import loads
from .._post import Post
from .._time import parse_timestamp
from ._base import NotAPost, post_id_of, text_of

__all__ = ["MastodonAdapter", "html_to_text"]

_BLOCKS = {"p", "br", "li", "div", "blockquote"}


class _VisibleText:
    """The text a reader sees of Mastodon's HTML, fed its tags and text in order."""

    __slots__ = ("_hidden_depth", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._hidden_depth = 0

    def start(self, tag: str, classes: str | None) -> None:
        if self._hidden_depth:
            if tag == "span":
                self._hidden_depth += 1
            return
        if tag == "span" and "invisible" in (classes or "").split():
            self._hidden_depth = 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def end(self, tag: str) -> None:
        if self._hidden_depth and tag == "span":
            self._hidden_depth -= 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def data(self, data: str) -> None:
        if not self._hidden_depth:
            self.parts.append(data)

    def text(self) -> str:
        return "".join(self.parts).strip()


class _Parser(HTMLParser):
    """The standard library's parser, for HTML that ``_simple_html`` leaves alone."""

    def __init__(self, visible: _VisibleText) -> None:
        super().__init__(convert_charrefs=True)
        self.visible = visible

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.visible.start(tag, dict(attrs).get("class"))

    def handle_endtag(self, tag: str) -> None:
        self.visible.end(tag)

    def handle_data(self, data: str) -> None:
        self.visible.data(data)


# What Mastodon sends: text, end tags, and start tags whose attributes are
# separated by spaces, with quoted or plain values. Comments, declarations, a
# "<" that opens no such tag, and script or style (whose content is not
# HTML) are left to the standard library's parser.
_NAME = r"[a-zA-Z_:][-a-zA-Z0-9_:.]*"
_VALUE = r""""[^"]*"|'[^']*'|[^\s"'=<>`]+"""
_ATTRIBUTES = re.compile(rf"({_NAME})(?:\s*=\s*({_VALUE}))?")
_TAG = re.compile(
    rf"<(?:/([a-zA-Z][a-zA-Z0-9]*)\s*|([a-zA-Z][a-zA-Z0-9]*)((?:\s+{_NAME}(?:\s*=\s*(?:{_VALUE}))?)*)\s*(/?))>"
)
_RAW_TEXT_TAGS = {"script", "style"}


def _simple_html(html: str, visible: _VisibleText) -> bool:
    """Feed ``visible`` the tags and text of ``html`` as ``HTMLParser`` would,
    when all of it is what ``_TAG`` reads; False (``visible`` half fed) when not.

    ``_VisibleText``'s rules, inlined: a status has dozens of tags, and a
    method call per tag was most of the cost."""
    parts = visible.parts
    hidden = visible._hidden_depth
    position = 0
    for match in _TAG.finditer(html):
        start = match.start()
        if start > position:
            text = html[position:start]
            if "<" in text:
                return False
            if not hidden:
                parts.append(unescape(text) if "&" in text else text)
        position = match.end()
        closed, opened, attributes, self_closing = match.groups()
        if closed is not None:
            tag = closed.lower()
            if hidden and tag == "span":
                hidden -= 1
            elif tag in _BLOCKS:
                parts.append("\n")
            continue
        tag = opened.lower()
        if tag in _RAW_TEXT_TAGS:
            return False
        if hidden:
            if tag == "span":
                hidden += 1
        elif tag == "span" and attributes and _hides(attributes):
            hidden = 1
        elif tag in _BLOCKS:
            parts.append("\n")
        if self_closing:  # its end tag, at once
            if hidden and tag == "span":
                hidden -= 1
            elif tag in _BLOCKS:
                parts.append("\n")
    text = html[position:]
    if "<" in text:
        return False
    if text and not hidden:
        parts.append(unescape(text) if "&" in text else text)
    visible._hidden_depth = hidden
    return True


def _hides(attributes: str) -> bool:
    """Whether a span's attributes give it the class ``invisible``."""
    classes = None
    for name, value in _ATTRIBUTES.findall(attributes):
        if name.lower() == "class":  # the last one, as HTMLParser's attrs make a dict
            classes = unescape(value[1:-1] if value[:1] in ("'", '"') else value)
    return classes is not None and "invisible" in classes.split()


def html_to_text(html: str) -> str:
    """The visible text of a status's HTML ``content`` (see the module docstring)."""
    visible = _VisibleText()
    if not _simple_html(html, visible):
        visible = _VisibleText()
        parser = _Parser(visible)
        parser.feed(html)
        parser.close()
    return visible.text()


def _status_id(status: Mapping[str, Any]) -> str | None:
    return post_id_of(status.get("id"), "id")


# The streaming API's events (docs.joinmastodon.org/methods/streaming): statuses come as ``update``.
_EVENTS = frozenset(
    {"update", "delete", "notification", "filters_changed", "conversation", "announcement",
     "announcement.reaction", "announcement.delete", "status.update", "encrypted_message", "notifications_merged"}
)  # fmt: skip


def _event_of(record: Mapping[str, Any]) -> str | None:
    """A streaming event's name; None where the record names none (or names
    it with a list or an object, which no set of names can hold)."""
    event = record.get("event")
    return event if isinstance(event, str) else None


class MastodonAdapter:
    name = "mastodon"

    def matches(self, record: Mapping[str, Any]) -> bool:
        if _event_of(record) in _EVENTS and "payload" in record:
            return True
        return "content" in record and ("account" in record or "uri" in record) and "id" in record

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        event = _event_of(record)
        if event == "delete" and "payload" in record:
            deleted = record["payload"]
            if isinstance(deleted, str | int) and not isinstance(deleted, bool) and str(deleted):
                raise NotAPost(f"mastodon status deleted: {deleted}", deletes=str(deleted), platform="mastodon")
            raise InvalidRecordError("mastodon delete event names no status id")
        if event in _EVENTS and event != "update" and "payload" in record:
            raise NotAPost(f"mastodon {event} event")
        status: Any = record
        if event == "update" and "payload" in record:
            payload = record["payload"]
            if isinstance(payload, str):
                payload = loads(payload, "streaming update payload: ")
            if not isinstance(payload, Mapping):
                raise InvalidRecordError("streaming update payload is not a status object")
            status = payload
        created = status.get("created_at")
        timestamp = None if created is None else parse_timestamp(created, "created_at")
        reblog = status.get("reblog")
        account = status.get("account")
        handle = account.get("acct") if isinstance(account, Mapping) else None
        author = handle if isinstance(handle, str) else None
        if isinstance(reblog, Mapping):
            text = html_to_text(text_of(reblog.get("content"), "reblog.content"))
            return [Post(_status_id(status), text, timestamp, _status_id(reblog), True, "mastodon", record, author)]
        text = html_to_text(text_of(status.get("content"), "content"))
        return [Post(_status_id(status), text, timestamp, None, False, "mastodon", record, author)]
