"""What a live source's reconnects decide: whether a connection brought anything
new, what a server's refusal asks to wait, and how a failure is told."""

from __future__ import annotations

import collections
import hashlib
import time
from datetime import UTC
from email.utils import parsedate_to_datetime

__all__ = ["Delivered", "Retryable", "capped_count", "describe", "retry_after"]


class Delivered:
    """The records a source delivered lately, by a digest of their bytes: a
    server that serves a finite file, or closes and redirects to one, sends
    the same records on every reconnect, which is no progress."""

    _KEPT = 1 << 16

    def __init__(self) -> None:
        self._digests: set[bytes] = set()
        self._order: collections.deque[bytes] = collections.deque()

    def is_new(self, record: bytes) -> bool:
        """Whether ``record`` is none of the last ``_KEPT`` delivered, which it then is."""
        digest = hashlib.blake2b(record, digest_size=16).digest()
        if digest in self._digests:
            return False
        self._digests.add(digest)
        self._order.append(digest)
        if len(self._order) > self._KEPT:
            self._digests.discard(self._order.popleft())
        return True


class Retryable(Exception):
    """An HTTP answer worth trying again later (429, 5xx), after ``retry_after`` seconds at least."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# The longest wait a server's Retry-After can ask for: past it, one that
# names a year or a day far ahead would stop the stream as surely as an error.
RETRY_AFTER_MOST = 3600.0


def retry_after(value: str | None, now: float | None = None) -> float:
    """Seconds to wait from a Retry-After header, in either of its forms
    (RFC 9110, 10.2.3): a count of seconds, or an HTTP date (less ``now``,
    the time since the epoch); at most ``RETRY_AFTER_MOST``. A value of
    neither form (``nan``, ``-1``, ``1e3``, ``soon``) asks for nothing: 0,
    and the source's own backoff decides."""
    text = (value or "").strip()
    if text.isascii() and text.isdigit():
        return float(capped_count(text, int(RETRY_AFTER_MOST)))
    try:
        date = parsedate_to_datetime(text)
        when = (date if date.tzinfo else date.replace(tzinfo=UTC)).timestamp()  # an HTTP date is in GMT
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0
    return min(max(when - (time.time() if now is None else now), 0.0), RETRY_AFTER_MOST)


def capped_count(digits: str | bytes, most: int) -> int:
    """A count written in ASCII digits, at most ``most``, read without int()
    of them all (Python refuses 4,300 digits and more)."""
    kept = digits.decode("ascii") if isinstance(digits, bytes) else digits
    kept = kept.lstrip("0")
    return most if len(kept) > len(str(most)) else min(int(kept or 0), most)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
