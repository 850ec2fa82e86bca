"""The values the judge and the stores pass each other, below both.

A batch's ``Sketches`` are what a store needs of its posts, as columns; a
``Sketch`` is one of them, for a caller that takes one post at a time. A
``CachedPost`` is what verification needs of a stored post; a batch's
``Matches`` say which of its posts are duplicates, and of what (a ``Match``
is one of them); a ``Judgement`` is a judged batch before it is recorded.
The judge (``_judge``, ``_rules``) and the stores (``stores``) import them
from here, and this module imports neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from ._compiled import chosen, from_kernel

__all__ = [
    "BandKeys",
    "Rows",
    "CachedPost",
    "Judgement",
    "Match",
    "Matches",
    "Sketch",
    "Sketches",
    "offsets_of",
    "recorded_post",
]

# Band keys of several posts: their keys end to end, and how many each has.
BandKeys = tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]

_Value = TypeVar("_Value", bound=np.generic)
_Row = TypeVar("_Row")

_NO_KEYS = np.zeros(0, dtype=np.uint64)
_NO_WORDS = np.zeros(0, dtype=np.uint32)


@dataclass(slots=True)
class Sketch:
    """What a store needs of one post: who it is, when, its bands and what verifies it.

    ``shingles`` holds the values of the post's runs of 1 to k words, the set
    that verification compares (``_shingle.verification_hashes``); ``words``
    its 32-bit word hashes in order, from which a store may rebuild that set
    (``_shingle.verification_set``) and its band keys (``rekey``) instead of
    storing them.
    """

    post_id: str
    timestamp: float
    band_keys: npt.NDArray[np.uint64]
    shingles: npt.NDArray[np.uint64]
    words: npt.NDArray[np.uint32]
    # True when the post had no id and ``post_id`` was made up ("line:N"):
    # such ids can repeat across inputs, so they do not identify a post alone.
    made_up_id: bool = False
    # A reference: a repost that carries no text, judged by the post it
    # reposts. ``band_keys`` holds that post's id key; the sketch is a
    # duplicate of it when it is live in the index, and is never recorded.
    refers_to: str | None = None
    # The post's text ends in a word cut by "…" (``_normalize.is_cut_off``):
    # it is also compared with the start of each candidate (``judged_similarity``).
    cut_off: bool = False


@dataclass(frozen=True, slots=True)
class Match:
    """The earlier post that a post duplicates, and their similarity: the
    Jaccard of their verification sets, or what ``under_threshold`` raised it to."""

    duplicate_of: str
    similarity: float


class Rows(Sequence[_Row]):
    """A sequence kept as columns, whose items are built when asked for
    (``row``): ``Sketches``, ``Matches``, and ``_verdicts.Verdicts``."""

    __slots__ = ()

    def row(self, at: int) -> _Row:
        """Item ``at`` (0 <= at < len), built from the columns."""
        raise NotImplementedError

    @overload
    def __getitem__(self, at: int) -> _Row: ...

    @overload
    def __getitem__(self, at: slice) -> list[_Row]: ...

    def __getitem__(self, at: int | slice) -> _Row | list[_Row]:
        if isinstance(at, slice):
            return [self.row(index) for index in range(*at.indices(len(self)))]
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        return self.row(at)

    def __iter__(self) -> Iterator[_Row]:
        return (self.row(at) for at in range(len(self)))


def offsets_of(counts: Iterable[int]) -> npt.NDArray[np.int64]:
    """Offsets from counts: 0, then each row's end."""
    counted = np.fromiter(counts, dtype=np.int64)
    ends = np.zeros(len(counted) + 1, dtype=np.int64)
    np.cumsum(counted, out=ends[1:])
    return ends


def _picked(
    ends: npt.NDArray[np.int64], values: npt.NDArray[_Value], rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[_Value]]:
    """The offsets and values of ``rows`` of a column cut by ``ends``: a view
    where the rows lie one after another, as a batch's recorded posts often do."""
    starts, stops = ends[:-1][rows], ends[1:][rows]
    picked = offsets_of((stops - starts).tolist())
    if not len(rows):
        return picked, values[:0]
    if (starts[1:] == stops[:-1]).all():
        return picked, values[starts[0] : stops[-1]]
    return picked, np.concatenate(
        [values[start:stop] for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)]
    )


@dataclass(slots=True, eq=False)
class Sketches(Rows[Sketch]):
    """A batch's sketches as columns: a row of plain values per post, and its
    band keys, shingles and word hashes end to end, each with its offsets
    (``key_ends[i]:key_ends[i + 1]`` are post i's keys). A sketch worker sends
    these, the judge and the LMDB store read them as they are, and a
    ``Sketch`` is cut from them (``sketches[i]``) only for a caller that takes
    one post at a time. ``timestamps`` is written where the timeline places a
    post in event time (``_timeline``)."""

    post_ids: list[str]
    timestamps: npt.NDArray[np.float64]
    made_up_id: npt.NDArray[np.bool_]
    cut_off: npt.NDArray[np.bool_]
    refers_to: list[str | None]
    key_ends: npt.NDArray[np.int64]
    keys: npt.NDArray[np.uint64]
    shingle_ends: npt.NDArray[np.int64]
    shingles: npt.NDArray[np.uint64]
    word_ends: npt.NDArray[np.int64]
    words: npt.NDArray[np.uint32]

    @classmethod
    def empty(cls) -> Sketches:
        none = np.zeros(1, dtype=np.int64)
        flags = np.zeros(0, dtype=np.bool_)
        return cls([], np.zeros(0), flags, flags, [], none, _NO_KEYS, none, _NO_KEYS, none, _NO_WORDS)

    @classmethod
    def of(cls, sketches: Iterable[Sketch]) -> Sketches:
        """Sketch objects as columns (a library caller's, or a group's held posts)."""
        if isinstance(sketches, Sketches):
            return sketches
        rows = list(sketches)
        if not rows:
            return cls.empty()
        return cls(
            [sketch.post_id for sketch in rows],
            np.array([sketch.timestamp for sketch in rows], dtype=np.float64),
            np.array([sketch.made_up_id for sketch in rows], dtype=np.bool_),
            np.array([sketch.cut_off for sketch in rows], dtype=np.bool_),
            [sketch.refers_to for sketch in rows],
            offsets_of(len(sketch.band_keys) for sketch in rows),
            np.concatenate([sketch.band_keys for sketch in rows]).astype(np.uint64, copy=False),
            offsets_of(len(sketch.shingles) for sketch in rows),
            np.concatenate([sketch.shingles for sketch in rows]).astype(np.uint64, copy=False),
            offsets_of(len(sketch.words) for sketch in rows),
            np.concatenate([sketch.words for sketch in rows]).astype(np.uint32, copy=False),
        )

    def __len__(self) -> int:
        return len(self.post_ids)

    def row(self, at: int) -> Sketch:
        return Sketch(
            self.post_ids[at],
            float(self.timestamps[at]),
            self.band_keys(at),
            self.shingles[self.shingle_ends[at] : self.shingle_ends[at + 1]],
            self.words[self.word_ends[at] : self.word_ends[at + 1]],
            bool(self.made_up_id[at]),
            self.refers_to[at],
            bool(self.cut_off[at]),
        )

    def band_keys(self, at: int) -> npt.NDArray[np.uint64]:
        return self.keys[self.key_ends[at] : self.key_ends[at + 1]]

    def owners(self) -> npt.NDArray[np.int64]:
        """Each band key's sketch, in ``keys``' order."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.key_ends))

    def keys_of(self, rows: Sequence[int]) -> BandKeys:
        """The band keys of ``rows`` end to end, and how many each has."""
        ends, keys = _picked(self.key_ends, self.keys, np.asarray(rows, dtype=np.int64))
        return keys, np.diff(ends)

    def take(self, rows: Sequence[int]) -> Sketches:
        """These rows, in this order, as a batch of their own."""
        picked = np.asarray(rows, dtype=np.int64)
        return Sketches(
            [self.post_ids[row] for row in rows],
            self.timestamps[picked],
            self.made_up_id[picked],
            self.cut_off[picked],
            [self.refers_to[row] for row in rows],
            *_picked(self.key_ends, self.keys, picked),
            *_picked(self.shingle_ends, self.shingles, picked),
            *_picked(self.word_ends, self.words, picked),
        )

    def columns(self) -> tuple[Any, ...]:
        """What the compiled judge reads: every column, in the order of the fields."""
        return (
            self.post_ids,
            self.timestamps,
            self.made_up_id,
            self.cut_off,
            self.refers_to,
            self.key_ends,
            self.keys,
            self.shingle_ends,
            self.shingles,
            self.word_ends,
            self.words,
        )


class Matches(Rows["Match | None"]):
    """A batch's matches as columns, one row a sketch: the id of the post it
    duplicates (``duplicate_of``, None for a novel one) and their
    ``similarity``. ``matches[i]`` builds the ``Match`` of row i for a caller
    that takes one (the stores' ``check_and_insert``)."""

    __slots__ = ("duplicate_of", "similarity")

    def __init__(
        self, duplicate_of: list[str | None] | None = None, similarity: list[float | None] | None = None
    ) -> None:
        self.duplicate_of: list[str | None] = [] if duplicate_of is None else duplicate_of
        self.similarity: list[float | None] = [] if similarity is None else similarity

    @classmethod
    def of(cls, matches: Iterable[Match | None]) -> Matches:
        if isinstance(matches, Matches):
            return matches
        made = cls()
        for match in matches:
            made.append(match)
        return made

    def __len__(self) -> int:
        return len(self.duplicate_of)

    def row(self, at: int) -> Match | None:
        duplicate_of = self.duplicate_of[at]
        if duplicate_of is None:
            return None
        similarity = self.similarity[at]
        assert similarity is not None
        return Match(duplicate_of, similarity)

    def __setitem__(self, at: int, match: Match | None) -> None:
        self.duplicate_of[at] = None if match is None else match.duplicate_of
        self.similarity[at] = None if match is None else match.similarity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(mine == theirs for mine, theirs in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Matches({list(self)!r})"

    def append(self, match: Match | None) -> None:
        self.duplicate_of.append(None if match is None else match.duplicate_of)
        self.similarity.append(None if match is None else match.similarity)


class CachedPost:
    """What verification needs of one stored post: its time, id, word hashes
    as stored (bytes of little-endian uint32) and, once a comparison needed
    it, its verification set: as its sorted values packed in bytes
    (``packed``), which the compiled ``best_match`` builds and keeps, or as
    a Python set (``members``) where the kernel is not built.

    Where the kernel is built, this is its compiled twin (``_kernel_rules.c``),
    which the cyclic garbage collector does not track: a post cache holds
    tens of thousands of these, and a tracked one made every full collection
    walk them all (docs/benchmarks.md, "Streaming latency")."""

    __slots__ = ("members", "packed", "post_id", "timestamp", "words")

    def __init__(self, timestamp: float, post_id: str, words: bytes, members: set[int] | None = None) -> None:
        self.timestamp = timestamp
        self.post_id = post_id
        self.words = words
        self.members = members
        self.packed: bytes | None = None


_PyCachedPost = CachedPost  # what the compiled one is held to (tests/test_kernel.py)
CachedPost = chosen(from_kernel("CachedPost"), _PyCachedPost)  # type: ignore[misc]


def recorded_post(sketch: Sketch) -> CachedPost:
    """A sketch as the post it is recorded as."""
    return CachedPost(sketch.timestamp, sketch.post_id, sketch.words.astype("<u4", copy=False).tobytes())


@dataclass(slots=True)
class Judgement:
    """A judged batch, before it is recorded."""

    matches: Matches
    clock: float  # the index's clock after the batch
    recorded: list[int] = field(default_factory=list)  # indexes of the novel posts to record, in order
    posts: list[CachedPost] = field(default_factory=list)  # theirs, as verification built them
    # sketch index -> serial of the post its match names (stored, or recorded
    # earlier in the batch: ``first_serial`` + its position in ``recorded``)
    matched: dict[int, int] = field(default_factory=dict)
    first_serial: int = 0
    # what an operator watches for (_stats.ATTACK_SIGNALS): posts with more
    # candidates than are verified, and band keys offering all they may
    capped: int = 0
    full_buckets: int = 0
