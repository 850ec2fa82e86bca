"""Group commit for the sync API's one-record calls (``check``, ``is_novel``).

A durable LMDB commit costs an fsync, several times the work of judging one
post, and a loop of one-record calls would pay it for each. So these calls
share one write transaction, a group, which commits:

- ``within`` seconds after the group's first call, whether more calls come
  or not (the group's own thread commits it when none does);
- after ``GROUP_LIMIT`` calls;
- before any other write of the filter (``check_many``, ``judge``,
  ``forget``), at ``flush()``, at ``close()``, and at the interpreter's
  exit.

Each call judges its record in the group's transaction, which holds the
posts it finds novel in memory and writes them at the commit (``hold``):
the next call sees them as a later post of a batch sees an earlier one, so
the verdicts are those of ``check_many``.

The durability rule: a verdict is durable once its group commits. A crash
before that loses what the group recorded, never a post: a later copy of one
of its novel posts is novel again (a copy passed twice), and a post the group
judged a duplicate copied one the caller already had as novel.

LMDB's writer lock belongs to the thread that began the transaction, so the
group's thread begins and ends every transaction of the group; the calls,
from any thread, judge in it one at a time in between.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from ._exceptions import StoreError
from .stores._base import BandStore, IndexTransaction, RetryBatch

__all__ = ["GROUP_LIMIT", "GroupCommit"]

logger = logging.getLogger("streamfilter")

# The most calls a group takes: bounds what a crash can cost and the
# transaction's dirty pages (the map grows only between transactions).
GROUP_LIMIT = 1024
# How many times one call may find its group's transaction had to begin again.
_MAX_ATTEMPTS = 100

T = TypeVar("T")


class Holding(IndexTransaction, Protocol):
    """An index transaction that can hold the posts of batch after batch until it commits (LMDB's)."""

    # where the transaction must end (commit or abort): a function that runs
    # what it is given in the thread that began it
    ends_in: Callable[[Callable[[], Any]], Any] | None
    held: Any  # what it holds (None before ``hold``), for ``hold`` of the next one

    def hold(self, earlier: Any = None) -> None:
        """Hold the posts of the batches judged from now on, with those an aborted one held."""


class GroupCommit:
    """One store's group of one-record calls (see the module docstring)."""

    def __init__(self, store: BandStore, within: float) -> None:
        self._store = store
        self._within = within
        self._limit = GROUP_LIMIT
        self._round = threading.Lock()  # one call at a time judges, or ends the group
        self._wake = threading.Condition()  # the group thread's requests, and its timer
        self._request: Callable[[], Any] | None = None
        self._answer: tuple[Any, BaseException | None] | None = None
        self._txn: Holding | None = None
        self._began = 0.0
        self._rounds = 0
        self._error: BaseException | None = None  # the group thread's failed commit, for the next call
        self._thread: threading.Thread | None = None
        self._stopping = False
        # a script that exits without closing its filter still commits its last group
        atexit.register(self._at_exit)

    def judge(self, body: Callable[[Holding], T]) -> T:
        """``body(txn)`` as one round of the group's transaction (a new group when none is open)."""
        with self._round:
            self._raise_error()
            if self._txn is not None and self._due():
                self._end()
            for _ in range(_MAX_ATTEMPTS):
                txn = self._txn if self._txn is not None else self._begin()
                try:
                    result = body(txn)
                except RetryBatch:
                    # The transaction aborted itself (the map grew, here or in
                    # another process): the next one holds what it held.
                    self._txn = self._begin(txn.held, new_group=False)
                    continue
                except BaseException:
                    self._abandon()
                    raise
                self._rounds += 1
                if self._due():
                    self._end()
                return result
        raise StoreError(
            f"{type(self._store).__name__}: a record's group had to begin again {_MAX_ATTEMPTS} times "
            "(the index kept needing a larger map); nothing of it was committed"
        )

    def flush(self) -> None:
        """Commit the open group, if any: every verdict given so far is durable."""
        with self._round:
            self._raise_error()
            if self._txn is not None:
                self._end()

    def close(self) -> None:
        """Commit the open group and stop the group's thread."""
        atexit.unregister(self._at_exit)
        try:
            self.flush()
        finally:
            with self._round:
                self._abandon()  # a group whose commit failed is given up
            with self._wake:
                self._stopping = True
                self._wake.notify_all()
            if self._thread is not None:
                self._thread.join()
                self._thread = None

    def _at_exit(self) -> None:
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - the interpreter is ending: said, not raised
            logger.warning("streamfilter: the last group of check() calls could not commit at exit: %s", exc)

    # -- the group (under self._round) -------------------------------------------
    def _due(self) -> bool:
        return self._rounds >= self._limit or time.monotonic() - self._began >= self._within

    def _begin(self, earlier: Any = None, *, new_group: bool = True) -> Holding:
        txn = cast(Holding, self._in_thread(self._store.begin))  # a store whose ``holds`` is true
        txn.ends_in = self._in_thread
        try:
            txn.hold(earlier)
        except BaseException:
            txn.abort()
            raise
        with self._wake:
            self._txn = txn
            if new_group:
                self._began, self._rounds = time.monotonic(), 0
            self._wake.notify_all()  # the group thread's timer starts
        return txn

    def _end(self) -> None:
        for _ in range(_MAX_ATTEMPTS):
            txn, self._txn = self._txn, None
            if txn is None:
                return
            try:
                txn.commit(None)  # its LMDB commit runs in the group thread (ends_in)
                return
            except RetryBatch:  # the map grew: the group is written in a transaction anew
                self._begin(txn.held, new_group=False)
        raise StoreError(
            f"{type(self._store).__name__}: a group had to begin again {_MAX_ATTEMPTS} times "
            "(the index kept needing a larger map); nothing of it was committed"
        )

    def _abandon(self) -> None:
        txn, self._txn = self._txn, None
        if txn is not None:
            txn.abort()

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise StoreError(
                f"the group of recent check() calls could not commit ({error}); their novel posts "
                "were not indexed, so a later copy of one passes again"
            ) from error

    # -- the group thread --------------------------------------------------------
    def _in_thread(self, function: Callable[[], T]) -> T:
        """``function()`` run in the group thread, which is started if need be."""
        if threading.current_thread() is self._thread:
            return function()
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="streamfilter-group", daemon=True)
                self._thread.start()
            self._request, self._answer = function, None
            self._wake.notify_all()
            while self._answer is None:
                self._wake.wait()
            (value, error), self._answer = self._answer, None
        if error is not None:
            raise error
        return cast(T, value)

    def _serve(self) -> None:
        with self._wake:
            while True:
                if self._request is not None:
                    request, self._request = self._request, None
                    try:
                        self._answer = (request(), None)
                    except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                        self._answer = (None, exc)
                    self._wake.notify_all()
                    continue
                if self._stopping:
                    return
                left = None if self._txn is None else self._began + self._within - time.monotonic()
                if left is not None and left <= 0 and self._round.acquire(blocking=False):
                    # no call is judging: the group is committed here; a call
                    # that is judging commits it itself as it ends (_due)
                    try:
                        self._end()
                    except BaseException as exc:  # noqa: BLE001 - for the next call to raise
                        self._error = exc
                    finally:
                        self._round.release()
                    continue
                self._wake.wait(None if left is None or left <= 0 else left)
