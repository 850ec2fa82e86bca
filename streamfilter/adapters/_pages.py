"""Response pages: records that hold several posts (a Twitter v2 page's
``data``, a v1.1 search page's ``statuses``), cut down to some of them."""

from __future__ import annotations

import json
import re
from collections.abc import Set
from json.scanner import make_scanner
from typing import Any

from .._json import loads

__all__ = ["page_of_posts"]

# A page whose posts come first: {"data": [ or {"statuses": [
_PAGE_START = re.compile(r'\s*\{\s*"(data|statuses)"\s*:\s*\[\s*')
_BLANK = re.compile(r"[ \t\n\r]*")
# json's own C scanner, as JSONDecoder builds it (typeshed types its argument as the scanner itself)
_scan_value = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _after_blanks(text: str, position: int) -> int:
    blanks = _BLANK.match(text, position)
    return position if blanks is None else blanks.end()


def _cut_page(text: str, keep: set[str | None]) -> str | None:
    """``text``, a response page that starts with its ``data`` or
    ``statuses`` array and names neither key anywhere else, with only the
    items of that array whose id is in ``keep``: every other character as
    it was. Each item is read by json's scanner, and the rest of the page
    (its ``includes``, often most of it) is not read at all. None for any
    other page, which is then decoded whole."""
    start = _PAGE_START.match(text)
    if start is None or text.count('"data"') + text.count('"statuses"') != 1:
        return None
    position = start.end()
    if text.startswith("]", position):
        return None
    kept: list[str] = []
    while True:
        try:
            item, end = _scan_value(text, position)
        except (StopIteration, ValueError):
            return None
        if isinstance(item, dict) and str(item.get("id_str", item.get("id"))) in keep:
            kept.append(text[position:end])
        position = _after_blanks(text, end)
        if text.startswith(",", position):
            position = _after_blanks(text, position + 1)
        elif text.startswith("]", position):
            return text[: start.end()] + ",".join(kept) + text[position:]
        else:
            return None


def page_of_posts(record: Any, keep: Set[str | None]) -> bytes | None:
    """``record``, a page as read (its line's bytes, text, or decoded), with
    only the posts whose id is in ``keep``, as a JSON line; None when it is
    no page."""
    if isinstance(record, bytes):
        # read as UTF-8 (a first line's byte-order mark dropped), as the adapters read it
        cut = _cut_page(record.decode("utf-8").removeprefix("\ufeff").rstrip("\r"), set(keep))
        if cut is not None:
            return cut.encode("utf-8")
    if isinstance(record, bytes | str) and record.lstrip()[:1] in (b"{", "{"):
        record = loads(record)  # a page, decoded again to cut it (it was read once: this cannot fail)
    if not isinstance(record, dict):
        return None
    page = dict(record)
    for key in ("data", "statuses"):
        if isinstance(page.get(key), list):
            page[key] = [
                item for item in page[key] if isinstance(item, dict) and str(item.get("id_str", item.get("id"))) in keep
            ]
    text = json.dumps(page, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate (JSON may carry one): written escaped, as it came
        return json.dumps(page, separators=(",", ":")).encode()
