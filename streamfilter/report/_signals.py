"""What tells a coordinated campaign from posts that only happen to share a text.

A cluster of near-duplicates is a *campaign* when it shows coordination: at
least ``min_accounts`` distinct accounts posted it, and at least
``min_burst`` of its posts fall within one ``window`` of time. Per cluster the
report keeps the signals an analyst weighs: accounts (qualified by platform,
so Twitter ``greenblock`` and Mastodon ``greenblock`` are two), posts per
account, the spread in time, the platforms, and the link domains and hashtags
its posts share.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Any

__all__ = ["Coordination", "Signals", "largest_burst"]

MAX_ACCOUNTS = 100_000
MAX_KEYS = 1_000  # distinct domains or hashtags kept a cluster: enough to rank the common ones
_DOMAIN = re.compile(r"(?i)\bhttps?://(?:www\.)?([a-z0-9.-]+)")
_HASHTAG = re.compile(r"(?<![\w#])#(\w+)")


@dataclass(frozen=True)
class Coordination:
    """The thresholds of a campaign (``report --min-accounts``, ``--min-burst``, ``--window``)."""

    min_accounts: int = 3
    min_burst: int = 3
    window_seconds: float = 3600.0
    co_post_seconds: float = 60.0  # two accounts' near-duplicates this close link them in the graph


class Signals:
    """The coordination signals of one cluster, fed its posts one by one."""

    __slots__ = ("accounts", "accounts_capped", "domains", "hashtags", "platforms")

    def __init__(self) -> None:
        self.accounts: set[int] = set()
        self.accounts_capped = False
        self.platforms: Counter[str] = Counter()
        self.domains: Counter[str] = Counter()
        self.hashtags: Counter[str] = Counter()

    def add(self, platform: str | None, author: str | None, text: str) -> None:
        if platform is not None:
            self.platforms[platform] += 1
        if author is not None and not self.accounts_capped:
            self.accounts.add(hash(f"{platform}:{author}"))
            self.accounts_capped = len(self.accounts) >= MAX_ACCOUNTS
        if "://" in text:
            _count(self.domains, (domain.lower().rstrip(".") for domain in _DOMAIN.findall(text)))
        if "#" in text:
            _count(self.hashtags, (_folded(tag) for tag in _HASHTAG.findall(text)))

    def to_json(self, size: int, seconds: array[int], coordination: Coordination) -> dict[str, Any]:
        burst = largest_burst(seconds, coordination.window_seconds)
        accounts = len(self.accounts)
        return {
            "accounts": accounts,
            "accounts_at_least": self.accounts_capped,
            "posts_per_account": round(size / accounts, 2) if accounts else None,
            "spread_seconds": (max(seconds) - min(seconds)) if seconds else None,
            "burst": {"posts": burst, "window_seconds": coordination.window_seconds},
            "platforms": dict(self.platforms.most_common()),
            "link_domains": dict(self.domains.most_common(5)),
            "hashtags": dict(self.hashtags.most_common(5)),
        }

    def coordinated(self, seconds: array[int], coordination: Coordination) -> bool:
        """A campaign: enough accounts, and a burst. Where no post names its
        account (plain text, generic JSON without a user), the burst decides."""
        accounts = len(self.accounts)
        return (accounts == 0 or accounts >= coordination.min_accounts) and largest_burst(
            seconds, coordination.window_seconds
        ) >= coordination.min_burst


def largest_burst(seconds: array[int], window: float) -> int:
    """The most posts within any ``window`` seconds (two pointers over the sorted times)."""
    times = sorted(seconds)
    most = start = 0
    for end, at in enumerate(times):
        while at - times[start] > window:
            start += 1
        most = max(most, end - start + 1)
    return most


def _count(counter: Counter[str], keys: Any) -> None:
    for key in keys:
        if key in counter or len(counter) < MAX_KEYS:
            counter[key] += 1


def _folded(tag: str) -> str:
    """A hashtag as the text is folded: full-width and other compatibility forms
    to their plain letters, and case (#ＫＹＤＥＲＢＹ counts as #kyderby)."""
    return unicodedata.normalize("NFKC", tag).casefold()
