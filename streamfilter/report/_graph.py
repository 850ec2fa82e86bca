"""The coordination graph: which accounts post near-duplicates of each other within moments.

The co-tweet network of the research on coordinated behaviour (CooRTweet,
Righetti and Balluff; the coordination-network-toolkit, Graham et al.):
accounts are nodes, and two accounts are linked when they posted posts of
one cluster (near-duplicates of each other) within ``window`` seconds of
each other; the edge's weight counts those co-posts. Its connected
components are the groups of accounts that coordinate; the largest come
first.

Per clustered post the report keeps its account and its second, and the
accounts' names (qualified by platform) once. The pairs of a cluster are
found over its posts sorted by time, each against the posts after it within
the window. A cluster with more than ``HUB_FROM`` accounts posting within
one window is a clique no reader or Gephi can use (50,000 accounts in ten
minutes make two million pairs): its accounts are linked to a hub, one node
for the campaign (``kind`` "campaign" in the GraphML and GEXF, its edges
``via_hub``), which makes them the same one group.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import MissingDependencyError

__all__ = ["HUB_FROM", "CoordinationGraph", "Group", "natural_key"]

HUB_FROM = 100  # accounts posting within one window, past which a cluster is drawn as a hub
_HUB = "campaign:"  # a hub's node name: this, then the cluster's id


@dataclass
class Group:
    """A connected group of coordinating accounts."""

    accounts: list[str]  # platform-qualified names, the most active first
    links: int  # edges among them (an account's edge to a hub counts once)
    co_posts: int  # the sum of their weights
    campaigns: list[str] = field(default_factory=list)  # cluster ids, largest first
    hubs: list[str] = field(default_factory=list)  # campaigns drawn as a hub (``HUB_FROM``)

    def to_json(self, shown_accounts: int = 50) -> dict[str, Any]:
        return {
            "size": len(self.accounts),
            "accounts": self.accounts[:shown_accounts],
            "links": self.links,
            "co_posts": self.co_posts,
            "campaigns": self.campaigns[:20],
            "hubs": self.hubs[:20],
        }


class CoordinationGraph:
    """Edges between accounts, built cluster by cluster (``add_cluster``)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.weights: Counter[tuple[str, str]] = Counter()
        self.posts: Counter[str] = Counter()  # clustered posts by account
        self.clusters_of: dict[tuple[str, str], set[str]] = {}
        self.hubs: dict[str, str] = {}  # hub node -> its cluster id

    def add_cluster(self, cluster_id: str, posts: Iterable[tuple[float, str]]) -> None:
        """One cluster's posts as (time, account name)."""
        timed = sorted(posts)
        for _, account in timed:
            self.posts[account] += 1
        if _most_within(timed, self.window) > HUB_FROM:
            self._add_hub(cluster_id, timed)
            return
        for at, (time, account) in enumerate(timed):
            for later_time, other in timed[at + 1 :]:
                if later_time - time > self.window:
                    break
                if other == account:
                    continue
                edge = (account, other) if account < other else (other, account)
                self.weights[edge] += 1
                self.clusters_of.setdefault(edge, set()).add(cluster_id)

    def _add_hub(self, cluster_id: str, timed: Sequence[tuple[float, str]]) -> None:
        """Link each account of a cluster too large for pairs to its hub, weighted by its posts there."""
        hub = _HUB + cluster_id
        self.hubs[hub] = cluster_id
        for _, account in timed:
            edge = (account, hub)
            self.weights[edge] += 1
            self.clusters_of.setdefault(edge, set()).add(cluster_id)

    def groups(self, order: Sequence[str]) -> list[Group]:
        """The connected groups, largest first (then by co-posts); ``order``
        ranks campaign ids, largest first."""
        rank = {cluster_id: index for index, cluster_id in enumerate(order)}
        neighbours: dict[str, set[str]] = {}
        for left, right in self.weights:
            neighbours.setdefault(left, set()).add(right)
            neighbours.setdefault(right, set()).add(left)
        component: dict[str, int] = {}
        members: list[list[str]] = []
        for start in neighbours:
            if start in component:
                continue
            component[start] = len(members)
            found_here, stack = [], [start]
            while stack:
                node = stack.pop()
                found_here.append(node)
                for other in neighbours[node]:
                    if other not in component:
                        component[other] = len(members)
                        stack.append(other)
            members.append(found_here)
        edges: list[list[tuple[str, str]]] = [[] for _ in members]
        for edge in self.weights:
            edges[component[edge[0]]].append(edge)
        found = []
        for names, inside in zip(members, edges, strict=True):
            campaigns = set().union(*(self.clusters_of[edge] for edge in inside))
            accounts = [name for name in names if name not in self.hubs]
            found.append(
                Group(
                    accounts=sorted(accounts, key=lambda name: (-self.posts[name], natural_key(name))),
                    links=len(inside),
                    co_posts=sum(self.weights[edge] for edge in inside),
                    campaigns=sorted(campaigns, key=lambda cluster_id: rank.get(cluster_id, len(rank))),
                    hubs=sorted(
                        (self.hubs[name] for name in names if name in self.hubs),
                        key=lambda cluster_id: rank.get(cluster_id, len(rank)),
                    ),
                )
            )
        return sorted(found, key=lambda group: (-len(group.accounts), -group.co_posts))

    def write(self, path: str, campaign_ids: Collection[str]) -> None:
        """The graph as GraphML (``.graphml``) or GEXF (``.gexf``), which Gephi opens (needs networkx).

        A link's ``clusters`` counts the near-duplicate clusters its two
        accounts co-posted in, its ``campaigns`` those of them that are
        campaigns (``campaign_ids``: clusters that show coordination)."""
        try:
            import networkx  # type: ignore[import-untyped]
        except ImportError as exc:
            raise MissingDependencyError("the coordination graph export (networkx)", "report") from exc
        graph = networkx.Graph()
        for name, posts in self.posts.items():
            platform, _, handle = name.partition(":")
            graph.add_node(
                _xml_safe(name), kind="account", platform=_xml_safe(platform), handle=_xml_safe(handle), posts=posts
            )
        for hub, cluster_id in self.hubs.items():
            graph.add_node(_xml_safe(hub), kind="campaign", platform="", handle=_xml_safe(cluster_id), posts=0)
        campaign_ids = set(campaign_ids)
        for (left, right), weight in self.weights.items():
            clusters = self.clusters_of[(left, right)]
            graph.add_edge(
                _xml_safe(left),
                _xml_safe(right),
                weight=weight,
                clusters=len(clusters),
                campaigns=len(clusters & campaign_ids),
                via_hub=right in self.hubs,
            )
        if path.endswith(".gexf"):
            networkx.write_gexf(graph, path)
        else:
            networkx.write_graphml(graph, path)


# What XML 1.0 cannot hold, even escaped: C0 controls but tab, newline and
# carriage return; lone surrogates; U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(text: str) -> str:
    """``text`` with each character XML cannot hold written out as ``\\uXXXX``:
    a handle may hold any of them, and GraphML and GEXF files are XML. Written
    out, not dropped, so that two handles stay two nodes."""
    return _NOT_XML.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def _most_within(timed: Sequence[tuple[float, str]], window: float) -> int:
    """The most distinct accounts posting within one ``window`` of ``timed``
    (sorted by time), counted up to ``HUB_FROM + 1``."""
    counts: Counter[str] = Counter()
    start = most = 0
    for time, account in timed:
        counts[account] += 1
        while timed[start][0] < time - window:
            first = timed[start][1]
            counts[first] -= 1
            if not counts[first]:
                del counts[first]
            start += 1
        most = max(most, len(counts))
        if most > HUB_FROM:
            break
    return most


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """``name``'s sort key with its runs of digits as numbers: user2 before user10."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part)
