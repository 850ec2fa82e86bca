"""What the pure half of the engine hands the store half: a batch's entries and sketches.

``Sketcher.prepare`` builds a ``PreparedBatch`` (in this process, or in a
worker process that sends it as flat columns, ``Columns``), and
``Engine.commit`` judges it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ._compiled import compiled_kernel
from ._post import POST_SLOTS, Post, VerdictKind, slot_descriptors
from .stores._base import Sketch

__all__ = ["ENTRY_SLOTS", "NO_SHINGLES", "NO_WORDS", "Columns", "Entry", "PreparedBatch", "WireBatch", "post_fields"]

NO_SHINGLES = np.zeros(0, dtype=np.uint64)
NO_WORDS = np.zeros(0, dtype=np.uint32)


@dataclass(slots=True)
class Entry:
    line: int
    raw: object
    post: Post | None
    kind: VerdictKind | None = None  # set when decided without the store
    reason: str | None = None
    sketch_index: int = -1
    reference: bool = False  # a repost without text, judged by the post it reposts
    cut_off: bool = False  # its text ends in a word cut by "…" (``is_cut_off``)
    # the post a platform's delete notice removes: (NotAPost.platform, NotAPost.deletes)
    deletes: tuple[str, str] | None = None


@dataclass(slots=True)
class Columns:
    """A batch's sketches as flat columns: one row of plain values per sketch,
    and its band keys, shingles and word hashes end to end. A worker process
    sends these (pickling them costs a fraction of pickling objects), and the
    Sketch objects are cut from them where the store runs."""

    rows: list[tuple[str, float, bool, str | None, bool]]  # post id, timestamp, made-up id, refers to, cut off
    key_counts: list[int]
    shingle_counts: list[int]
    word_counts: list[int]
    keys: npt.NDArray[np.uint64]
    shingles: npt.NDArray[np.uint64]
    words: npt.NDArray[np.uint32]

    def sketches(self) -> list[Sketch]:
        if _KERNEL is not None:  # the loop below, compiled (_kernel_objects.c)
            return _KERNEL.sketches_from_columns(  # type: ignore[no-any-return]
                self.rows,
                self.key_counts,
                self.shingle_counts,
                self.word_counts,
                self.keys,
                self.shingles,
                self.words,
                Sketch,
                _SKETCH_SLOTS,
            )
        key_ends = np.cumsum(self.key_counts).tolist()
        shingle_ends = np.cumsum(self.shingle_counts).tolist()
        word_ends = np.cumsum(self.word_counts).tolist()
        keys, shingles, words = self.keys, self.shingles, self.words
        # Sketch's fields by position, in its order (post_id, timestamp,
        # band_keys, shingles, words, made_up_id, refers_to, cut_off): a
        # third of the time of keywords, once a post.
        return [
            Sketch(
                post_id,
                timestamp,
                keys[key_end - key_count : key_end],
                shingles[shingle_end - shingle_count : shingle_end],
                words[word_end - word_count : word_end],
                made_up_id,
                refers_to,
                cut_off,
            )
            for (
                (post_id, timestamp, made_up_id, refers_to, cut_off),
                key_count,
                key_end,
                shingle_count,
                shingle_end,
                word_count,
                word_end,
            ) in zip(
                self.rows,
                self.key_counts,
                key_ends,
                self.shingle_counts,
                shingle_ends,
                self.word_counts,
                word_ends,
                strict=True,
            )
        ]


@dataclass(slots=True)
class PreparedBatch:
    entries: list[Entry]
    sketches: list[Sketch]

    @property
    def first_line(self) -> int:
        return self.entries[0].line if self.entries else 0

    @property
    def last_line(self) -> int:
        return self.entries[-1].line if self.entries else 0

    def prepared(self) -> PreparedBatch:
        return self

    def split_after_deletes(self) -> list[PreparedBatch]:
        """This batch cut after each delete notice, so that the posts after one
        are judged once the post it deletes is forgotten (one part when it
        holds none, or only at its end)."""
        cuts = [at + 1 for at, entry in enumerate(self.entries[:-1]) if entry.deletes is not None]
        if not cuts:
            return [self]
        parts = []
        for start, end in zip([0, *cuts], [*cuts, len(self.entries)], strict=True):
            entries, sketches = [], []
            for entry in self.entries[start:end]:
                if entry.sketch_index >= 0:
                    sketches.append(self.sketches[entry.sketch_index])
                    entry = replace(entry, sketch_index=len(sketches) - 1)
                entries.append(entry)
            parts.append(PreparedBatch(entries, sketches))
        return parts

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...], records: Sequence[tuple[int, object]]) -> PreparedBatch:
        """The batch ``Sketcher.prepare_wire`` sent, its raw records put back from ``records``."""
        entry_rows, *columns = wire
        raw_of = dict(records)
        if _KERNEL is not None:  # the loop below, compiled (_kernel_objects.c)
            entries = _KERNEL.entries_from_wire(entry_rows, raw_of, Post, POST_SLOTS, Entry, ENTRY_SLOTS)
        else:
            entries = []
            for line, kind, reason, sketch_index, reference, fields, deletes in entry_rows:
                raw = raw_of[line]
                post = None
                if fields is not None:
                    post_id, text, timestamp, retweet_of, is_retweet, platform, author = fields
                    post = Post(post_id, text, timestamp, retweet_of, is_retweet, platform, raw, author)
                entries.append(Entry(line, raw, post, kind, reason, sketch_index, reference, False, deletes))
        return cls(entries, Columns(*columns).sketches())


@dataclass(slots=True)
class WireBatch:
    """A batch as a worker process answered it (``Sketcher.prepare_wire``),
    with its raw records: ``prepared()`` rebuilds the PreparedBatch.

    A replay's process rebuilds it in the store stage, just before judging
    it, not on the event loop as it arrives: the two share one interpreter
    lock, and a rebuild there held the store stage back at whatever point
    of its batch it fell (docs/design/pipeline.md)."""

    wire: tuple[Any, ...]
    records: Sequence[tuple[int, object]]

    @property
    def first_line(self) -> int:
        rows = self.wire[0]
        return int(rows[0][0]) if rows else 0

    @property
    def last_line(self) -> int:
        rows = self.wire[0]
        return int(rows[-1][0]) if rows else 0

    def prepared(self) -> PreparedBatch:
        return PreparedBatch.from_wire(self.wire, self.records)


_KERNEL = compiled_kernel()
ENTRY_SLOTS = slot_descriptors(Entry)
_SKETCH_SLOTS = slot_descriptors(Sketch)


def post_fields(post: Post) -> tuple[Any, ...]:
    return (post.id, post.text, post.timestamp, post.retweet_of, post.is_retweet, post.platform, post.author)
