"""The values the judge and the stores pass each other, below both.

A ``Sketch`` is what a store needs of a post; a ``CachedPost`` what
verification needs of a stored one; a ``Match`` what made a post a
duplicate; a ``Judgement`` a judged batch before it is recorded. The judge
(``_judge``, ``_rules``) and the stores (``stores``) import them from here,
and this module imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ._compiled import chosen, from_kernel

__all__ = ["CachedPost", "Judgement", "Match", "Sketch"]


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

    @classmethod
    def of(cls, sketch: Sketch) -> CachedPost:
        """A sketch as the post it is recorded as."""
        return cls(sketch.timestamp, sketch.post_id, sketch.words.astype("<u4", copy=False).tobytes())


_PyCachedPost = CachedPost  # what the compiled one is held to (tests/test_kernel.py)
CachedPost = chosen(from_kernel("CachedPost"), _PyCachedPost)  # type: ignore[misc]


@dataclass(slots=True)
class Judgement:
    """A judged batch, before it is recorded."""

    matches: list[Match | None]
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
