"""What a live source's reconnects decide: whether a connection brought anything
new, what a server's refusal asks to wait, and how a failure is told."""

from __future__ import annotations

import collections
import hashlib

__all__ = ["Delivered", "Retryable", "describe", "retry_after"]


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


def retry_after(value: str | None) -> float:
    """Seconds from a Retry-After header in its seconds form; 0 otherwise."""
    try:
        return min(max(float(value or 0), 0.0), 3600.0)
    except ValueError:
        return 0.0


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
