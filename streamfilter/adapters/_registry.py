"""Which adapters a ``--format`` value uses."""

from __future__ import annotations

from ._base import RecordAdapter
from .bluesky import BlueskyAdapter
from .generic import GenericAdapter
from .mastodon import MastodonAdapter
from .text import TextAdapter
from .twitter import TwitterV1Adapter, TwitterV2Adapter

__all__ = ["record_adapter"]


def record_adapter(
    format: str = "auto",
    *,
    id_field: str = "id",
    text_field: str = "text",
    time_field: str = "created_at",
) -> RecordAdapter:
    """The adapter for a format, with the platforms that auto-detection tries, in order."""
    return RecordAdapter(
        format,
        # v1.1 first: the common archive format, and cheap to rule out for the others
        platforms=[TwitterV1Adapter(), TwitterV2Adapter(), MastodonAdapter(), BlueskyAdapter()],
        generic=GenericAdapter(id_field, text_field, time_field),
        text=TextAdapter(),
    )
