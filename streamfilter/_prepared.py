"""What the pure half of the engine hands the store half: a batch's entries and sketches.

``Sketcher.prepare`` builds a ``PreparedBatch`` (in this process, or in a
worker process that sends its columns, ``Entries`` and ``Sketches``), and
``Engine.commit`` judges it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._post import Post, VerdictKind
from ._values import Sketches

__all__ = ["NO_SHINGLES", "NO_WORDS", "Entries", "Entry", "PreparedBatch", "WireBatch", "post_fields"]

NO_SHINGLES = np.zeros(0, dtype=np.uint64)
NO_WORDS = np.zeros(0, dtype=np.uint32)


@dataclass(slots=True)
class Entry:
    """One row of a batch while ``Sketcher`` builds it (``Entries.of`` makes
    the batch's columns of them)."""

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


def _row_columns(entries: Sequence[Entry]) -> tuple[list[Any], ...]:
    """What ``Entries.of`` and ``Entries.wire_of`` both take of the rows:
    line numbers, kinds, reasons, sketch indexes, references, delete notices."""
    if len(entries) == 1:  # a sync call's one record: one pass, not six
        entry = entries[0]
        return [entry.line], [entry.kind], [entry.reason], [entry.sketch_index], [entry.reference], [entry.deletes]
    return (
        [entry.line for entry in entries],
        [entry.kind for entry in entries],
        [entry.reason for entry in entries],
        [entry.sketch_index for entry in entries],
        [entry.reference for entry in entries],
        [entry.deletes for entry in entries],
    )


@dataclass(slots=True)
class Entries:
    """A batch's records as columns, one row a post (or a record that is not one).

    ``kinds`` holds the verdict of a row decided without the store, and None
    for a row the store judges by its sketch, ``sketch_index``. ``ids`` and
    ``undated`` are read from its post; the post itself is in ``posts`` where
    the batch was adapted in this process, and a worker's batch carries its
    fields instead (``fields``, ``post_fields``' tuples): ``post(at)`` builds
    the Post only for a caller that asks for it (the API's edge)."""

    lines: list[int]
    raws: list[object]
    kinds: list[VerdictKind | None]
    reasons: list[str | None]
    sketch_index: list[int]
    reference: list[bool]
    deletes: list[tuple[str, str] | None]
    ids: list[str | None]  # the post's id; None without a post, or for a post without one
    undated: list[bool]  # a post without a time of its own
    posts: list[Post | None] | None = None
    fields: list[tuple[Any, ...] | None] | None = None

    def __len__(self) -> int:
        return len(self.lines)

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> Entries:
        posts = [entry.post for entry in entries]
        lines, kinds, reasons, sketch_index, reference, deletes = _row_columns(entries)
        return cls(
            lines,
            [entry.raw for entry in entries],
            kinds,
            reasons,
            sketch_index,
            reference,
            deletes,
            [None if post is None else post.id for post in posts],
            [post is not None and post.timestamp is None for post in posts],
            posts=posts,
        )

    def post(self, at: int) -> Post | None:
        """Row ``at``'s post, or None for a record that carries none."""
        if self.posts is not None:
            return self.posts[at]
        assert self.fields is not None
        fields = self.fields[at]
        if fields is None:
            return None
        post_id, text, timestamp, retweet_of, is_retweet, platform, author = fields
        return Post(post_id, text, timestamp, retweet_of, is_retweet, platform, self.raws[at], author)

    def platform(self, at: int) -> str | None:
        """Row ``at``'s post's platform (``Post.platform``), without building the Post."""
        if self.posts is not None:
            post = self.posts[at]
            return None if post is None else post.platform
        assert self.fields is not None
        fields = self.fields[at]
        return None if fields is None else str(fields[5])

    @staticmethod
    def wire_of(entries: Sequence[Entry]) -> tuple[Any, ...]:
        """The columns a worker sends of its rows (``from_wire``), raw records left out."""
        fields = [None if entry.post is None else post_fields(entry.post) for entry in entries]
        return (*_row_columns(entries), fields)

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...], raw_of: dict[int, object]) -> Entries:
        lines, kinds, reasons, sketch_index, reference, deletes, fields = wire
        return cls(
            lines,
            [raw_of[line] for line in lines],
            kinds,
            reasons,
            sketch_index,
            reference,
            deletes,
            [None if row is None else row[0] for row in fields],
            [row is not None and row[2] is None for row in fields],
            fields=fields,
        )

    def part(self, start: int, end: int, sketch_index: list[int]) -> Entries:
        """Rows ``start`` to ``end``, their sketches numbered ``sketch_index``."""
        cut = slice(start, end)
        return Entries(
            self.lines[cut],
            self.raws[cut],
            self.kinds[cut],
            self.reasons[cut],
            sketch_index,
            self.reference[cut],
            self.deletes[cut],
            self.ids[cut],
            self.undated[cut],
            None if self.posts is None else self.posts[cut],
            None if self.fields is None else self.fields[cut],
        )


@dataclass(slots=True)
class PreparedBatch:
    entries: Entries
    sketches: Sketches

    @property
    def first_line(self) -> int:
        return self.entries.lines[0] if self.entries.lines else 0

    @property
    def last_line(self) -> int:
        return self.entries.lines[-1] if self.entries.lines else 0

    def prepared(self) -> PreparedBatch:
        return self

    def split_after_deletes(self) -> list[PreparedBatch]:
        """This batch cut after each delete notice, so that the posts after one
        are judged once the post it deletes is forgotten (one part when it
        holds none, or only at its end)."""
        deletes = self.entries.deletes
        cuts = [at + 1 for at in range(len(deletes) - 1) if deletes[at] is not None]
        if not cuts:
            return [self]
        parts = []
        for start, end in zip([0, *cuts], [*cuts, len(deletes)], strict=True):
            rows: list[int] = []
            numbers = []
            for index in self.entries.sketch_index[start:end]:
                if index >= 0:
                    rows.append(index)
                    index = len(rows) - 1
                numbers.append(index)
            parts.append(PreparedBatch(self.entries.part(start, end, numbers), self.sketches.take(rows)))
        return parts

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...], records: Sequence[tuple[int, object]]) -> PreparedBatch:
        """The batch ``Sketcher.prepare_wire`` sent, its raw records put back from ``records``."""
        entry_columns, post_ids, timestamps, *columns = wire
        # the frame's buffers are read-only, and the timeline writes the times
        sketches = Sketches(post_ids, np.array(timestamps, dtype=np.float64), *columns)
        return cls(Entries.from_wire(entry_columns, dict(records)), sketches)


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
        lines = self.wire[0][0]
        return int(lines[0]) if lines else 0

    @property
    def last_line(self) -> int:
        lines = self.wire[0][0]
        return int(lines[-1]) if lines else 0

    def prepared(self) -> PreparedBatch:
        return PreparedBatch.from_wire(self.wire, self.records)


def post_fields(post: Post) -> tuple[Any, ...]:
    return (post.id, post.text, post.timestamp, post.retweet_of, post.is_retweet, post.platform, post.author)
