"""What the Redis store and the Redis Streams source share: redis-py, imported
on demand, and the reading of a Redis URL with streamfilter's own query
parameters. Neither side reaches into the other's modules for them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._exceptions import ConfigError, MissingDependencyError
from ._redact import redact

__all__ = ["close_client", "import_redis", "split_redis_url"]


def import_redis() -> Any:
    """redis-py, or MissingDependencyError naming the extra that installs it."""
    try:
        import redis
        import redis.cluster
    except ImportError as exc:
        raise MissingDependencyError("the Redis store (redis-py)", "redis") from exc
    return redis


def close_client(client: Any) -> None:
    """Close a redis-py client and its connections. A Cluster client's own
    ``close`` leaves each node's pool connected (the pools are its own, not
    the nodes' clients'), so their sockets stayed open until the collector
    came, and warned then."""
    nodes = client.get_nodes() if hasattr(client, "get_nodes") else []
    client.close()
    for node in nodes:
        if node.redis_connection is not None:
            node.redis_connection.connection_pool.disconnect()


def split_redis_url(url: str, ours: Sequence[str], what: str) -> tuple[str, dict[str, str], float | None]:
    """(``url`` without streamfilter's own query parameters, the values of those
    named in ``ours``, ``retry_for`` if given) of a Redis URL that ``what``
    ("the Redis store", "consume") takes, or a ConfigError saying what is wrong."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"{redact(url)!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(f"{redact(url)!r}: {what} takes a redis://, rediss:// or unix:// URL")
    found: dict[str, str] = {}
    kept = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in ours or name == "retry_for":
            found[name] = value
        else:
            kept.append((name, value))
    retry_for: float | None = None
    if "retry_for" in found:
        value = found.pop("retry_for")
        try:
            retry_for = float(value)
        except ValueError:
            retry_for = math.nan
        if not (math.isfinite(retry_for) and retry_for >= 0):
            raise ConfigError(f"{redact(url)}: retry_for must be a finite number of seconds >= 0, got {value!r}")
    return urlunsplit(parts._replace(query=urlencode(kept))), found, retry_for
