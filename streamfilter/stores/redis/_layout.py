"""How the Redis store lays an index out in keys: time slices of small hashes.

A post belongs to the time slice of its event time (``slice_seconds``, a
quarter of the TTL; one slice for ever without a TTL). A slice is kept in
one or more *parts*, numbered ``slice * 8 + generation``; each part has its
bucket bits and post count in ``{prefix}:slices`` (fields ``b<part>`` and
``n<part>``), and keeps

- its band entries in ``2**bits`` strings, ``{prefix}:b:<part>:<bucket>``:
  the bucket is a band key's top ``bits``, and the string 10-byte entries,
  oldest first: the key's bits 16 to 47, then a member filed under it. A
  look-up finds a key's entries in its bucket and offers the newest ``cap``;
  a batch writes each bucket it files in once, at its exact size (on one
  Redis it appends, then copies the value through ``{prefix}:scratch``);
- its post records in ``2**(bits - 3)`` hashes, ``{prefix}:r:{<part>:<n>}``,
  by member; on a Cluster, the claims of the texts it recorded beside them
  (``{prefix}:c:{<part>:<n>}``, the same hash slot).

A slice's first part is sized when the slice is first used, from the posts
of the slice before it: about 256 band entries a bucket. When the rate of
posts rises, a part fills: at about 1024 entries a bucket, or 512 records a
record hash (half the listpack limit the production guide sets), the slice
opens its next part with four times the buckets (``index.lua``,
``part_for``). So a surge after a quiet slice keeps every key small: record
hashes stay listpacks, and a look-up scans short buckets.

A member is 6 bytes: a counter that only grows (``{prefix}:serial``), then 13
bits of the hash of the post's text, whose low bits choose its record
bucket, so that copies of one text claim in the same place. Ordered as
numbers, members order posts newest last, as the rules need.

So a band entry costs its 10 bytes, where a key of its own cost about 100;
records are small hashes, which Redis stores as listpacks, a few bytes an
entry (the production guide gives the settings). A slice is dropped
whole, every part of it, once the newest event time is a TTL past its end,
so the index never holds much more than the live window, however fast
event time runs; each key also expires in wall time (``PEXPIRE``) as a
backstop for a stream that stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["MEMBER_BYTES", "Layout", "member_order", "member_orders", "parse_parts", "split_members"]

MEMBER_BYTES = 6
TEXT_BITS = 13  # of a member: the low bits of its text's hash
ENTRIES_PER_BUCKET = 256  # what a slice's bucket bits are chosen for
GENERATION_BITS = 3  # a part is ``slice << GENERATION_BITS | generation``


@dataclass(frozen=True)
class Layout:
    """The key layout an index was made with (pinned in ``{prefix}:layout``)."""

    slice_seconds: float  # 0: a single slice for ever (no TTL)
    first_bits: int = 10  # the bucket bits of an index's first slice

    @classmethod
    def for_ttl(cls, ttl_seconds: float) -> Layout:
        return cls(ttl_seconds / 4 if ttl_seconds > 0 else 0.0)

    def slice_of(self, timestamp: float) -> int:
        if self.slice_seconds <= 0 or not math.isfinite(timestamp):
            return 0
        return math.floor(timestamp / self.slice_seconds)

    def live_from(self, clock: float, ttl_seconds: float) -> float:
        """The oldest slice that may hold a post newer than the horizon (-inf: every one)."""
        if self.slice_seconds <= 0 or ttl_seconds <= 0 or not math.isfinite(clock):
            return -math.inf
        return math.floor((clock - ttl_seconds) / self.slice_seconds)

    def slice_end(self, slice_: int) -> float:
        return math.inf if self.slice_seconds <= 0 else (slice_ + 1) * self.slice_seconds

    @staticmethod
    def slice_of_part(part: int) -> int:
        """The time slice a part belongs to."""
        return part >> GENERATION_BITS

    # -- band entries ------------------------------------------------------------
    @staticmethod
    def queries(band_keys: npt.NDArray[np.uint64]) -> bytes:
        """Band keys as the scripts take them: the first 6 of their 8 big-endian bytes."""
        return band_keys.astype(">u8").view(np.uint8).reshape(-1, 8)[:, :6].tobytes()

    @staticmethod
    def buckets(band_keys: npt.NDArray[np.uint64], bits: int | npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """Each band key's bucket in a part of ``bits`` bucket bits (one for
        all, or one a key): the top ``bits`` of its first 16."""
        return (band_keys >> np.uint64(48)) >> (np.uint64(16) - np.asarray(bits, dtype=np.uint64))

    @staticmethod
    def fields(band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]:
        """What a bucket's entry holds of each band key: its 32 bits after the first 16, big-endian."""
        return (band_keys >> np.uint64(16)).astype(">u4")

    # -- members and records -------------------------------------------------------
    @staticmethod
    def text_bits(text: bytes) -> int:
        return int.from_bytes(text[-2:], "big") & ((1 << TEXT_BITS) - 1)

    @classmethod
    def member(cls, counter: int, text: bytes) -> bytes:
        return (counter << TEXT_BITS | cls.text_bits(text)).to_bytes(MEMBER_BYTES, "big")

    @staticmethod
    def record_bucket(member_or_text: bytes, bits: int) -> int:
        return int.from_bytes(member_or_text[-2:], "big") % (1 << max(bits - 3, 3))

    @staticmethod
    def band_key(prefix: bytes, part: int, bucket: int) -> bytes:
        return b"%s:b:%d:%d" % (prefix, part, bucket)

    @staticmethod
    def record_key(prefix: bytes, part: int, bucket: int) -> bytes:
        return b"%s:r:{%d:%d}" % (prefix, part, bucket)

    @staticmethod
    def claim_key(prefix: bytes, part: int, bucket: int) -> bytes:
        return b"%s:c:{%d:%d}" % (prefix, part, bucket)

    def keys_of_part(self, prefix: bytes, part: int, bits: int) -> list[bytes]:
        """Every key a part of ``bits`` bucket bits may have."""
        records = range(1 << max(bits - 3, 3))
        return (
            [self.band_key(prefix, part, bucket) for bucket in range(1 << bits)]
            + [self.record_key(prefix, part, bucket) for bucket in records]
            + [self.claim_key(prefix, part, bucket) for bucket in records]
        )


def split_members(value: bytes | memoryview) -> list[bytes]:
    return [bytes(value[at : at + MEMBER_BYTES]) for at in range(0, len(value), MEMBER_BYTES)]


def member_order(member: bytes) -> int:
    """A member as the number that orders posts (newest largest)."""
    return int.from_bytes(member, "big")


def member_orders(members: bytes) -> npt.NDArray[np.int64]:
    """6-byte members, one after another, as ``member_order``'s numbers."""
    raw = np.frombuffer(members, dtype=np.uint8).reshape(-1, MEMBER_BYTES)
    padded = np.zeros((len(raw), 8), dtype=np.uint8)
    padded[:, 8 - MEMBER_BYTES :] = raw
    return padded.view(">u8").ravel().astype(np.int64)


def parse_parts(text: bytes | str) -> dict[int, int]:
    """Part -> bucket bits, from read_batch.lua's list."""
    if isinstance(text, bytes):
        text = text.decode()
    return {int(name): int(bits) for name, bits in (part.split(":") for part in text.split())}
