"""The store Protocol, the values that cross it, and the one algorithm every
embedded store runs inside its transaction."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._exceptions import ConfigMismatchError

__all__ = ["BandStore", "IndexSettings", "IndexTxn", "Match", "Sketch", "run_batch"]


@dataclass(slots=True)
class Sketch:
    """What a store needs of one post: who it is, when, its bands and its shingles."""

    post_id: str
    timestamp: float
    band_keys: npt.NDArray[np.uint64]
    shingles: npt.NDArray[np.uint32]


@dataclass(frozen=True, slots=True)
class Match:
    """The earlier post that a sketch duplicates, and their Jaccard similarity."""

    duplicate_of: str
    similarity: float


@dataclass(frozen=True)
class IndexSettings:
    """How a store verifies and expires.

    ``fingerprint`` holds the settings that shape signatures and band keys; a
    store pins it on first use and refuses to open with a different one.
    ``rekey`` turns stored shingle sets back into band keys, so a store can
    delete an expired post's bands without storing them.
    """

    fingerprint: Mapping[str, int | str]
    jaccard_threshold: float
    ttl_seconds: float
    rekey: Callable[[Sequence[npt.NDArray[np.uint32]]], npt.NDArray[np.uint64]] = field(repr=False)
    max_candidates_per_band: int = 64
    purge_limit: int = 1024


@runtime_checkable
class BandStore(Protocol):
    """An LSH index with an atomic check-and-insert."""

    def open(self, settings: IndexSettings) -> None:
        """Open (creating if needed) and pin or check ``settings.fingerprint``."""

    def check_and_insert(self, sketches: Sequence[Sketch]) -> list[Match | None]:
        """Judge the sketches in order, in one transaction.

        A sketch gets None when it is novel, and is then recorded, so a later
        sketch of the same batch sees it. Otherwise it gets the Match that
        made it a duplicate, and nothing is recorded.
        """

    def post_count(self) -> int:
        """Live and not-yet-purged posts in the index."""

    def close(self) -> None: ...


def check_fingerprint(
    location: str, stored: Mapping[str, object], requested: Mapping[str, object]
) -> None:
    differences = {
        name: (stored.get(name), requested.get(name))
        for name in set(stored) | set(requested)
        if stored.get(name) != requested.get(name)
    }
    if differences:
        raise ConfigMismatchError(location, differences)


_POST_HEADER = struct.Struct("<dH")


def encode_post(timestamp: float, post_id: str, shingles: npt.NDArray[np.uint32]) -> bytes:
    encoded_id = post_id.encode("utf-8")[:0xFFFF]
    return _POST_HEADER.pack(timestamp, len(encoded_id)) + encoded_id + shingles.astype("<u4").tobytes()


def decode_post(value: bytes) -> tuple[float, str, memoryview]:
    """(timestamp, post id, shingle hashes as a uint32 memoryview)."""
    timestamp, id_length = _POST_HEADER.unpack_from(value)
    start = _POST_HEADER.size
    post_id = bytes(value[start : start + id_length]).decode("utf-8", "replace")
    return timestamp, post_id, memoryview(value)[start + id_length :].cast("I")


class IndexTxn(Protocol):
    """The primitive reads and writes of one store transaction.

    Band keys cross this interface as 8-byte big-endian strings.
    """

    def first_members(self, band_keys: Sequence[bytes]) -> list[int]:
        """One serial per band key that exists (the oldest), each serial once."""

    def members(self, band_keys: Sequence[bytes], limit: int) -> list[int]:
        """Serials recorded under any of the band keys: per key the newest
        ``limit`` at most, each serial once."""

    def get_post(self, serial: int) -> bytes | None: ...

    def insert(self, serial: int, timestamp: float, band_keys: Sequence[bytes], record: bytes) -> None: ...

    def expired(self, cutoff: float, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` (serial, record) of posts with timestamp <= cutoff, oldest first."""

    def delete(self, serial: int, timestamp: float, band_keys: Sequence[bytes]) -> None: ...


def key_bytes(band_keys: npt.NDArray[np.uint64]) -> list[bytes]:
    packed = band_keys.astype(">u8").tobytes()
    return [packed[start : start + 8] for start in range(0, len(packed), 8)]


def _similarity(query: set[int], candidate: memoryview) -> float:
    members = set(candidate)
    shared = len(query & members)
    return shared / (len(query) + len(members) - shared)


def _best_match(txn: IndexTxn, serials: list[int], query: set[int], horizon: float, threshold: float) -> Match | None:
    best: Match | None = None
    for serial in serials:
        record = txn.get_post(serial)
        if record is None:
            continue
        timestamp, post_id, shingles = decode_post(record)
        if timestamp <= horizon:
            continue
        similarity = _similarity(query, shingles)
        if similarity >= threshold and (best is None or similarity > best.similarity):
            best = Match(post_id, similarity)
            if similarity == 1.0:
                break
    return best


def run_batch(
    txn: IndexTxn,
    sketches: Sequence[Sketch],
    settings: IndexSettings,
    clock: float,
    next_serial: int,
) -> tuple[list[Match | None], float, int]:
    """Judge a batch inside one transaction; returns (matches, clock, next serial).

    The clock is the highest timestamp seen so far. A stored post is visible
    while its timestamp is newer than ``clock - ttl``, so expired entries stop
    matching at once even before they are purged. Purging then removes at most
    ``purge_limit`` expired posts, oldest first, through the expiry order.
    """
    ttl = settings.ttl_seconds
    threshold = settings.jaccard_threshold
    per_band = settings.max_candidates_per_band
    results: list[Match | None] = []
    for sketch in sketches:
        clock = max(clock, sketch.timestamp)
        horizon = clock - ttl if ttl > 0 else float("-inf")
        band_keys = key_bytes(sketch.band_keys)
        best: Match | None = None
        # Most band keys hold one post, so the first member of each key is
        # checked first; deeper lists are only read when that finds nothing.
        candidates = txn.first_members(band_keys)
        if candidates:
            query = set(sketch.shingles.tolist())
            best = _best_match(txn, candidates, query, horizon, threshold)
            if best is None:
                checked = set(candidates)
                deeper = [serial for serial in txn.members(band_keys, per_band) if serial not in checked]
                if deeper:
                    best = _best_match(txn, deeper, query, horizon, threshold)
        if best is None:
            record = encode_post(sketch.timestamp, sketch.post_id, sketch.shingles)
            txn.insert(next_serial, sketch.timestamp, band_keys, record)
            next_serial += 1
        results.append(best)
    if ttl > 0:
        expired = txn.expired(clock - ttl, settings.purge_limit)
        if expired:
            decoded = [decode_post(record) for _, record in expired]
            shingle_sets = [np.frombuffer(shingles, dtype=np.uint32) for _, _, shingles in decoded]
            all_keys = settings.rekey(shingle_sets)
            for (serial, _), (timestamp, _, _), keys in zip(expired, decoded, all_keys, strict=True):
                txn.delete(serial, timestamp, key_bytes(keys))
    return results, clock, next_serial
