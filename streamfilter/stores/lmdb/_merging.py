"""Merging runs: which runs merge, their live entries, and the merge thread.

Every batch appends one run; runs of similar size are merged, which drops
purged posts, so a stream keeps O(log n) runs. Merging never changes a
verdict: look-ups take each key's newest entries across all runs, whatever
their layout.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ._runs import NO_KEYS, Run, key_order
from ._tuning import LMDBTuning

__all__ = [
    "Merger",
    "merge_entries",
    "merge_plan",
    "mergeable",
    "merged_inline",
    "one_run_spans",
    "pending_run",
    "release_freed_memory",
]

_NO_STORED = np.zeros(0, dtype=np.uint32)


def mergeable(older: int, newer: int, tuning: LMDBTuning) -> bool:
    """Whether two adjacent runs of these entry counts are merged: of similar size, and not too large together."""
    return older <= 2 * newer and older + newer <= tuning.max_merged_entries


def merged_inline(older: int, newer: int, tuning: LMDBTuning) -> bool:
    """Whether a batch's own transaction merges two adjacent runs of these
    entry counts; a larger merge that is due is the merge thread's."""
    return mergeable(older, newer, tuning) and older + newer <= tuning.inline_merged_entries


def one_run_spans(*runs: Run) -> bool:
    """Whether one run can hold the entries of ``runs``: their serials less
    than 2**32 apart, so that offsets fit 32 bits."""
    return max(run.last for run in runs) - min(run.first for run in runs) < 1 << 32


def merge_plan(runs: list[Run], tuning: LMDBTuning) -> tuple[int, int] | None:
    """The slice ``runs[start:stop]`` (live ones, oldest first) that the merge
    thread merges next, in one merge; None when there is none.

    Pair by pair, it would merge the newest adjacent pair that is for it (too
    large to merge inline, with offsets that fit 32 bits), then the result
    with the run before it, again and again, while that pair is for it and
    the result's pair with the run after it is not (that pair, being newer,
    would come first). The slice is those runs, merged into the same run at
    once: each of their entries is written once, not once a step, in one
    swap under the store's lock instead of one a step.
    """

    def for_thread(older: int, newer: int, *parts: Run) -> bool:
        return (
            mergeable(older, newer, tuning) and older + newer > tuning.inline_merged_entries and one_run_spans(*parts)
        )

    for at in range(len(runs) - 2, -1, -1):
        if not for_thread(runs[at].count, runs[at + 1].count, runs[at], runs[at + 1]):
            continue
        start, stop = at, at + 2
        size = runs[at].count + runs[at + 1].count
        while (
            start > 0
            and for_thread(runs[start - 1].count, size, *runs[start - 1 : stop])
            and not (stop < len(runs) and for_thread(size, runs[stop].count, *runs[start:stop], runs[stop]))
        ):
            start -= 1
            size += runs[start].count
        return start, stop
    return None


def _live_entries(run: Run, first_live: int, base: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]:
    """(keys, serials minus ``base``) of a run's entries that are not purged;
    copies, valid after its transaction. ``base`` is at most ``run.first``,
    and the run's serials less than 2**32 past it."""
    offsets = run.offsets(np.uint32)
    if run.first > base:
        offsets += np.uint32(run.first - base)
    if run.first >= first_live:  # nothing purged: no mask to build and apply
        return run.keys().copy(), offsets
    if run.last < first_live:  # all purged (and ``first_live - base`` may not fit 32 bits)
        return NO_KEYS.copy(), offsets[:0]
    live = offsets >= np.uint32(first_live - base)
    return run.keys()[live], offsets[live]


def merge_entries(runs: Sequence[Run], first_live: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], int]:
    """(keys, offsets, base) of the entries of ``runs`` that are not purged,
    as ``encode_run`` takes them (the runs' serials less than 2**32 apart);
    copies, valid after the runs' transaction."""
    base = min(run.first for run in runs)
    live = [_live_entries(run, first_live, base) for run in runs]
    return np.concatenate([keys for keys, _ in live]), np.concatenate([offsets for _, offsets in live]), base


def pending_run(keys: npt.NDArray[np.uint64], offsets: npt.NDArray[np.uint32], first: int) -> Run:
    """A batch's entries before they are written, as ``merge_entries`` takes a
    run: sorted by key, then by offset, so that a run written with older ones
    is a merge of sorted runs (``encode_sorted``); never searched."""
    order = key_order(keys)
    last = first + int(offsets.max())
    return Run(b"", first, last, len(keys), _NO_STORED, _NO_STORED, 0, offsets[order], None, keys[order])


def release_freed_memory() -> None:
    """Hand the pages that a large merge freed back to the system.

    glibc gives each thread that allocates a heap (arena) of its own and
    keeps what is freed there for reuse: the merge thread's arrays, hundreds
    of MB for runs of millions of entries, stayed resident between merges
    (docs/design/lmdb.md gives the figures).
    ``malloc_trim`` returns the free pages of every arena; elsewhere than
    glibc this does nothing.
    """
    if not _malloc_trim:
        import ctypes

        try:
            _malloc_trim.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError):
            _malloc_trim.append(lambda pad: 0)
    _malloc_trim[0](0)


_malloc_trim: list[Callable[[int], int]] = []  # loaded by the first large merge


def _yield_cpu_to_batches() -> None:
    """Lower the calling thread's priority (its nice value, by 10), so that
    on busy cores the batches' threads run before its merges, which no
    verdict waits for. Linux only: there a thread's nice value is its own,
    elsewhere it is the process's."""
    if sys.platform.startswith("linux"):
        thread = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + _MERGE_NICENESS))
        except OSError:
            pass


_MERGE_NICENESS = 10


class Merger:
    """The store's merge thread: merges of runs too large for a batch's transaction.

    A merge reads its runs (``merge_plan``: two, or a carry of more) in a read
    transaction, builds the merged run outside any transaction, then swaps it
    in with a short write transaction of its own: a delete of each run and
    one put, if every one is still there as it was read (a batch, here or in
    another process, may have merged or dropped them meanwhile; then the work
    is dropped and the next plan starts over).
    Merging never changes a verdict: look-ups take each key's newest entries
    across all runs, whatever their layout. A crash loses at most the merge
    under way, never a post. The thread starts with the first merge it is
    woken for; an error it meets is raised by the store's next batch.
    """

    def __init__(self, merge_step: Callable[[], bool]) -> None:
        self._merge_step = merge_step
        self._condition = threading.Condition()
        self._wanted = False
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def wake(self) -> None:
        with self._condition:
            if self._stopping or self.error is not None:
                return
            self._wanted = True
            self._condition.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="streamfilter-lmdb-merge", daemon=True)
                self._thread.start()

    def settle(self) -> None:
        """Wait until no merge is wanted or under way."""
        with self._condition:
            while (self._wanted or self._busy) and self._thread is not None:
                self._condition.wait()

    def stop(self) -> None:
        """Stop after the merge under way, if any; merges still due wait for a later batch."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._condition:
            self._thread = None
            self._stopping = self._wanted = False

    def _loop(self) -> None:
        _yield_cpu_to_batches()
        while True:
            with self._condition:
                while not self._wanted and not self._stopping:
                    self._condition.wait()
                if self._stopping:
                    self._busy = False
                    self._condition.notify_all()
                    return
                self._wanted = False
                self._busy = True
            try:
                while not self._stopping and self._merge_step():
                    pass
            except BaseException as exc:  # raised by the store's next batch
                with self._condition:
                    self.error = exc
                    self._busy = self._wanted = False
                    self._thread = None
                    self._condition.notify_all()
                return
            with self._condition:
                self._busy = False
                self._condition.notify_all()
