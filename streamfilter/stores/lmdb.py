"""The embedded default: an LMDB environment on disk.

Named sub-databases:

- ``bands``  (dupsort, dupfixed): 8-byte band key -> 8-byte post serial, many per key
- ``posts``: serial -> timestamp, post id and the post's sorted shingle hashes (verification data)
- ``expiry``: (timestamp in ms, serial) -> empty; purging walks it from the oldest end
- ``meta``: the pinned signature settings, the clock and the next serial

Every batch is one write transaction: LMDB allows one writer at a time across
all processes that open the directory, and lookups happen inside that
transaction, so two processes can never both let copies of a text through.
When the map fills, the transaction is aborted, the map doubled, and the batch
run again; nothing of the failed attempt is kept.
"""

from __future__ import annotations

import errno
import json
import math
import os
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import lmdb

from .._exceptions import StoreError, StoreFullError
from ._base import IndexSettings, Match, PostCache, Sketch, check_fingerprint, run_batch

__all__ = ["LMDBStore"]

_U64 = struct.Struct(">Q")
_EXPIRY = struct.Struct(">QQ")
_CLOCK = struct.Struct("<d")
_TIME_OFFSET_MS = 1 << 62  # keeps (rare) negative timestamps sortable as unsigned keys
_CONFIG_KEY = b"config"
_CLOCK_KEY = b"clock"
_SERIAL_KEY = b"next_serial"
_FORMAT_KEY = b"format"
_PROGRESS_KEY = b"progress"
_FORMAT = b"streamfilter-lmdb-1"


def _expiry_key(timestamp: float, serial: int) -> bytes:
    return _EXPIRY.pack(int(math.floor(timestamp * 1000)) + _TIME_OFFSET_MS, serial)


class _LMDBTxn:
    def __init__(
        self, txn: lmdb.Transaction, bands: lmdb._Database, posts: lmdb._Database, expiry: lmdb._Database
    ) -> None:
        self._txn = txn
        self._bands_db = bands
        self._bands = txn.cursor(bands)
        self._posts = posts
        self._expiry = expiry

    def first_members(self, band_keys: Sequence[bytes]) -> list[int]:
        serials: list[int] = []
        for _, value in self._bands.getmulti(band_keys):
            serial = _U64.unpack(value)[0]
            if serial not in serials:
                serials.append(serial)
        return serials

    def members(self, band_keys: Sequence[bytes], limit: int) -> list[int]:
        cursor = self._bands
        found = cursor.getmulti(band_keys)
        if not found:
            return []
        serials: list[int] = []
        seen: set[int] = set()
        for key, first in found:
            cursor.set_key(key)
            if cursor.count() == 1:
                newest = [first]
            else:
                cursor.last_dup()
                newest = [cursor.value()]
                while len(newest) < limit and cursor.prev_dup():
                    newest.append(cursor.value())
            for value in newest:
                serial = _U64.unpack(value)[0]
                if serial not in seen:
                    seen.add(serial)
                    serials.append(serial)
        return serials

    def get_post(self, serial: int) -> bytes | None:
        value: bytes | None = self._txn.get(_U64.pack(serial), db=self._posts)
        return value

    def insert(self, serial: int, timestamp: float, band_keys: Sequence[bytes], record: bytes) -> None:
        serial_bytes = _U64.pack(serial)
        self._txn.put(serial_bytes, record, db=self._posts)
        self._txn.put(_expiry_key(timestamp, serial), b"", db=self._expiry)
        self._bands.putmulti([(band_key, serial_bytes) for band_key in band_keys], dupdata=True)

    def expired(self, cutoff: float, limit: int) -> list[tuple[int, bytes]]:
        cutoff_key = _expiry_key(cutoff, (1 << 64) - 1)
        found: list[tuple[int, bytes]] = []
        cursor = self._txn.cursor(self._expiry)
        if not cursor.first():
            return found
        for key in cursor.iternext(keys=True, values=False):
            if key > cutoff_key or len(found) >= limit:
                break
            serial = _EXPIRY.unpack(key)[1]
            record = self._txn.get(_U64.pack(serial), db=self._posts)
            if record is not None:
                found.append((serial, record))
            else:
                self._txn.delete(key, db=self._expiry)
        return found

    def delete(self, serial: int, timestamp: float, band_keys: Sequence[bytes]) -> None:
        serial_bytes = _U64.pack(serial)
        for band_key in band_keys:
            self._txn.delete(band_key, serial_bytes, db=self._bands_db)
        self._txn.delete(serial_bytes, db=self._posts)
        self._txn.delete(_expiry_key(timestamp, serial), db=self._expiry)


class LMDBStore:
    """A band store in an LMDB directory; the directory is created if needed.

    ``map_size`` is only the starting size: the map doubles whenever it fills.
    ``durable=False`` skips the fsync at each commit; a killed process still
    loses nothing, but a power cut may lose the last few batches.
    """

    def __init__(self, path: str | os.PathLike[str], *, map_size: int = 64 << 20, durable: bool = True) -> None:
        self.path = Path(path)
        self._initial_map_size = map_size
        self._durable = durable
        self._env: lmdb.Environment | None = None
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()
        self._cache = PostCache()

    # -- opening -------------------------------------------------------------
    def open(self, settings: IndexSettings) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            env = lmdb.open(
                str(self.path),
                map_size=self._initial_map_size,
                max_dbs=4,
                subdir=True,
                sync=self._durable,
                # Without metasync a power cut may undo the last commit, but
                # never breaks the index; sync stays on, as NOSYNC could.
                metasync=False,
                writemap=False,
                readahead=False,
                lock=True,
            )
        except (OSError, lmdb.Error) as exc:
            raise _map_error(exc, f"cannot open LMDB index at {self.path}", self.path) from exc
        self._env = env
        self._page_size = int(env.stat()["psize"])
        try:
            self._bands = env.open_db(b"bands", dupsort=True, dupfixed=True)
            self._posts = env.open_db(b"posts")
            self._expiry = env.open_db(b"expiry")
            self._meta = env.open_db(b"meta")
            self._pin(settings)
        except BaseException:
            self.close()
            raise
        self._settings = settings

    def _pin(self, settings: IndexSettings) -> None:
        requested = dict(settings.fingerprint)

        def pin(txn: lmdb.Transaction) -> None:
            stored_format = txn.get(_FORMAT_KEY, db=self._meta)
            if stored_format is not None and stored_format != _FORMAT:
                raise StoreError(f"{self.path} holds an index of format {stored_format!r}, expected {_FORMAT!r}")
            stored = txn.get(_CONFIG_KEY, db=self._meta)
            if stored is None:
                txn.put(_FORMAT_KEY, _FORMAT, db=self._meta)
                txn.put(_CONFIG_KEY, json.dumps(requested, sort_keys=True).encode(), db=self._meta)
            else:
                check_fingerprint(str(self.path), json.loads(stored), requested)

        self._write(pin)

    @staticmethod
    def read_fingerprint(path: str | os.PathLike[str]) -> dict[str, int | str] | None:
        """The pinned settings of the index at ``path``, or None when there is none yet."""
        if not (Path(path) / "data.mdb").exists():
            return None
        try:
            env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=4, subdir=True)
        except lmdb.Error as exc:
            raise _map_error(exc, f"cannot read LMDB index at {path}") from exc
        try:
            meta = env.open_db(b"meta", create=False)
            with env.begin(db=meta) as txn:
                stored = txn.get(_CONFIG_KEY)
        except lmdb.Error:
            return None
        finally:
            env.close()
        return None if stored is None else dict(json.loads(stored))

    # -- the one operation ---------------------------------------------------
    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int] | None = None,
        before_commit: Callable[[list[Match | None]], None] | None = None,
    ) -> list[Match | None]:
        settings = self._settings
        if settings is None:
            raise StoreError("the LMDB store is not open")

        def apply(txn: lmdb.Transaction) -> list[Match | None]:
            clock_bytes = txn.get(_CLOCK_KEY, db=self._meta)
            clock = _CLOCK.unpack(clock_bytes)[0] if clock_bytes else float("-inf")
            serial_bytes = txn.get(_SERIAL_KEY, db=self._meta)
            next_serial = _U64.unpack(serial_bytes)[0] if serial_bytes else 1
            view = _LMDBTxn(txn, self._bands, self._posts, self._expiry)
            results, clock, next_serial = run_batch(view, sketches, settings, clock, next_serial, self._cache)
            txn.put(_CLOCK_KEY, _CLOCK.pack(clock), db=self._meta)
            txn.put(_SERIAL_KEY, _U64.pack(next_serial), db=self._meta)
            if progress:
                stored = txn.get(_PROGRESS_KEY, db=self._meta)
                merged = dict(json.loads(stored)) if stored else {}
                merged.update(progress)
                txn.put(_PROGRESS_KEY, json.dumps(merged, sort_keys=True).encode(), db=self._meta)
            if before_commit is not None:
                before_commit(results)
            return results

        return self._write(apply)

    def _write(self, body):  # type: ignore[no-untyped-def]
        env = self._require_env()
        with self._lock:
            # Grow ahead of need: a map that fills at commit time forces the
            # batch to run again, and its output would be written twice.
            info = env.info()
            if (info["last_pgno"] + 1) * self._page_size > 0.7 * info["map_size"]:
                self._grow(env, info["map_size"] * 2)
            while True:
                try:
                    with env.begin(write=True) as txn:
                        return body(txn)
                except BaseException as exc:
                    # Posts cached from an aborted transaction may never have
                    # existed: their serials can be reused by another writer.
                    self._cache.clear()
                    if isinstance(exc, lmdb.MapFullError):
                        self._grow(env, env.info()["map_size"] * 2)
                    elif isinstance(exc, lmdb.MapResizedError):
                        env.set_mapsize(0)  # another process grew the map: adopt its size
                    elif isinstance(exc, lmdb.Error | OSError):
                        raise _map_error(exc, f"LMDB index at {self.path} failed", self.path) from exc
                    else:
                        raise

    def _grow(self, env: lmdb.Environment, size: int) -> None:
        try:
            env.set_mapsize(size)
        except lmdb.Error as exc:
            raise _map_error(exc, f"cannot grow the LMDB map of {self.path} to {size} bytes", self.path) from exc

    # -- facts ---------------------------------------------------------------
    def progress(self) -> dict[str, int]:
        env = self._require_env()
        with env.begin(db=self._meta) as txn:
            stored = txn.get(_PROGRESS_KEY)
        return {} if stored is None else {str(k): int(v) for k, v in json.loads(stored).items()}

    def post_count(self) -> int:
        env = self._require_env()
        with env.begin(db=self._posts) as txn:
            return int(txn.stat(self._posts)["entries"])

    def map_size(self) -> int:
        return int(self._require_env().info()["map_size"])

    def _require_env(self) -> lmdb.Environment:
        if self._env is None:
            raise StoreError("the LMDB store is not open")
        return self._env

    def close(self) -> None:
        if self._env is not None:
            with self._lock:
                self._env.close()
                self._env = None


def _free_bytes(path: Path) -> int | None:
    try:
        stats = os.statvfs(path if path.exists() else path.parent)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def _map_error(exc: BaseException, context: str, path: Path | None = None) -> StoreError:
    code = getattr(exc, "errno", None)
    message = str(exc).strip() or type(exc).__name__
    free = _free_bytes(path) if path is not None else None
    # LMDB reports a failed write of its pages as EIO on some filesystems
    # (tmpfs among them), so a near-empty disk is read as "full" too.
    if (
        code in (errno.ENOSPC, errno.EDQUOT)
        or "No space left" in message
        or (("Input/output error" in message or code == errno.EIO) and free is not None and free < (8 << 20))
    ):
        where = "" if free is None else f", {free} bytes free"
        return StoreFullError(
            f"{context}: the disk is full ({message}{where}); "
            "committed data is intact: free space, then rerun with --resume"
        )
    return StoreError(f"{context}: {message}")
