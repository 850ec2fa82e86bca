"""What the LMDB store keeps in memory across transactions: decoded runs and key filters.

Both are supersets of what they describe: a key filter may say a key might be
in a run when it is not (one search, never a verdict), and never the reverse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import lmdb
import numpy as np
import numpy.typing as npt

from ..._compiled import chosen, kernel
from ._runs import KEY_BITS, RUN_KEY, Run, decode_run
from ._tuning import LMDBTuning

__all__ = ["KeyFilter", "NewRun", "RunCache", "RunMasks"]


# The run masks' table at most: 2**26 slots of 16 bits, 128 MB, 8 slots an
# entry for the largest run merging makes.
_MAX_MASK_BITS = 26
# A run's keys go into the run masks this many at a time (bounded temporaries).
_MASK_CHUNK = 1 << 20


class RunCache:
    """Large runs as decoded once, kept across transactions.

    py-lmdb touches every page of a value it returns, so reading a run costs
    a memory access per 4 KB page, for every batch and every merge plan: a
    cost that grows with the index.

    A run read once is valid later for two reasons. A run's key is never
    used again (it carries the id of the write transaction that made it),
    so a key listed now names the very value read before; and a value that
    large sits on overflow pages of its own, which LMDB does not write while
    the value exists (a smaller one lives in a page that is copied whenever
    a neighbour changes). Not kept: runs read by the transaction that wrote
    them (their pages are its private copies until it commits). Growing the map
    moves it, so growth drops every kept run (``clear``, under _MapGuard).

    A smaller run is kept as a copy of its value, made when first read, so
    that a batch does not decode every small run again.
    """

    def __init__(self, tuning: LMDBTuning) -> None:
        self._runs: dict[bytes, Run] = {}
        self._cached_run_bytes = tuning.cached_run_bytes

    def listed(self, txn: lmdb.Transaction, db: lmdb._Database) -> list[Run]:
        """The runs ``txn`` sees, oldest first, reading only the values of runs not kept."""
        known, kept = self._runs, {}
        runs = []
        cursor = txn.cursor(db)
        for listed_key in cursor.iternext(keys=True, values=False):  # keys only: no value is touched
            db_key = bytes(listed_key)
            run = known.get(db_key)
            keep = run is not None
            if run is None:
                value = cursor.value()
                keep = RUN_KEY.unpack(db_key)[1] < txn.id()  # not this transaction's own
                owned = keep and len(value) < self._cached_run_bytes
                if owned:
                    value = bytes(value)  # a small run is kept as a copy (see above)
                run = decode_run(db_key, value, owned=owned)
            if keep:
                kept[db_key] = run
            runs.append(run)
        self._runs = kept  # the runs no longer listed are gone for good
        return runs

    def get(self, db_key: bytes) -> Run | None:
        return self._runs.get(db_key)

    def adopt(self, runs: Iterable[Run]) -> None:
        """Keep runs this process wrote, from the buffers they were encoded
        into, once their transaction has committed: the next batch finds
        the newest run decoded, its keys rebuilt already. A run merged away in
        the same transaction is never listed, and is dropped at the next listing."""
        for run in runs:
            self._runs[run.db_key] = run

    def clear(self) -> None:
        self._runs = {}


# A run a transaction wrote, for the key filter once it commits: the run
# (valid after the transaction), the identities of the runs it was merged
# from, and the keys that none of those held (None: none), sorted.
NewRun = tuple[Run, Sequence[tuple[int, int, int]], npt.NDArray[np.uint64] | None]


class _Bits:
    """One bit per key prefix, about 8 to 16 bits per key added; a key whose bit is clear was never added."""

    def __init__(self, keys: int, max_bits: int) -> None:
        self.width = min(max_bits, max(min(20, max_bits), (keys * 8 - 1).bit_length()))
        self.bytes = np.zeros(1 << (self.width - 3), dtype=np.uint8)
        self.shift = np.uint64(KEY_BITS - self.width)

    @property
    def capacity(self) -> int:
        return len(self.bytes) * 8

    def add_run(self, run: Run) -> None:
        """Set the bits of a run's keys."""
        if not _mark_run(self.bytes, self.width, -1, run):
            self.add(run.prefixes(self.width))

    def _c_add_keys(self, keys: npt.NDArray[np.uint64]) -> None:
        kernel.mark_keys(self.bytes, self.width, -1, np.ascontiguousarray(keys, dtype=np.uint64))

    def _py_add_keys(self, keys: npt.NDArray[np.uint64]) -> None:
        """Set the bits of these keys (sorted)."""
        self.add((keys >> self.shift).astype(np.uint32))

    add_keys = chosen(_c_add_keys, _py_add_keys)

    def add(self, slots: npt.NDArray[np.uint32]) -> None:
        """Set the bits of these key prefixes (``width`` bits each): the
        reference that the kernel's marks are tested against."""
        # sorted prefixes: the bits are set in order, much faster than at random
        np.bitwise_or.at(self.bytes, slots >> np.uint32(3), np.left_shift(1, slots & np.uint32(7)).astype(np.uint8))

    def _c_might_hold(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        marked = kernel.marked(self.bytes, self.width, np.ascontiguousarray(keys, dtype=np.uint64))
        return np.frombuffer(marked, dtype=np.int64)

    def _py_might_hold(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """Indexes of the keys that may have been added."""
        slots = keys >> self.shift
        return np.flatnonzero((self.bytes[slots >> np.uint64(3)] >> (slots & np.uint64(7)).astype(np.uint8)) & 1)

    might_hold = chosen(_c_might_hold, _py_might_hold)


class RunMasks:
    """Which large runs might hold a key: one table of 16-bit masks by key prefix, in this process.

    Each run of ``LMDBTuning.filtered_run`` entries or more is given a plane, one bit
    of every slot, set where a key of the run falls. One look-up in the table
    answers for every large run at once, where bits of each large run's own
    would cost a cache miss per run for every key that might be in one.
    With 8 slots an entry, a key not in a run passes for it 12% of the time,
    and is searched for in it.

    With more than 16 large runs, a plane holds several, and a key that may
    be in any of them is searched for in each. A run that has gone (merged,
    or purged whole) leaves its keys set in its plane until the plane is
    cleared, which is done for all such planes at once, in one pass over the
    table, when a new run needs a plane: a superset, like the key filter's
    bits. The table is sized for 8 slots an entry of the largest run and
    built again (every large run added anew) when a larger one comes.
    """

    PLANES = 16

    def __init__(self, filtered_run: int) -> None:
        self.filtered_run = filtered_run
        self._reset(0)

    def _reset(self, bits: int) -> None:
        self._table = np.zeros(1 << bits if bits else 0, dtype=np.uint16)
        self._shift = np.array(KEY_BITS - bits, dtype=np.uint64)  # 0-d: as _runs.short_keys's
        self._plane_of: dict[tuple[int, int, int], int] = {}
        self._stale = 0  # planes that hold keys of runs gone

    def sync(self, runs: list[Run]) -> None:
        """Give the large runs in ``runs`` a plane each; forget the runs not among them."""
        large = {run.identity: run for run in runs if run.count >= self.filtered_run}
        for identity in [identity for identity in self._plane_of if identity not in large]:
            self._stale |= 1 << self._plane_of.pop(identity)
        if not large:
            self._reset(0)  # free the table
            return
        new = [run for identity, run in large.items() if identity not in self._plane_of]
        if not new:
            return
        bits = min(_MAX_MASK_BITS, max(20, (max(run.count for run in new) * 8 - 1).bit_length()))
        if bits > KEY_BITS - int(self._shift):  # the first large run, or one larger than the table is for
            self._reset(bits)
            new = list(large.values())
        for run in new:
            self._add(run, self._plane_for(large))

    def _plane_for(self, large: dict[tuple[int, int, int], Run]) -> int:
        """A clean plane no run holds; else, once the stale planes are cleared,
        one of those, or the plane whose runs have the fewest entries."""
        while True:
            entries = [0] * self.PLANES
            held = [False] * self.PLANES
            for identity, plane in self._plane_of.items():
                entries[plane] += large[identity].count
                held[plane] = True
            for plane in range(self.PLANES):
                if not held[plane] and not self._stale >> plane & 1:
                    return plane
            if not self._stale:
                return min(range(self.PLANES), key=entries.__getitem__)
            self._clear_stale(large)

    def _clear_stale(self, large: dict[tuple[int, int, int], Run]) -> None:
        """One pass over the table clears every plane that holds keys of runs
        gone; the live runs such a plane also holds are added back."""
        stale, self._stale = self._stale, 0
        self._table &= np.uint16(~stale & 0xFFFF)
        for identity, plane in list(self._plane_of.items()):
            if stale >> plane & 1:
                self._add(large[identity], plane)

    def _add(self, run: Run, plane: int) -> None:
        if not _mark_run(self._table, KEY_BITS - int(self._shift), plane, run):
            self.add_in_numpy(run, plane)
        self._plane_of[run.identity] = plane

    def add_in_numpy(self, run: Run, plane: int) -> None:
        """Set a run's keys' slots in ``plane`` without the kernel: the reference it is tested against."""
        bit = np.uint16(1 << plane)
        table, shift = self._table, self._shift
        for start in range(0, run.count, _MASK_CHUNK):  # bounded temporaries
            slots = run.prefixes(KEY_BITS - int(shift), start, start + _MASK_CHUNK)
            # a slot repeated among the keys is written the same value each time
            table[slots] |= bit

    def masks(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16] | None:
        """Each key's mask of the planes that may hold it, or None without large runs."""
        return self._table[keys >> self._shift] if self._plane_of else None

    def bit_of(self, run: Run) -> np.uint16 | None:
        """The bit of a large run's plane (the last ``sync`` must have seen it), or None for a small run."""
        if run.count < self.filtered_run:
            return None
        return np.uint16(1 << self._plane_of[run.identity])


class KeyFilter:
    """Which band keys might be in some run, in this process: ``run_masks``
    for the runs of ``LMDBTuning.filtered_run`` entries or more, and one bit per key
    prefix for the smaller runs.

    Both always hold every key of the runs they are for (a superset: a bit
    set for a key that has gone costs one search, never a verdict). Before
    any look-up, a transaction adds the runs it has not seen: those written
    by other processes. A run is known by (first serial, last serial,
    entries), which fixes its contents. The runs this process writes are
    taken in only once their transaction has committed (``taken_in``): a
    batch's new run with its keys, and a merged run with none but its fresh
    ones when its parts brought the rest in already (each key is merged again
    about log2(posts / batch) times). The bits are rebuilt from the live
    small runs when they outgrow them, and after a quarter as many keys were
    added as there are bits (so bits of purged posts do not pile up).
    Without them, every key of a novel post is searched for in every run;
    with ~8 bits per entry, about 88% of those searches are skipped.

    A large index keeps a dozen or so runs of millions of entries, and a
    copy's keys are in one of them: with one filter for all runs, each of its
    keys would be searched for in every large run. The large runs are also
    most of the keys, which the bits would then have to hold and rebuild.
    """

    def __init__(self, tuning: LMDBTuning) -> None:
        self._filtered_run = tuning.filtered_run
        self._max_bits = tuning.max_filter_bits
        self._bits = _Bits(0, self._max_bits)
        self._empty = True
        self._seen: set[tuple[int, int, int]] = set()  # small runs whose keys are in the bits
        self._added = 0
        self.run_masks = RunMasks(tuning.filtered_run)

    def sync(self, runs: list[Run]) -> None:
        self.run_masks.sync(runs)
        small = [run for run in runs if run.count < self._filtered_run]
        live = sum(run.count for run in small)
        capacity = self._bits.capacity
        outgrown = live * 8 > capacity and capacity < 1 << self._max_bits
        # Bits of purged posts stay set: once a quarter as many keys were added
        # as there are bits, at most about a third of the bits are set, so rebuild.
        if self._empty or outgrown or self._added > capacity // 4:
            self._rebuild(small, live)
            return
        for run in small:
            if run.identity not in self._seen:
                self._add_run(run)
                self._seen.add(run.identity)

    def _rebuild(self, small: list[Run], live: int) -> None:
        self._bits = _Bits(live, self._max_bits)
        self._empty = False
        self._seen = {run.identity for run in small}
        for run in small:
            self._add_run(run)
        self._added = 0  # counts the keys added since: at the size cap, the live ones can exceed the bits

    def taken_in(self, new_runs: list[NewRun]) -> None:
        """Runs that a committed transaction of this process wrote (a batch's,
        or the merge thread's). A small one's keys are added, or only its
        fresh ones when the bits hold the keys of every run it was merged
        from; a large one is the run masks' at the next sync."""
        for run, parts, fresh in new_runs:
            if run.count >= self._filtered_run:
                continue
            if not all(part in self._seen for part in parts):
                self._add_run(run)  # a part was another process's, or a large run
            elif fresh is not None:
                self._bits.add_keys(fresh)
                self._added += len(fresh)
            self._seen.add(run.identity)

    def _add_run(self, run: Run) -> None:
        self._bits.add_run(run)
        self._added += run.count

    def might_hold(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """Indexes of the keys that may be in a small run."""
        return self._bits.might_hold(keys)


def _c_mark_run(out: npt.NDArray[np.uint8] | npt.NDArray[np.uint16], width: int, plane: int, run: Run) -> bool:
    """Mark a run's keys with the kernel, read in place; False for a pending
    run, whose keys are not stored yet: the caller marks those in numpy."""
    if len(run.stored) != run.count:
        return False
    kernel.mark_run(out, width, plane, run.stored, run.tops())
    return True


def _py_mark_run(out: npt.NDArray[np.uint8] | npt.NDArray[np.uint16], width: int, plane: int, run: Run) -> bool:
    """Without the kernel, the caller marks every run in numpy."""
    return False


_mark_run = chosen(_c_mark_run, _py_mark_run)
