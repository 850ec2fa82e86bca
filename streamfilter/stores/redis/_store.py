"""The Redis store: a band store that many workers share, on Redis or a Redis Cluster.

Keys, under a prefix (``sf`` unless the URL says ``?prefix=name``): the pinned
settings (``config``, ``format``, ``layout``), the ``clock``, the ``serial``
members are numbered by, ``progress:<host name>`` (input path -> lines done),
``resume`` (live source -> its resume point, shared by every host, since a
URL names the same stream anywhere), and the index in time slices of band
buckets and record hashes (``_layout``).

**Atomicity.** A batch reads its band keys and their posts' records, and the
one batch judge (``_judge``) ranks and verifies them, as for every store.
On a single Redis one Lua script (``commit.lua``) then records the batch's
novel posts, unless a record a verdict names is gone (the batch is judged
again). A novel post under whose band keys other workers filed posts since
the batch read is held back, and the others are recorded; the posts filed
meanwhile are verified, a held post with a near-duplicate among them
becomes its duplicate (it came first; the batch is judged again if another
of its posts named that one), and the others are sent again. So no two
workers can both pass copies of a text, nor near-duplicates.
On a Cluster (``_recording``), keys live in different slots and no script can
span them, so a batch runs in steps, each one script per node over the keys
that node holds:

1. read the band buckets and the candidates' records, and judge;
2. *claim* each novel post's text (set only when no live record of another
   post holds the claim), recording the post with it. Copies of one
   normalised text all claim the same field, so exactly one of them passes,
   whichever workers they reach. A post that loses its claim becomes a
   duplicate of the holder, and a later post of its batch that was judged a
   duplicate of it is judged again;
3. file the novel posts in their band buckets;
4. *recheck*: read those band keys again. A near-duplicate that another
   worker recorded meanwhile is concurrent; of the two, the one that came
   second under the smallest band key they share defers to the other. Both
   look at the same key, whose order never changes, so at most one defers,
   and the second to append always sees the first, so one does;
5. *pin* every post that a verdict names (each duplicate's match, and each
   post deferred to), then drop each deferring post unless it was pinned.
   Pin and drop are atomic on the record, so a verdict never names a
   post that did not pass; a duplicate whose match was dropped first is
   judged again.

What can still race: a pinned post that wanted to defer stays, and both pass.
Nothing can make both posts of a pair drop.

**Expiry.** In event time, by whole time slices (``_layout``), with a
wall-clock TTL on every key as a backstop; nothing is ever scanned.

**Failures.** A dropped connection is retried with exponential backoff and
jitter for ``retry_for`` seconds, then the batch fails with a StoreError. A
batch whose reply was lost may be replayed: a stored record with the same post
id is the post itself, recorded by that earlier attempt (or by a run killed
before its output was written), and the post passes again. That is the
at-least-once bound: a post is repeated, never lost. It also means that a
platform delivering one post id twice gets it passed twice, as any
at-least-once consumer must expect. Posts without an id get ``line:N``, which
repeats across inputs, so for them the timestamp must match as well.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..._backoff import Backoff
from ..._clock import checked_clock
from ..._exceptions import ConfigError, StoreError, StreamFilterError
from ..._judge import TransactionalStore, judge_batch
from ..._redact import redact
from ..._redis_client import close_client, import_redis, split_redis_url
from ..._values import Matches, Sketches
from .._base import IndexSettings, check_fingerprint, with_seed
from ._layout import Layout
from ._recording import ClusterRecording
from ._scripts import script
from ._transaction import _INDEX_GONE, RedisTransaction, _emptied

__all__ = ["RedisStore"]

logger = logging.getLogger("streamfilter")

_FORMAT = b"streamfilter-redis-4"
_LENGTH = struct.Struct(">I")
# The server settings the key layout is made for (docs/guides/production.md):
# a record hash of up to this many posts, of records up to this many bytes, is a listpack.
LISTPACK_SETTINGS = {"hash-max-listpack-entries": 1024, "hash-max-listpack-value": 1024}


def _split_url(url: str) -> tuple[str, str, float | None]:
    """(url without our own query parameters, key prefix, retry_for if given)."""
    bare, found, retry_for = split_redis_url(url, ("prefix",), "the Redis store")
    prefix = found.get("prefix", "sf")
    if not prefix:
        raise ConfigError(f"{redact(url)}: the prefix parameter is empty")
    return bare, prefix, retry_for


def _slots_moved(exc: BaseException) -> bool:
    """A Cluster answer that means: this key is served elsewhere now, or soon."""
    message = str(exc)
    return any(sign in message for sign in ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "non local key", "not served"))


# Deletes a record only while it holds the value read.
_FORGET = (
    "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0"
)
# What redis-py's ConnectionError says of a host name that does not resolve
# (not "Temporary failure in name resolution", which may pass).
_UNKNOWN_HOST = ("Name or service not known", "nodename nor servname provided", "No address associated")
# What redis-py raises, past its own errors, on an answer it cannot read.
_MALFORMED_REPLY = (AttributeError, TypeError, ValueError, IndexError, KeyError)


# Keys whose node a Cluster store keeps (``_on_each_node``): a slice's band,
# record and claim buckets, for a few slices at the default layout.
_NODES_KEPT = 1 << 16


class RedisStore(TransactionalStore):
    """A band store on Redis or Redis Cluster, shared by any number of workers.

    ``url`` is a redis-py URL (``redis://host:6379/0``, ``rediss://`` for TLS);
    ``?prefix=name`` keeps several indexes apart on one server. A Cluster is
    detected from the node the URL names. ``retry_for`` (or ``?retry_for=``
    in the URL, in seconds; 30 by default) is how long a dropped connection is
    retried before a batch fails.
    """

    def __init__(self, url: str, *, retry_for: float | None = None) -> None:
        self.url, self.prefix, from_url = _split_url(url)
        self.retry_for = retry_for if retry_for is not None else from_url if from_url is not None else 30.0
        self._redis: Any = None
        self._client: Any = None
        self.cluster = False
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()
        self._answered = False  # the server has answered once: a later failure is a lost connection
        self._committed = 0  # batches this store committed, for the message when Redis goes away
        # Cluster: key -> its node, as the client's slot map said; forgotten
        # at any retry, and when it holds _NODES_KEPT keys (slices roll on)
        self._node_of: dict[bytes, Any] = {}
        key = self.prefix.encode()
        self._config_key = key + b":config"
        self._format_key = key + b":format"
        self._clock_key = key + b":clock"
        # where the clock is, as a message names it
        self.clock_location = f"the key {self._clock_key.decode(errors='replace')!r} at {self.location}"
        self._serial_key = key + b":serial"
        self._filing_key = key + b":filing"  # Cluster: batches that began filing, those under way (_recording)
        # Input paths are only unique on one machine: each host keeps its own
        # progress, so workers elsewhere reading a file of the same name never
        # skip each other's lines on --resume.
        self._progress_key = key + b":progress:" + socket.gethostname().encode()
        self._resume_key = key + b":resume"
        self._prefix_bytes = key
        self._slices_key = key + b":slices"
        self._layout_key = key + b":layout"
        self._layout = Layout(0.0)

    @property
    def location(self) -> str:
        """Where the index is, as messages show it: without the password."""
        return f"{redact(self.url)} (prefix {self.prefix})"

    # -- opening -------------------------------------------------------------
    def _connect(self) -> None:
        if self._client is not None:
            return
        redis = self._redis = import_redis()
        self._transient: tuple[type[BaseException], ...] = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
            redis.exceptions.ClusterDownError,
            redis.exceptions.TryAgainError,
        )
        try:
            client = redis.Redis.from_url(self.url, socket_timeout=30, socket_connect_timeout=5)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {redact(self.url)}: {exc}") from exc

        def probe() -> bool:
            info = client.info("cluster")
            return bool(info.get("cluster_enabled"))

        try:
            self.cluster = self._retrying("connect", probe)
        except TypeError as exc:  # redis-py passes unknown URL parameters on to its connection class
            client.close()
            unknown = str(exc).rpartition("argument ")[2] or str(exc)
            raise ConfigError(
                f"{redact(self.url)}: Redis does not know the URL parameter {unknown} "
                "(streamfilter's own are prefix and retry_for)"
            ) from None
        if self.cluster:
            client.close()
            client = redis.cluster.RedisCluster.from_url(self.url, socket_timeout=30, socket_connect_timeout=5)
            self._raise_clock = client.register_script(script("raise_clock"))
            self._filing = client.register_script(script("filing"))
        else:
            self._read_batch = client.register_script(script("read_batch"))
            self._commit = client.register_script(script("commit"))
        self._client = client
        self._node_of.clear()  # nodes of a client before this one hold its closed connections

    def open(self, settings: IndexSettings) -> dict[str, int | str]:
        """Open the index, creating it if needed, and pin ``settings`` in it or check them against
        what it pinned; returns the pinned fingerprint, with the index's seed. An open that
        fails closes its connections (as the LMDB store closes its environment)."""
        self._connect()
        try:
            return self._pin(settings)
        except BaseException:
            self.close()
            raise

    def _pin(self, settings: IndexSettings) -> dict[str, int | str]:
        requested = dict(settings.fingerprint)
        # the first worker's seed is pinned (SET NX); every other adopts it
        encoded = json.dumps(with_seed(requested), sort_keys=True).encode()

        # the key layout is pinned by the first worker, from its TTL (see _layout)
        layout = json.dumps(dataclasses.asdict(Layout.for_ttl(settings.ttl_seconds))).encode()

        def pin() -> tuple[bytes | None, bytes | None, bytes | None]:
            client = self._client
            client.set(self._format_key, _FORMAT, nx=True)
            client.set(self._config_key, encoded, nx=True)
            client.set(self._layout_key, layout, nx=True)
            return client.get(self._format_key), client.get(self._config_key), client.get(self._layout_key)

        stored_format, stored, stored_layout = self._retrying("open", pin)
        if stored_format != _FORMAT:
            raise StoreError(
                f"{self.location} holds keys of format {stored_format!r}, expected {_FORMAT!r}: "
                "start on a fresh prefix (?prefix=name), or delete the old keys"
            )
        pinned = self._pinned(self._config_key, stored)
        check_fingerprint(self.location, pinned, requested)
        try:
            self._layout = Layout(**self._pinned(self._layout_key, stored_layout))
        except TypeError as exc:  # fields that are not the layout's
            raise StoreError(self._edited(self._layout_key, f"is not a key layout ({exc})")) from exc
        self._settings = settings
        self._check_server_settings()
        return pinned

    def _check_server_settings(self) -> None:
        """Warn when the server stores records as hash tables instead of listpacks
        (``_layout``): about 50 bytes more a post. Managed servers may refuse CONFIG: then nothing is said."""
        client = self._client
        nodes = [client.get_redis_connection(node) for node in client.get_primaries()] if self.cluster else [client]
        try:
            found = [node.config_get("hash-max-listpack-*") for node in nodes]
        except self._redis.exceptions.RedisError:
            return
        low = sorted(
            {name for got in found for name, want in LISTPACK_SETTINGS.items() if int(got.get(name, want)) < want}
        )
        if low:
            settings = ", ".join(f"{name} {LISTPACK_SETTINGS[name]}" for name in low)
            logger.warning(
                "Redis at %s: %s below what the index is laid out for; records take about 50 bytes "
                'more a post until the server sets %s (the guide Running in production, "Sizing the index")',
                self.location,
                " and ".join(low),
                settings,
            )

    def pinned_settings(self) -> dict[str, int | str] | None:
        """The settings pinned here, or None when nothing is pinned yet."""
        opened = self._client is not None
        try:
            self._connect()
            stored = self._retrying("read the pinned settings", lambda: self._client.get(self._config_key))
        finally:
            if not opened:
                self.close()
        return None if stored is None else self._pinned(self._config_key, stored)

    def _pinned(self, key: bytes, stored: bytes | None) -> dict[str, Any]:
        """The JSON object a worker pinned under ``key``, or a StoreError naming the key."""
        try:
            value = json.loads(stored or b"")
        except (ValueError, UnicodeDecodeError) as exc:
            raise StoreError(self._edited(key, f"is not JSON ({exc})")) from exc
        if not isinstance(value, dict):
            raise StoreError(self._edited(key, f"holds a {type(value).__name__}, not a JSON object"))
        return value

    def _edited(self, key: bytes, problem: str) -> str:
        return (
            f"the key {key.decode(errors='replace')!r} at {self.location} {problem}: it was edited by hand or "
            "written by something else; delete the index's keys and start again, or use a fresh prefix (?prefix=name)"
        )

    # -- the one operation ---------------------------------------------------
    def begin(self) -> RedisTransaction:
        """A batch's index transaction: it reads for the judge, and writes only when it records."""
        settings = self._settings
        if settings is None:
            raise StoreError("the Redis store is not open")
        txn: RedisTransaction = self._retrying("read the index", lambda: self._transaction(settings))
        return txn

    def _commit_script(self, *, keys: list[bytes], args: list[Any]) -> Any:
        return self._retrying("record a batch", lambda: self._commit(keys=keys, args=args))

    def _transaction(self, settings: IndexSettings, depth: int = 0) -> RedisTransaction:
        """A transaction on this store, handed what it uses of it and how a Cluster batch records."""
        return RedisTransaction(self, settings, depth, ClusterRecording)

    def _judge_again(self, sketches: Sketches, depth: int) -> Matches:
        """Judge and record ``sketches`` anew, in a transaction of their own (a Cluster's retry)."""
        settings = self._settings
        assert settings is not None
        txn: RedisTransaction = self._retrying("read the index", lambda: self._transaction(settings, depth))
        return txn.record(sketches, judge_batch(txn, sketches, settings))

    def _parts(self) -> dict[int, int]:
        """Every part of the index's slices and its bucket bits (``_layout``)."""
        meta = self._retrying("read the slices", lambda: self._client.hgetall(self._slices_key))
        return {int(name[1:]): int(bits) for name, bits in meta.items() if name.startswith(b"b")}

    def _parts_for(self, posts: Mapping[int, int], entries: int) -> dict[int, tuple[int, int]]:
        """Time slice -> (part, bits) its posts go to, for ``posts`` (slice ->
        how many a batch records in it), which are counted into the parts;
        a new slice or a full part opens a part (``_layout``)."""
        if not posts:
            return {}
        args: list[object] = [self.prefix, self._layout.first_bits, entries]
        for slice_, count in posts.items():
            args += [slice_, count]
        replies = self._retrying(
            "size the slices", lambda: self._client.eval(script("slices"), 1, self._slices_key, *args)
        )
        return {slice_: (int(part), int(bits)) for slice_, (part, bits) in zip(posts, replies, strict=True)}

    def _drop_dead(self, parts: Mapping[int, int], clock: float) -> None:
        """Drop, whole, every slice a TTL behind ``clock``: each of its parts (see ``_layout``)."""
        settings = self._settings
        assert settings is not None
        layout = self._layout
        live_from = layout.live_from(clock, settings.ttl_seconds)
        for part, bits in parts.items():
            if layout.slice_of_part(part) < live_from:
                self._on_nodes("drop a slice", script("unlink"), layout.keys_of_part(self._prefix_bytes, part, bits))
                fields = [b"b%d" % part, b"n%d" % part]
                self._retrying("drop a slice", functools.partial(self._client.hdel, self._slices_key, *fields))

    def _commit_progress(self, progress: Mapping[str, int | str] | None) -> None:
        """Record a batch's progress, after the batch and its output, so a
        crash between them repeats the batch, never skips it."""
        lines = {name: done for name, done in (progress or {}).items() if isinstance(done, int)}
        points = {name: point for name, point in (progress or {}).items() if isinstance(point, str)}
        if lines:
            self._retrying("record progress", lambda: self._client.hset(self._progress_key, mapping=lines))
        if points:
            self._retrying("record the resume point", lambda: self._client.hset(self._resume_key, mapping=points))
        self._committed += 1

    def _read_fields(
        self, what: str, keys: Sequence[bytes], fields: Sequence[Sequence[bytes]]
    ) -> list[list[bytes | None]]:
        """The values of ``fields[i]`` of hash ``keys[i]``, one script a node."""
        replies = self._on_nodes(what, script("read"), keys, lambda n: [len(fields[n]), *fields[n]])
        values: list[list[bytes | None]] = []
        for reply in replies:
            view, at, found = memoryview(reply), 0, []
            while at < len(view):
                (length,) = _LENGTH.unpack_from(view, at)
                found.append(bytes(view[at + 4 : at + 3 + length]) if length else None)
                at += 4 + max(length - 1, 0)
            values.append(found)
        return values

    def _on_nodes(
        self,
        what: str,
        script: str,
        keys: Sequence[bytes],
        args_of: Callable[[int], list[Any]] = lambda _: [],
        leading: Sequence[Any] = (),
    ) -> list[Any]:
        """Run ``script`` once per node over the keys that node holds, retried
        as a whole (slots may have moved); replies in key order."""
        if not keys:
            return []
        replies: list[Any] = self._retrying(what, lambda: self._on_each_node(script, keys, args_of, leading))
        return replies

    def _on_each_node(
        self, script: str, keys: Sequence[bytes], args_of: Callable[[int], list[Any]], leading: Sequence[Any]
    ) -> list[Any]:
        client = self._client
        if not self.cluster:
            args = list(leading)
            for index, key in enumerate(keys):
                args.append(key)
                args += args_of(index)
            reply = client.eval(script, 0, *args)
            return list(reply) if isinstance(reply, list) else [None] * len(keys)
        groups: dict[str, tuple[Any, list[int]]] = {}
        node_of = self._node_of
        if len(node_of) > _NODES_KEPT:
            node_of.clear()
        for index, key in enumerate(keys):
            node = node_of.get(key)
            if node is None:
                node = node_of[key] = client.get_node_from_key(key)
            groups.setdefault(node.name, (node, []))[1].append(index)
        replies: list[Any] = [None] * len(keys)
        # Every node's script at once: sent to all, then each answer read, so
        # the nodes work side by side instead of one after another.
        sent: list[tuple[Any, Any, list[int]]] = []  # (pool, connection, indices)
        try:
            for node, indices in groups.values():
                pool = client.get_redis_connection(node).connection_pool
                connection = pool.get_connection()
                sent.append((pool, connection, indices))
                args = list(leading)
                for index in indices:
                    args.append(keys[index])
                    args += args_of(index)
                connection.send_command("EVAL", script, 0, *args)
            for _, connection, indices in sent:
                reply = connection.read_response()
                if isinstance(reply, list):
                    for index, value in zip(indices, reply, strict=True):
                        replies[index] = value
        except BaseException:
            for _, connection, _ in sent:
                connection.disconnect()  # an answer may be left unread on it
            raise
        finally:
            for pool, connection, _ in sent:
                pool.release(connection)
        return replies

    # -- retries ---------------------------------------------------------------
    def _unreachable(self, what: str, attempt: int, waited: float, exc: BaseException, unknown_host: bool) -> str:
        """What to tell a user when Redis cannot be reached: what failed, for how long, and what is safe."""
        if unknown_host:
            return f"Redis at {self.location}: no such host ({exc}); check the URL"
        tried = f"{what} failed {attempt} times over {waited:.1f} s ({exc})"
        if self._committed:
            return (
                f"Redis at {self.location} is unreachable: {tried}; the {self._committed:,} batches committed "
                "before are intact: rerun with --resume once it is back"
            )
        if not self._answered:
            return f"Redis at {self.location} is unreachable: {tried}; it never answered, and nothing was committed"
        return f"Redis at {self.location} is unreachable: {tried}; nothing was committed in this run"

    def _retrying(self, what: str, operation: Callable[[], Any]) -> Any:
        backoff = Backoff(0.05, 5.0, budget=self.retry_for)
        attempt = 0
        while True:
            attempt += 1
            try:
                result = operation()
                self._answered = True
                return result
            except self._redis.exceptions.AuthenticationError as exc:
                # a ConnectionError to redis-py, but retrying cannot help
                raise StoreError(
                    f"Redis at {self.location}: {what} failed: authentication failed ({exc}); "
                    "check the user name and password in the URL"
                ) from exc
            except self._redis.exceptions.RedisError as exc:
                if _INDEX_GONE in str(exc):
                    raise StoreError(_emptied(self.location)) from exc
                moved = self.cluster and _slots_moved(exc)
                if not (moved or isinstance(exc, self._transient)):
                    raise StoreError(f"Redis at {self.location}: {what} failed: {exc}") from exc
                unknown_host = not self._answered and any(sign in str(exc) for sign in _UNKNOWN_HOST)
                pause = None if unknown_host else backoff.wait()
                if pause is None:
                    raise StoreError(self._unreachable(what, attempt, backoff.waited, exc, unknown_host)) from exc
                if attempt == 1:
                    logger.warning(
                        "Redis at %s: %s failed (%s); retrying for up to %g s (retry_for in the URL sets it)",
                        self.location,
                        what,
                        exc,
                        self.retry_for,
                    )
                time.sleep(pause)
                if moved:
                    # Slots moved (resharding, failover): learn the new layout
                    # before running the batch's per-node scripts again.
                    self._client.nodes_manager.initialize()
                self._node_of.clear()  # ask the client's slot map again: it may have learnt a failover
            except StreamFilterError:
                raise  # raised inside the operation by this package (a mismatched index): as it is
            except _MALFORMED_REPLY as exc:  # after RedisError: redis-py's LockError is a ValueError too
                if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
                    raise  # an unknown URL parameter, which redis-py hands its connection (__init__)
                # raised inside redis-py by an answer no Redis gives (a server that
                # answers every command with an integer fails its HELLO so)
                raise StoreError(
                    f"Redis at {self.location}: {what} failed: the server's answer is not one Redis gives "
                    f"({type(exc).__name__}: {exc}); is a Redis server listening there?"
                ) from exc

    # -- facts ---------------------------------------------------------------
    def progress(self) -> dict[str, int | str]:
        """The progress the committed batches recorded: input name -> lines done, or a live
        source's resume key -> its position (what ``--resume`` continues from)."""
        client = self._require_client()
        lines = self._retrying("read progress", lambda: client.hgetall(self._progress_key))
        points = self._retrying("read resume points", lambda: client.hgetall(self._resume_key))
        progress: dict[str, int | str] = {name.decode(): int(value) for name, value in lines.items()}
        progress.update((name.decode(), value.decode()) for name, value in points.items())
        return progress

    def purged_count(self) -> None:
        """Redis expires records itself (see the module docstring): nothing to count."""
        return None

    def forget(self, posts: Sequence[tuple[str, int]]) -> int:
        """Forget each (post id, id key): its record is deleted if it still
        holds that post (a compare-and-delete on the one hash, so a Cluster
        needs no script across slots). Band entries keep its member until
        its slice is dropped; a member without a record is no candidate."""
        settings = self._settings
        if settings is None:
            raise StoreError("the Redis store is not open")
        client = self._require_client()
        forgotten = 0
        for post_id, id_key in posts:
            txn = self._retrying("read the index", lambda: self._transaction(settings))
            _, serials = txn.members(np.array([id_key], dtype=np.uint64))
            for serial in serials.tolist():
                post = txn.post(serial)
                if post is None or post.post_id != post_id:
                    continue
                key, member, value = txn.record_key_of(serial)
                deleted = functools.partial(client.eval, _FORGET, 1, key, member, value)
                forgotten += int(self._retrying("forget a post", deleted))
        return forgotten

    def post_count(self) -> int:
        """Records in Redis (live, or past event time and awaiting their slice's drop). Scans: for tests and stats."""
        client = self._require_client()
        pattern = self._prefix_bytes + b":r:*"

        def count() -> int:
            return sum(int(client.hlen(key)) for key in client.scan_iter(match=pattern, count=1000))

        return int(self._retrying("count posts", count))

    def clock(self) -> float:
        """The newest event time the index has seen (-inf for none yet)."""
        client = self._require_client()
        stored = self._retrying("read the clock", lambda: client.get(self._clock_key))
        return checked_clock(stored, self.clock_location)

    def _require_client(self) -> Any:
        if self._client is None:
            raise StoreError("the Redis store is not open")
        return self._client

    def close(self) -> None:
        """Close the index; what was committed stays. Safe to call twice."""
        if self._client is not None:
            with self._lock:
                close_client(self._client)
                self._client = None
        self._settings = None
