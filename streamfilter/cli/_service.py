"""What the long-running commands add: the metrics endpoint, a periodic stats
line, and secrets taken from files and the environment instead of the command
line, where ``ps`` shows them."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote, urlsplit, urlunsplit

import anyio
import anyio.abc

from .._exceptions import StreamFilterError
from .._filter import StreamFilter
from ._console import notice
from ._parser import UsageError

__all__ = ["HEADERS_ENV", "REDIS_PASSWORD_ENV", "headers_of", "reporting", "with_redis_password"]

HEADERS_ENV = "STREAMFILTER_HEADERS"
REDIS_PASSWORD_ENV = "STREAMFILTER_REDIS_PASSWORD"


def headers_of(args: argparse.Namespace) -> dict[str, str]:
    """The HTTP headers of --header, --header-file and $STREAMFILTER_HEADERS
    (one 'Name: value' a line), later ones winning. A value never appears in
    an error message."""
    sources: list[tuple[str, str]] = [("--header", header) for header in args.header]
    if args.header_file:
        try:
            with open(args.header_file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read --header-file {args.header_file}: {exc.strerror or exc}") from None
        sources += [(f"{args.header_file}:{number}", line) for number, line in enumerate(text.splitlines(), 1)]
    environment = os.environ.get(HEADERS_ENV, "")
    sources += [(f"${HEADERS_ENV} line {n}", line) for n, line in enumerate(environment.splitlines(), 1)]
    headers: dict[str, str] = {}
    for where, line in sources:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or any(c.isspace() for c in name.strip()):
            raise UsageError(f"{where}: a header is 'Name: value'")
        if not value.strip().isprintable():
            # no server takes a header with a NUL or line break: refused once, here, and never shown
            raise UsageError(f"{where}: the value of header {name.strip()} holds a control character")
        headers[name.strip()] = value.strip()
    return headers


def with_redis_password(url: str) -> str:
    """``url`` with the password from $STREAMFILTER_REDIS_PASSWORD when it names none."""
    password = os.environ.get(REDIS_PASSWORD_ENV)
    parts = urlsplit(url)
    if not password or parts.password is not None or not parts.hostname:
        return url
    user = quote(parts.username or "", safe="")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def say(message: str) -> None:
    notice(message)


@asynccontextmanager
async def reporting(args: argparse.Namespace, sf: StreamFilter, task_group: anyio.abc.TaskGroup) -> AsyncIterator[None]:
    """Serve --metrics, and print a stats line every --stats-interval (from a
    task in ``task_group``), while the block runs."""
    server = None
    if getattr(args, "metrics", None):
        from ..metrics import parse_address, serve_metrics

        server = serve_metrics(sf, *parse_address(args.metrics))
        say(f"metrics on {server.url}/metrics, health on {server.url}/healthz")
    lines = anyio.CancelScope()
    interval = getattr(args, "stats_interval", 0) or 0
    if interval > 0:
        task_group.start_soon(_stats_lines, sf, interval, lines)
    try:
        yield
    finally:
        lines.cancel()
        if server is not None:
            server.close()


async def _stats_lines(sf: StreamFilter, interval: float, scope: anyio.CancelScope) -> None:
    last = None
    with scope:
        while True:
            await anyio.sleep(interval)
            try:
                # counted now: a count kept from before would differ from worker to worker
                stats = await anyio.to_thread.run_sync(functools.partial(sf.stats, recount=True))
            except StreamFilterError:
                return
            say(f"stats: {stats.line(last)}")
            last = stats
