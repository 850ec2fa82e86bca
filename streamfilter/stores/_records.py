"""The post record: how every store keeps a post it has recorded.

A record is the post's event time, its id and its 32-bit word hashes in order,
little-endian (verification rebuilds the set it compares from them). The id
takes as little room as its kind allows:

- a decimal id of up to 19 digits (Twitter, Mastodon): 8 bytes;
- a Bluesky post URI (``at://did:plc:<24 letters>/app.bsky.feed.post/<key>``):
  the identifier's base32 letters as 15 bytes, then the key's length and UTF-8;
- any other id: its UTF-8, after its length.

The bytes of a record from its marker to the end of its id (``id_bytes``)
are the same for the same id, so two records' ids can be compared without
decoding them (the Redis scripts do).
"""

from __future__ import annotations

import struct

__all__ = ["decode_record", "encode_record", "id_end"]

_HEADER = struct.Struct("<dB")  # timestamp, then the id's length, or one of the markers below
_NUMERIC_ID = 255  # a decimal id of up to 19 digits follows as 8 bytes
_LONG_ID = 254  # a 2-byte length and the id's UTF-8 follow
_AT_URI = 253  # a Bluesky post's URI follows, packed (_pack_at_uri)
_ID_NUMBER = struct.Struct("<Q")
_ID_LENGTH = struct.Struct("<H")
_AT_PREFIX = "at://did:plc:"
_AT_COLLECTION = "/app.bsky.feed.post/"
_PLC_LETTERS = 24  # 15 bytes as base32
_PLC_BYTES = 15
_RKEY_AT = len(_AT_PREFIX) + _PLC_LETTERS + len(_AT_COLLECTION)
# did:plc identifiers are written in base32's letters (RFC 4648, lower case);
# int() reads base 32 in the digits 0-9 and a-v, so those are mapped to these,
# and back two letters (10 bits) at a time.
_PLC_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_PLC_LETTERS_SET = frozenset(_PLC_ALPHABET)
_TO_INT_DIGITS = str.maketrans(_PLC_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_LETTER_PAIRS = [first + second for first in _PLC_ALPHABET for second in _PLC_ALPHABET]


def _pack_at_uri(post_id: str) -> bytes | None:
    """A Bluesky post URI as 16 bytes and its record key; None for any other id."""
    if not post_id.startswith(_AT_PREFIX) or post_id[_RKEY_AT - len(_AT_COLLECTION) : _RKEY_AT] != _AT_COLLECTION:
        return None
    letters = post_id[len(_AT_PREFIX) : len(_AT_PREFIX) + _PLC_LETTERS]
    rkey = post_id[_RKEY_AT:].encode("utf-8")
    if not rkey or len(rkey) > 0xFF or not _PLC_LETTERS_SET.issuperset(letters):
        return None
    return int(letters.translate(_TO_INT_DIGITS), 32).to_bytes(_PLC_BYTES, "big") + bytes((len(rkey),)) + rkey


def _unpack_plc(packed: bytes) -> str:
    """The 24 base32 letters of a did:plc identifier packed by ``_pack_at_uri``."""
    number = int.from_bytes(packed, "big")
    return "".join([_LETTER_PAIRS[(number >> shift) & 0x3FF] for shift in range(110, -1, -10)])


def _is_compact_decimal(post_id: str) -> bool:
    return post_id.isdigit() and post_id.isascii() and len(post_id) <= 19 and (post_id[0] != "0" or len(post_id) == 1)


def encode_record(timestamp: float, post_id: str, hashes: bytes) -> bytes:
    """A post's record: its time, its id and ``hashes``, its word hashes as little-endian uint32."""
    if _is_compact_decimal(post_id):
        return _HEADER.pack(timestamp, _NUMERIC_ID) + _ID_NUMBER.pack(int(post_id)) + hashes
    if (packed := _pack_at_uri(post_id)) is not None:
        return _HEADER.pack(timestamp, _AT_URI) + packed + hashes
    encoded = post_id.encode("utf-8")[:0xFFFF]
    if len(encoded) < _AT_URI:
        return _HEADER.pack(timestamp, len(encoded)) + encoded + hashes
    return _HEADER.pack(timestamp, _LONG_ID) + _ID_LENGTH.pack(len(encoded)) + encoded + hashes


def id_end(value: bytes | memoryview) -> int:
    """Where a record's id ends: its word hashes start there."""
    marker = value[_HEADER.size - 1]
    start = _HEADER.size
    if marker == _NUMERIC_ID:
        return start + _ID_NUMBER.size
    if marker == _AT_URI:
        return start + _PLC_BYTES + 1 + value[start + _PLC_BYTES]
    if marker == _LONG_ID:
        return start + _ID_LENGTH.size + int(_ID_LENGTH.unpack_from(value, start)[0])
    return start + marker


def decode_record(value: bytes | memoryview) -> tuple[float, str, memoryview]:
    """(timestamp, post id, the word hashes as a uint32 memoryview)."""
    timestamp, marker = _HEADER.unpack_from(value)
    start = _HEADER.size
    if marker == _NUMERIC_ID:
        post_id = str(_ID_NUMBER.unpack_from(value, start)[0])
        start += _ID_NUMBER.size
    elif marker == _AT_URI:
        letters = _unpack_plc(bytes(value[start : start + _PLC_BYTES]))
        length = value[start + _PLC_BYTES]
        start += _PLC_BYTES + 1
        rkey = bytes(value[start : start + length]).decode("utf-8", "replace")
        post_id = f"{_AT_PREFIX}{letters}{_AT_COLLECTION}{rkey}"
        start += length
    else:
        length = marker
        if marker == _LONG_ID:
            length = _ID_LENGTH.unpack_from(value, start)[0]
            start += _ID_LENGTH.size
        post_id = bytes(value[start : start + length]).decode("utf-8", "replace")
        start += length
    if (len(value) - start) % 4:
        raise ValueError(f"a record's word hashes are {len(value) - start} bytes, not whole 32-bit values")
    return timestamp, post_id, memoryview(value)[start:].cast("I")
