"""The page's drilldown: each campaign's members and variants, the accounts view, and the script.

Each campaign opens (``<details>``, no script needed) to its members, their
platform-qualified handles, times and links to the posts where the platform
gives a way to make one, and to every variant text it kept, with the evasion
tricks in it flagged. The one script (``page.js``) searches and sorts the
campaigns and exports the members of those shown as CSV; the page's
Content-Security-Policy allows it alone, by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections import Counter
from datetime import UTC, datetime
from importlib import resources

from ._clusters import _Cluster
from ._tricks import tricks

__all__ = ["SCRIPT", "SCRIPT_HASH", "accounts_view", "campaign_details", "post_link"]

SCRIPT = resources.files(__package__).joinpath("page.js").read_text(encoding="utf-8")
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

# what a handle or id must look like to be put in a link
_TWITTER_HANDLE = re.compile(r"[A-Za-z0-9_]{1,15}")
_MASTODON_ACCT = re.compile(r"[A-Za-z0-9_]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_BLUESKY_PART = re.compile(r"[A-Za-z0-9:._-]+")


def post_link(platform: str | None, author: str | None, post_id: str | None) -> str | None:
    """A link to the post on its platform, where the ids make one: Twitter by
    handle and id, Bluesky by its at:// URI, Mastodon by a remote handle
    (user@instance; a local one does not name its server)."""
    if not post_id:
        return None
    if platform == "twitter" and author and _TWITTER_HANDLE.fullmatch(author) and post_id.isdigit():
        return f"https://x.com/{author}/status/{post_id}"
    if platform == "bluesky" and post_id.startswith("at://"):
        did, _, rest = post_id[5:].partition("/")
        collection, _, key = rest.partition("/")
        if collection == "app.bsky.feed.post" and _BLUESKY_PART.fullmatch(did) and _BLUESKY_PART.fullmatch(key):
            return f"https://bsky.app/profile/{did}/post/{key}"
    if platform == "mastodon" and author and _MASTODON_ACCT.fullmatch(author) and post_id.isdigit():
        user, _, instance = author.partition("@")
        return f"https://{instance}/@{user}/{post_id}"
    return None


def _iso(timestamp: float | None) -> str:
    return "" if timestamp is None else datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _account(platform: str | None, author: str | None) -> str:
    return f"{platform or '?'}:{author}" if author else ""


def campaign_details(cluster: _Cluster) -> str:
    """A campaign's drilldown: its members, then every variant it kept, flagged."""
    rows = []
    for timestamp, platform, author, post_id in cluster.members:
        link = post_link(platform, author, post_id) or ""
        account = _account(platform, author)
        shown_link = f'<a href="{html.escape(link)}" rel="noreferrer">post</a>' if link else ""
        rows.append(
            f'<tr class="member" data-platform="{html.escape(platform or "")}" data-account="{html.escape(account)}"'
            f' data-time="{_iso(timestamp)}" data-post="{html.escape(post_id or "")}" data-link="{html.escape(link)}">'
            f"<td>{html.escape(account)}</td><td>{_iso(timestamp)}</td><td>{html.escape(post_id or '')}</td>"
            f"<td>{shown_link}</td></tr>"
        )
    more = cluster.size - len(cluster.members)
    variants = "".join(
        f"<li>{html.escape(text)}{''.join(f' <mark>{trick}</mark>' for trick in tricks(text))}</li>"
        for text in cluster.variants or ()
    )
    return (
        f"<details><summary>members: showing {len(cluster.members):,} of {cluster.size:,}"
        f"{'' if more <= 0 else ' (the first ones)'}; {len(cluster.variants or ()):,} variant texts</summary>"
        '<table class="members"><tr><th>account</th><th>time (UTC)</th><th>post</th><th>link</th></tr>'
        f"{''.join(rows)}</table>"
        f'<ul class="all-variants">{variants}</ul></details>'
    )


def accounts_view(clusters: list[_Cluster], top: int) -> str:
    """The accounts that posted in the most campaigns, with their posts in them."""
    campaigns: dict[str, set[int]] = {}
    posts: Counter[str] = Counter()
    for rank, cluster in enumerate(clusters, 1):
        for account, count in cluster.by_account.items():  # every post, not the members the page lists
            campaigns.setdefault(account, set()).add(rank)
            posts[account] += count
    ranked = sorted(campaigns, key=lambda account: (-len(campaigns[account]), -posts[account], account))
    if not ranked:
        return "<p>No campaign post named its account.</p>"
    rows = "".join(
        f'<tr><td>{html.escape(account)}</td><td class="num">{len(campaigns[account]):,}</td>'
        f'<td class="num">{posts[account]:,}</td>'
        f"<td>{', '.join(f'#{rank}' for rank in sorted(campaigns[account])[:12])}</td></tr>"
        for account in ranked[:top]
    )
    return (
        f"<p>Showing {min(top, len(ranked)):,} of {len(ranked):,} accounts, those in the most campaigns first "
        "(every post of theirs in them counted).</p>"
        "<table><tr><th>account</th><th>campaigns</th><th>posts</th><th>which</th></tr>"
        f"{rows}</table>"
    )
