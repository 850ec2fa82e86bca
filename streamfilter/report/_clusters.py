"""Campaigns from verdicts: clusters of a novel post and the duplicates that name it.

One pass over the records and their verdicts, in input order. Memory holds
aggregates, never posts: per cluster of two posts or more its size, times,
its coordination signals (``_signals``: distinct accounts, counted exactly up
to ``MAX_ACCOUNTS``, platforms, link domains, hashtags), a few variants' ids
and the second of each post; for novel posts not yet in a cluster, the newest
``MAX_WAITING`` of them (their time, author and text), so that a duplicate
arriving later finds its original's text. A duplicate of a post evicted from
that window still makes a cluster, named after the post, with its own text.

Variant texts, for the page, are kept for at most ``MAX_TEXTS`` clusters: when
more hold them, only clusters of twice the size before keep theirs, so the
largest ones, which the page shows, always do.
"""

from __future__ import annotations

import hashlib
import json
import re
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import IO, Any, TypeVar, cast

from .._post import Post
from ._graph import CoordinationGraph
from ._members import MemberSpool
from ._signals import Coordination, Signals
from ._tricks import tricks

__all__ = ["MAX_TEXTS", "MAX_WAITING", "Clusters"]

MAX_WAITING = 200_000
_T = TypeVar("_T")
MAX_EXAMPLES = 5
MAX_TEXTS = 20_000
_VARIANT_TEXTS = 20
MAX_MEMBERS = 500  # members a cluster lists for the page, the first ones
_TEXT_CHARS = 280
_NUMBERS = re.compile(r"\d+")


class _Cluster:
    __slots__ = (
        "by_account",
        "examples",
        "first_seen",
        "id",
        "last_seen",
        "members",
        "seconds",
        "posted_by",
        "signals",
        "size",
        "text",
        "variants",
    )

    def __init__(
        self, post_id: str, text: str, timestamp: float | None, author: str | None, platform: str | None
    ) -> None:
        self.id = post_id
        # (time, platform, author, post id) of the first posts, the original first when known
        self.members: list[tuple[float | None, str | None, str | None, str | None]] = []
        if author is not None or timestamp is not None:
            self.members.append((timestamp, platform, author, post_id))
        self.text = text
        self.size = 1
        self.first_seen = self.last_seen = timestamp
        self.signals = Signals()
        self.signals.add(platform, author, text)
        # (second, platform-qualified account) of each post that names both, for the coordination graph
        self.posted_by: list[tuple[int, str]] = []
        if timestamp is not None and author is not None:
            self.posted_by.append((int(timestamp), f"{platform}:{author}"))
        # posts by each account, every one of them (members keeps the first MAX_MEMBERS)
        self.by_account: Counter[str] = Counter()
        if author is not None:
            self.by_account[_account_name(platform, author)] += 1
        self.examples: list[str] = []  # ids of variants whose text differs from the original's
        self.variants: list[str] | None = []  # texts of the first of them, while this cluster keeps texts
        self.seconds = array("q")  # each post's time, to the second: a burst of 14 s is drawn as one
        if timestamp is not None:
            self.seconds.append(int(timestamp))

    def add(self, post: Post) -> None:
        self.size += 1
        if len(self.members) < MAX_MEMBERS:
            self.members.append((post.timestamp, post.platform, post.author, post.id))
        timestamp = post.timestamp
        if timestamp is not None:
            self.first_seen = timestamp if self.first_seen is None else min(self.first_seen, timestamp)
            self.last_seen = timestamp if self.last_seen is None else max(self.last_seen, timestamp)
            self.seconds.append(int(timestamp))
        self.signals.add(post.platform, post.author, post.text)
        if timestamp is not None and post.author is not None:
            self.posted_by.append((int(timestamp), f"{post.platform}:{post.author}"))
        if post.author is not None:
            self.by_account[_account_name(post.platform, post.author)] += 1
        if len(self.examples) < MAX_EXAMPLES and post.id is not None and post.text[:_TEXT_CHARS] != self.text:
            text = post.text[:_TEXT_CHARS]
            if self.variants is None:
                self.examples.append(post.id)
            elif text not in self.variants:
                self.examples.append(post.id)
                if len(self.variants) < _VARIANT_TEXTS:
                    self.variants.append(text)
                elif tricks(text):  # the evasion tricks an analyst most wants to see take a plain one's place
                    plain = next((at for at, kept in enumerate(self.variants) if not tricks(kept)), None)
                    if plain is not None:
                        self.variants[plain] = text

    @property
    def timeline(self) -> Counter[int]:
        """Posts by second."""
        return Counter(self.seconds)

    @property
    def authors(self) -> int:
        """Distinct accounts, qualified by platform."""
        return len(self.signals.accounts)

    def to_json(self, coordination: Coordination) -> dict[str, Any]:
        return {
            "id": self.id,
            "size": self.size,
            "first_seen": _iso(self.first_seen),
            "last_seen": _iso(self.last_seen),
            "text": self.text,
            "examples": list(self.examples),
            # its posts, the original first, up to MAX_MEMBERS of them (size says how many there are)
            "members": [
                {"time": _iso(timestamp), "platform": platform, "account": author, "post": post_id}
                for timestamp, platform, author, post_id in self.members
            ],
            "coordinated": self.signals.coordinated(self.seconds, coordination),
            **self.signals.to_json(self.size, self.seconds, coordination),
        }


class Clusters:
    """Aggregates of a replay's verdicts; ``add`` each record's posts and verdicts in input order.

    ``hash_authors``: a key to hash every handle with (``--hash-authors``), so
    a report can be shared without naming accounts; the same account gets the
    same token throughout one report, and another key gives other tokens.
    ``spool``: where each post joined to a cluster is also written
    (``--members``)."""

    def __init__(
        self,
        coordination: Coordination | None = None,
        hash_authors: bytes | None = None,
        spool: MemberSpool | None = None,
    ) -> None:
        self.coordination = coordination or Coordination()
        self._author_key = hash_authors
        self.spool = spool
        self._views: dict[str, tuple[Coordination, Any]] = {}  # campaigns() and graph(), see _derived
        self.posts = 0
        self.verdicts: Counter[str] = Counter()
        self.invalid_reasons: Counter[str] = Counter()
        self.timeline: dict[str, Counter[int]] = {}  # verdict -> posts per minute
        # novel posts not yet in a cluster: (time, author, platform, text)
        self._waiting: OrderedDict[str, tuple[float | None, str | None, str | None, str]] = OrderedDict()
        self._clusters: dict[str, _Cluster] = {}
        self._with_texts = 0  # clusters that keep variant texts
        self._text_floor = 2  # the size a cluster needs to keep them

    def add(self, posts: Sequence[Post], verdicts: Sequence[Mapping[str, Any]]) -> None:
        """One record's posts (as the adapters read them) and its verdicts (as
        ``--verdicts`` writes them), matched by post id."""
        self._views.clear()
        line = verdicts[0]["line"] if verdicts else 0
        # a post without an id is "line:N" in its verdict
        by_id = {post.id if post.id is not None else f"line:{line}": post for post in posts}
        for verdict in verdicts:
            self.posts += 1
            kind = str(verdict["verdict"])
            self.verdicts[kind] += 1
            if kind == "invalid":
                self.invalid_reasons[_reason_kind(verdict.get("reason") or "")] += 1
                continue
            post = by_id.get(verdict["id"])
            if post is None:
                continue
            post = _printable(post)
            if self._author_key is not None and post.author is not None:
                post = replace(post, author=_hashed(post.author, self._author_key))
            if post.timestamp is not None:
                self.timeline.setdefault(kind, Counter())[int(post.timestamp // 60)] += 1
            duplicate_of = verdict.get("duplicate_of")
            if kind == "novel" and verdict["id"] is not None:
                self._waiting[str(verdict["id"])] = (
                    post.timestamp,
                    post.author,
                    post.platform,
                    post.text[:_TEXT_CHARS],
                )
                if len(self._waiting) > MAX_WAITING:
                    self._waiting.popitem(last=False)
            elif duplicate_of is not None:
                self._join(str(duplicate_of), post)

    def _join(self, original: str, post: Post) -> None:
        cluster = self._clusters.get(original)
        if cluster is None:
            waiting = self._waiting.pop(original, None)
            if waiting is None:  # its original left the window: named after it, with this post's text
                cluster = _Cluster(original, post.text[:_TEXT_CHARS], None, None, None)
                cluster.size = 0
            else:
                timestamp, author, platform, text = waiting
                cluster = _Cluster(original, text, timestamp, author, platform)
            cluster.variants = None  # until it is large enough (below)
            self._clusters[original] = cluster
            if self.spool is not None and waiting is not None:
                timestamp, author, platform, text = waiting
                self.spool.add(original, timestamp, platform, author, original, text)
        if cluster.variants is None and cluster.size + 1 >= self._text_floor:
            cluster.variants = []
            self._with_texts += 1
            if self._with_texts > MAX_TEXTS:
                self._raise_text_floor()
        cluster.add(post)
        if self.spool is not None:
            self.spool.add(original, post.timestamp, post.platform, post.author, post.id, post.text)

    def _raise_text_floor(self) -> None:
        """Keep variant texts only in clusters of at least twice the size before."""
        self._text_floor *= 2
        self._with_texts = 0
        for cluster in self._clusters.values():
            if cluster.variants is not None:
                if cluster.size < self._text_floor:
                    cluster.variants = None
                else:
                    self._with_texts += 1

    def clusters(self) -> list[_Cluster]:
        """Clusters of two posts or more, largest first (then earliest)."""
        return sorted(self._clusters.values(), key=lambda c: (-c.size, c.first_seen or 0.0, c.id))

    def graph(self) -> CoordinationGraph:
        """The co-post network of every cluster's accounts (see ``_graph``); built
        once for the JSON, the page and --graph alike, until a record is added."""
        return self._derived("graph", self._build_graph)

    def campaigns(self) -> list[_Cluster]:
        """The clusters that show coordination (``Coordination``), largest first."""
        return self._derived(
            "campaigns",
            lambda: [c for c in self.clusters() if c.signals.coordinated(c.seconds, self.coordination)],
        )

    def _build_graph(self) -> CoordinationGraph:
        graph = CoordinationGraph(self.coordination.co_post_seconds)
        for cluster in self._clusters.values():
            if len(cluster.posted_by) > 1:
                graph.add_cluster(cluster.id, cluster.posted_by)
        return graph

    def _derived(self, name: str, build: Callable[[], _T]) -> _T:
        """``build()``, kept while no record is added and the coordination rule stays."""
        kept = self._views.get(name)
        if kept is None or kept[0] is not self.coordination:
            kept = self._views[name] = (self.coordination, build())
        return cast(_T, kept[1])

    def write_json(self, out: IO[str], top: int | None = None) -> None:
        """The report as JSON: the ``top`` largest campaigns (all when None), written a
        campaign at a time, with every cluster and campaign counted."""
        clusters = self.clusters()
        campaigns = self.campaigns()
        coordination = self.coordination
        head = {
            "posts": self.posts,
            "verdicts": dict(sorted(self.verdicts.items())),
            "clustered_posts": sum(cluster.size for cluster in clusters),
            "clusters_total": len(clusters),
            "campaigns_total": len(campaigns),
            "coordination": {
                "min_accounts": coordination.min_accounts,
                "min_burst": coordination.min_burst,
                "window_seconds": coordination.window_seconds,
                "co_post_seconds": coordination.co_post_seconds,
            },
            "invalid_reasons": dict(self.invalid_reasons.most_common()),
        }
        groups = self.graph().groups([cluster.id for cluster in clusters])
        head["groups_total"] = len(groups)
        head["groups"] = [group.to_json() for group in (groups if top is None else groups[:top])]
        clusters = campaigns if top is None else campaigns[:top]
        out.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "clusters": [')
        for index, cluster in enumerate(clusters):
            out.write(("," if index else "") + "\n" + json.dumps(cluster.to_json(coordination), ensure_ascii=False))
        out.write("\n]}\n")


def _iso(timestamp: float | None) -> str | None:
    """An event time in ISO 8601, UTC, to the millisecond."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hashed(author: str, key: bytes) -> str:
    """A handle as a token: keyed, so that known handles cannot be tried against it."""
    return "acct-" + hashlib.blake2b(author.encode("utf-8", "surrogatepass"), digest_size=6, key=key).hexdigest()


def _reason_kind(reason: str) -> str:
    """An invalid line's reason without its particulars: "broken JSON", "line is N bytes, …"."""
    head = reason.split(":", 1)[0]
    return _NUMBERS.sub("N", head)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _printable(post: Post) -> Post:
    """``post`` with each lone surrogate of its text and author (JSON can carry
    them, UTF-8 cannot) shown as U+FFFD, as the filter judged the text: the
    report's JSON and page are UTF-8."""
    text, author = post.text, post.author
    if text.isascii() and (author is None or author.isascii()):
        return post
    clean_text = _LONE_SURROGATE.sub("\ufffd", text)
    clean_author = None if author is None else _LONE_SURROGATE.sub("\ufffd", author)
    if clean_text == text and clean_author == author:
        return post
    return replace(post, text=clean_text, author=clean_author)


def _account_name(platform: str | None, author: str) -> str:
    """An account as the report names it: its platform, then its handle."""
    return f"{platform or '?'}:{author}"
