"""The sizes at which the LMDB index changes its layout."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LMDBTuning"]


@dataclass(frozen=True, slots=True)
class LMDBTuning:
    """Sizes, in entries (band keys) or bytes, at which the LMDB store changes
    how it lays out and searches its runs. None of them changes a verdict.

    The defaults suit streams of any size; tests shrink them so that merges,
    kept runs and the key filter's rebuilds happen on streams of a few
    thousand posts. docs/design/lmdb.md says how each was chosen.
    """

    # a batch's own transaction merges runs while the result stays this small;
    # larger merges run on the store's merge thread, so a batch never waits for one
    inline_merged_entries: int = 1 << 15
    # merging stops here: beyond it, runs are only dropped whole once every post in them is purged
    max_merged_entries: int = 1 << 23
    # runs whose value takes at least this many bytes stay decoded across transactions
    cached_run_bytes: int = 1 << 16
    # runs of at least this many entries are in the run masks, smaller ones in the key filter's bits
    filtered_run: int = 1 << 20
    # the key filter's size at most, as a power of two bits (2**30 bits: 128 MB)
    max_filter_bits: int = 30
