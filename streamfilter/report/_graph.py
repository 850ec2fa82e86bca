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
the window; a cluster whose bursts would make more than ``MAX_PAIRS`` pairs
stops there (the page and the JSON say so): a burst of thousands of posts
in one window is one group whatever its last pairs say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import MissingDependencyError

__all__ = ["CoordinationGraph", "Group", "MAX_PAIRS"]

MAX_PAIRS = 2_000_000  # co-post pairs looked at a cluster, at most


@dataclass
class Group:
    """A connected group of coordinating accounts."""

    accounts: list[str]  # platform-qualified names, the most active first
    links: int  # edges among them
    co_posts: int  # the sum of their weights
    campaigns: list[str] = field(default_factory=list)  # cluster ids, largest first

    def to_json(self, shown_accounts: int = 50) -> dict[str, Any]:
        return {
            "size": len(self.accounts),
            "accounts": self.accounts[:shown_accounts],
            "links": self.links,
            "co_posts": self.co_posts,
            "campaigns": self.campaigns[:20],
        }


class CoordinationGraph:
    """Edges between accounts, built cluster by cluster (``add_cluster``)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.weights: Counter[tuple[str, str]] = Counter()
        self.posts: Counter[str] = Counter()  # clustered posts by account
        self.campaigns_of: dict[tuple[str, str], set[str]] = {}
        self.truncated: list[str] = []  # clusters that reached MAX_PAIRS

    def add_cluster(self, cluster_id: str, posts: Iterable[tuple[float, str]]) -> None:
        """One cluster's posts as (time, account name)."""
        timed = sorted(posts)
        for _, account in timed:
            self.posts[account] += 1
        pairs = 0
        for at, (time, account) in enumerate(timed):
            for later_time, other in timed[at + 1 :]:
                if later_time - time > self.window:
                    break
                pairs += 1
                if pairs > MAX_PAIRS:
                    self.truncated.append(cluster_id)
                    return
                if other == account:
                    continue
                edge = (account, other) if account < other else (other, account)
                self.weights[edge] += 1
                self.campaigns_of.setdefault(edge, set()).add(cluster_id)

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
            campaigns = set().union(*(self.campaigns_of[edge] for edge in inside))
            found.append(
                Group(
                    accounts=sorted(names, key=lambda name: (-self.posts[name], name)),
                    links=len(inside),
                    co_posts=sum(self.weights[edge] for edge in inside),
                    campaigns=sorted(campaigns, key=lambda cluster_id: rank.get(cluster_id, len(rank))),
                )
            )
        return sorted(found, key=lambda group: (-len(group.accounts), -group.co_posts))

    def write(self, path: str) -> None:
        """The graph as GraphML (``.graphml``) or GEXF (``.gexf``), which Gephi opens (needs networkx)."""
        try:
            import networkx  # type: ignore[import-untyped]
        except ImportError as exc:
            raise MissingDependencyError("the coordination graph export (networkx)", "report") from exc
        graph = networkx.Graph()
        for name, posts in self.posts.items():
            platform, _, handle = name.partition(":")
            graph.add_node(name, platform=platform, handle=handle, posts=posts)
        for (left, right), weight in self.weights.items():
            graph.add_edge(left, right, weight=weight, campaigns=len(self.campaigns_of[(left, right)]))
        if path.endswith(".gexf"):
            networkx.write_gexf(graph, path)
        else:
            networkx.write_graphml(graph, path)
