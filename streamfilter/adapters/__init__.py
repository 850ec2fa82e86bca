"""Adapters turn one raw record into the posts it carries.

An adapter is any object with ``matches(record) -> bool`` (used by
auto-detection) and ``posts(record) -> list[Post]``, which raises
InvalidRecordError for a record it cannot use. Most records carry one post;
a Twitter v2 response page or a v1.1 search page carries many.

New platforms plug in by adding an adapter to the list ``record_adapter`` gives
auto-detection.
"""

from ._base import Adapter, NotAPost, RecordAdapter, decode_line
from ._pages import page_of_posts
from ._registry import record_adapter
from .bluesky import BlueskyAdapter
from .generic import GenericAdapter
from .mastodon import MastodonAdapter, html_to_text
from .text import TextAdapter
from .twitter import TwitterV1Adapter, TwitterV2Adapter

__all__ = [
    "page_of_posts",
    "Adapter",
    "BlueskyAdapter",
    "GenericAdapter",
    "MastodonAdapter",
    "NotAPost",
    "RecordAdapter",
    "TextAdapter",
    "TwitterV1Adapter",
    "TwitterV2Adapter",
    "decode_line",
    "html_to_text",
    "record_adapter",
]
