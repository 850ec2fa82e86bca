"""Prometheus metrics and a health check for a running filter (the ``metrics`` extra).

``serve_metrics(sf, host, port)`` answers, in a background thread:

- ``/metrics``: Prometheus text format, read from ``sf.stats()`` at each scrape
  (one source of truth for the library, the endpoint and the CLI's stats line);
- ``/healthz``: 200 while a source is connected, or a batch was committed
  within ``healthy_within`` seconds (the filter's start counts as one), and
  503 otherwise, with the reason in the body.

Series (all prefixed ``streamfilter_``): ``posts_total{verdict}``,
``batch_seconds`` (histogram, a batch's first record arriving to its
verdicts), ``index_posts``, ``purged_total`` (not for Redis, which expires
keys itself), ``reconnects_total``, ``source_lag_seconds``,
``source_connected``, ``last_commit_timestamp_seconds``, the attack
signals (``dated_ahead_total``, ``dated_behind_total``, ``full_buckets_total``,
``verification_capped_total``, ``cross_platform_deletes_total``: see
``_stats.ATTACK_SIGNALS``), and the process's own ``process_*`` series.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ._exceptions import ConfigError, MissingDependencyError, StreamFilterError
from ._stats import ATTACK_SIGNALS, FilterStats

if TYPE_CHECKING:
    from ._filter import StreamFilter

__all__ = ["MetricsServer", "health", "parse_address", "serve_metrics"]


def _prometheus() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as exc:
        raise MissingDependencyError("the metrics endpoint (prometheus_client)", "metrics") from exc
    return prometheus_client


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (``[::1]:9108`` for IPv6) as (host, port); a ConfigError says what is wrong."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--metrics takes HOST:PORT, such as 127.0.0.1:9108, got {text!r}")
    return host, int(port)


def health(stats: FilterStats, healthy_within: float) -> tuple[bool, str]:
    """Whether the filter is healthy, and why."""
    if stats.source_connected:
        return True, "source connected"
    last = stats.last_commit_time if stats.last_commit_time is not None else stats.started
    quiet = time.time() - last
    if quiet <= healthy_within:
        return True, f"last batch committed {quiet:.1f} s ago"
    what = "source disconnected, " if stats.source_connected is False else ""
    return False, f"{what}no batch committed for {quiet:.0f} s"


class _Collector:
    """Reads the filter's stats at each scrape."""

    def __init__(self, sf: StreamFilter) -> None:
        self._sf = sf

    def describe(self) -> list[Any]:
        return []  # registering must not call stats()

    def collect(self) -> Iterator[Any]:
        core = _prometheus().core
        try:
            stats = self._sf.stats()
        except StreamFilterError:
            return  # closed: nothing to report
        posts = core.CounterMetricFamily("streamfilter_posts", "Posts judged, by verdict.", labels=["verdict"])
        for verdict, count in stats.posts.items():
            posts.add_metric([verdict], count)
        yield posts
        yield core.HistogramMetricFamily(
            "streamfilter_batch_seconds",
            "Seconds from a batch's first record arriving to its verdicts.",
            buckets=[
                ("+Inf" if bound == float("inf") else repr(bound), count)
                for bound, count in stats.batch_seconds.cumulative()
            ],
            sum_value=stats.batch_seconds.total_seconds,
        )
        if stats.index_posts is not None:
            yield core.GaugeMetricFamily("streamfilter_index_posts", "Live posts in the index.", stats.index_posts)
        if stats.purged is not None:
            yield core.CounterMetricFamily("streamfilter_purged", "Posts purged from the index.", stats.purged)
        yield core.CounterMetricFamily("streamfilter_reconnects", "Reconnects to the source.", stats.reconnects)
        if stats.source_connected is not None:
            yield core.GaugeMetricFamily(
                "streamfilter_source_connected", "1 while the source is connected.", int(stats.source_connected)
            )
        lag = stats.source_lag_seconds
        if lag is not None:
            yield core.GaugeMetricFamily(
                "streamfilter_source_lag_seconds", "Wall clock minus the newest event time seen.", lag
            )
        for name, count in stats.signals.items():
            yield core.CounterMetricFamily(f"streamfilter_{name}", ATTACK_SIGNALS[name].capitalize() + ".", count)
        if stats.last_commit_time is not None:
            yield core.GaugeMetricFamily(
                "streamfilter_last_commit_timestamp_seconds",
                "Unix time of the last committed batch.",
                stats.last_commit_time,
            )


_POLL_SECONDS = 0.02


class _Server(ThreadingMixIn, WSGIServer):
    """One thread a connection, at most ``MAX_CONNECTIONS`` at once (more are
    closed at once), each given ``_QuietHandler.timeout`` to send its request:
    a scraper that connects and says nothing cannot pile up threads."""

    daemon_threads = True
    MAX_CONNECTIONS = 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(self.MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    timeout = 5  # seconds a connection may take to send its request and read the answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not news


class MetricsServer:
    """The running endpoint; ``close()`` stops it. ``port`` is the one bound (for port 0)."""

    def __init__(self, sf: StreamFilter, host: str, port: int, healthy_within: float) -> None:
        prometheus = _prometheus()
        registry = prometheus.CollectorRegistry()
        registry.register(_Collector(sf))
        prometheus.ProcessCollector(registry=registry)
        metrics_app = prometheus.make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path == "/metrics":
                return metrics_app(environ, start_response)  # type: ignore[no-any-return]
            if path == "/healthz":
                try:
                    ok, reason = health(sf.stats(), healthy_within)
                except StreamFilterError:
                    ok, reason = False, "the filter is closed"
                status = "200 OK" if ok else "503 Service Unavailable"
                start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
                return [f"{'ok' if ok else 'unhealthy'}: {reason}\n".encode()]
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: try /metrics or /healthz\n"]

        try:
            server_class = _Server6 if ":" in host else _Server
            self._server = make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
        self.host = host
        self.port = int(self._server.server_address[1])
        # a short poll: close() waits for the serving loop to notice, once per poll (0.5 s by default)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(_POLL_SECONDS,), name="streamfilter-metrics", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve_metrics(
    sf: StreamFilter, host: str = "127.0.0.1", port: int = 9108, *, healthy_within: float = 60.0
) -> MetricsServer:
    """Serve ``/metrics`` and ``/healthz`` for ``sf`` on ``host:port`` until ``close()``."""
    return MetricsServer(sf, host, port, healthy_within)
