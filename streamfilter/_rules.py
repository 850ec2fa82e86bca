"""The matching rules: when a post is a duplicate of an earlier one, and of which.

The one batch judge (``_judge``) applies these for every store; the stores
only keep the index.

1. **Candidates.** LSH proposes, for each band key a post holds, the newest
   ``max_candidates_per_band`` and the oldest ``OLDEST_PER_KEY`` recorded,
   not yet purged posts under that key (``offered_per_key``): posts crafted
   to share a key with an original can push it out of the newest, never out
   of the oldest. They are ranked by how many of the post's band keys
   they share, then newest first, and the first ``MAX_VERIFIED`` are verified
   (``rank_candidates``): a post's work is bounded, however many candidates a
   flood of look-alike posts gives it.
2. **Liveness.** A candidate counts while its event time is newer than the
   clock (the highest event time seen) minus the TTL (``horizon``).
3. **Similarity.** The exact Jaccard of the two posts' verification sets
   (their runs of 1 to k words), raised under the threshold by three rules
   (``under_threshold``): a post cut off by "…" compared with the start of
   the earlier post, two posts a word edit or two apart, and a post whose
   words stand whole in the other's (``embedded``).
4. **Choice.** The first candidate with the very same words wins at once;
   otherwise the most similar candidate at or above the threshold, the first
   in rank order among equals (``best_match``).
5. **References.** A repost without text is a duplicate of the post it
   reposts while that post is live in the index (``referenced``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from ._compiled import chosen, kernel
from ._shingle import verification_set
from ._values import CachedPost, Match, Sketch

__all__ = [
    "CUT_OFF_EXACT_BELOW",
    "CUT_OFF_MIN_SIMILARITY",
    "CUT_OFF_MIN_WORDS",
    "EDIT_MAX_EDITS",
    "EDIT_MIN_JACCARD",
    "EDIT_MIN_WORDS",
    "EMBED_MAX_WORDS",
    "EMBED_MIN_SHARE",
    "EMBED_MIN_WORDS",
    "MAX_CANDIDATES_PER_BAND",
    "MAX_VERIFIED",
    "CachedPost",
    "Match",
    "best_match",
    "edit_similarity",
    "embedded",
    "horizon",
    "jaccard",
    "judged_similarity",
    "may_embed",
    "OLDEST_PER_KEY",
    "offered_per_key",
    "rank_candidates",
    "referenced",
    "similarity_to_words",
    "under_threshold",
    "word_edits",
]

_Member = TypeVar("_Member")  # what a store files under a band key: a serial, a record key

# A band key offers at most this many of its newest posts as candidates,
# and its oldest OLDEST_PER_KEY besides.
MAX_CANDIDATES_PER_BAND = 64
OLDEST_PER_KEY = 2
# A post sharing band keys with more earlier posts than this is verified
# against the ones that share the most keys with it (a copy shares most of
# them, and ranks first: docs/design/rules.md, "Floods").
MAX_VERIFIED = 8
# A post cut off by "…" is also compared with the same number of words at the
# start of each earlier post, when it keeps at least this many words and the
# start matches at least this well (docs/design/rules.md, "Truncated copies").
CUT_OFF_MIN_WORDS = 4
CUT_OFF_MIN_SIMILARITY = 0.8
# A cut post of fewer words than this is a copy only of a post that starts
# with its very words: a short start is shared by many distinct posts.
CUT_OFF_EXACT_BELOW = 6
# Two posts of at least this many words each, at most this many word edits
# apart, whose Jaccard is at least EDIT_MIN_JACCARD, are also compared by their
# words in order: two edits change most word pairs of a short post.
EDIT_MIN_WORDS = 6
EDIT_MAX_EDITS = 2
EDIT_MIN_JACCARD = 0.4
# A post whose words, at least EMBED_MIN_WORDS and at least EMBED_MIN_SHARE of
# the other's, stand unbroken and in order in an earlier post, or that holds an
# earlier post's words so, copies it, whatever else it adds or leaves out: a
# text padded with words drawn anew for each copy, or cut short without a "…"
# (docs/design/rules.md, "Embedded copies").
EMBED_MIN_WORDS = 8
EMBED_MIN_SHARE = 1 / 3
# ... in a post of at most this many words: a longer one is an article, and its
# search, of every place the shorter could stand, would be the crafted post's lever
EMBED_MAX_WORDS = 1000


def horizon(clock: float, ttl_seconds: float) -> float:
    """The event time a stored post must be newer than to count (-inf without a TTL)."""
    return clock - ttl_seconds if ttl_seconds > 0 else float("-inf")


def offered_per_key(members: Sequence[_Member], limit: int) -> list[_Member]:
    """The candidates one band key offers (``members`` oldest first): its
    oldest ``OLDEST_PER_KEY`` and its newest ``limit``, oldest first."""
    if len(members) <= OLDEST_PER_KEY + max(limit, 0):
        return list(members)
    return [*members[:OLDEST_PER_KEY], *(members[-limit:] if limit > 0 else [])]


def rank_candidates(shared: Mapping[int, int]) -> list[int]:
    """Candidate serials (serial -> band keys shared with the post) in the
    order they are verified: most keys shared, then newest (the first
    ``MAX_VERIFIED`` are)."""
    return sorted(shared, key=lambda serial: (shared[serial], serial), reverse=True)


def _word_list(post: CachedPost) -> list[int]:
    """A stored post's word hashes in order."""
    return memoryview(post.words).cast("I").tolist()


def _verification_members(post: CachedPost, shingle_size: int) -> set[int]:
    """A stored post's verification set as a Python set, built on first use."""
    if post.members is None:
        post.members = verification_set(_word_list(post), shingle_size)
    return post.members


def _similarity(own: CachedPost, sketch: Sketch, other: CachedPost, shingle_size: int) -> float:
    """The Jaccard of the post being judged (``sketch``, as ``own``) and
    ``other``, with Python sets (``best_match``'s way without the kernel)."""
    if own.members is None:
        own.members = set(sketch.shingles.tolist())
    return jaccard(own.members, _verification_members(other, shingle_size))


def jaccard(query: set[int] | frozenset[int], other: set[int] | frozenset[int]) -> float:
    """Exact Jaccard similarity of two verification sets."""
    shared = len(other & query) if len(other) < len(query) else len(query & other)
    return shared / (len(query) + len(other) - shared)


def word_edits(first: Sequence[object], second: Sequence[object], limit: int) -> int:
    """The word-level edit distance of two posts (their words in order), or
    ``limit + 1`` once it is known to be over ``limit``: only the cells
    within ``limit`` of the diagonal are computed."""
    if abs(len(first) - len(second)) > limit:
        return limit + 1
    over = limit + 1
    previous = {j: j for j in range(min(len(second), limit) + 1)}
    for i, word in enumerate(first, 1):
        current = {0: i} if i <= limit else {}  # a cell outside the band counts as over
        for j in range(max(1, i - limit), min(len(second), i + limit) + 1):
            current[j] = min(
                previous.get(j, over) + 1,
                current.get(j - 1, over) + 1,
                previous.get(j - 1, over) + (word != second[j - 1]),
            )
        if min(current.values()) > limit:
            return over
        previous = current
    return min(previous.get(len(second), over), over)


def edit_similarity(
    first: Sequence[int] | npt.NDArray[np.uint32], second: Sequence[int] | npt.NDArray[np.uint32]
) -> float:
    """1 - edits / the longer post's words (word hashes, in order), for two
    posts of at least ``EDIT_MIN_WORDS`` words at most ``EDIT_MAX_EDITS``
    word edits apart; 0.0 for any others."""
    if min(len(first), len(second)) < EDIT_MIN_WORDS:
        return 0.0
    edits = _edits(first, second)
    return 1 - edits / max(len(first), len(second)) if edits <= EDIT_MAX_EDITS else 0.0


def embedded(first: Sequence[int], second: Sequence[int]) -> bool:
    """Whether the shorter of two posts' words (word hashes, in order) stand
    unbroken and in order in the longer; for posts that ``may_embed``."""
    shorter, longer = (first, second) if len(first) <= len(second) else (second, first)
    size = len(shorter)
    if size == 0:
        return False
    head = shorter[0]
    return any(longer[at] == head and longer[at : at + size] == shorter for at in range(len(longer) - size + 1))


def _uint32(words: Sequence[int] | npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    return np.ascontiguousarray(words, dtype=np.uint32)


def _ints(words: Sequence[int] | npt.NDArray[np.uint32]) -> list[int]:
    """Word hashes as Python ints (a pair shifts a word 32 bits up, which a uint32 cannot hold)."""
    return words.tolist() if isinstance(words, np.ndarray) else list(words)


def _c_edits(first: Sequence[int] | npt.NDArray[np.uint32], second: Sequence[int] | npt.NDArray[np.uint32]) -> int:
    return int(kernel.word_edits(_uint32(first), _uint32(second), EDIT_MAX_EDITS))


def _py_edits(first: Sequence[int] | npt.NDArray[np.uint32], second: Sequence[int] | npt.NDArray[np.uint32]) -> int:
    """``word_edits`` of two posts' word hashes, up to ``EDIT_MAX_EDITS`` and one more."""
    return word_edits(_ints(first), _ints(second), EDIT_MAX_EDITS)


_edits = chosen(_c_edits, _py_edits)


def judged_similarity(
    sketch: Sketch,
    query: set[int],
    other: set[int],
    other_words: Sequence[int] | npt.NDArray[np.uint32],
    shingle_size: int,
    threshold: float,
) -> float:
    """How similar a post (``sketch``, its verification set ``query``) is to
    an earlier one (its set ``other``, its word hashes in order): their
    Jaccard, raised by ``under_threshold`` when that is under the threshold."""
    return under_threshold(jaccard(query, other), sketch, query, other_words, shingle_size, threshold)


def similarity_to_words(sketch: Sketch, other_words: list[int], shingle_size: int, threshold: float) -> float:
    """``judged_similarity`` of a post and an earlier one given by its word hashes in order."""
    theirs = verification_set(other_words, shingle_size)
    return judged_similarity(sketch, set(sketch.shingles.tolist()), theirs, other_words, shingle_size, threshold)


def under_threshold(
    whole: float,
    sketch: Sketch,
    query: set[int],
    other_words: Sequence[int] | npt.NDArray[np.uint32],
    shingle_size: int,
    threshold: float,
) -> float:
    """``whole``, the Jaccard of a post and an earlier one, or, when it is
    under the threshold, what one of three more comparisons raises it to:

    - a post cut off by "…" (``sketch.cut_off``) of at least
      ``CUT_OFF_MIN_WORDS`` words: the Jaccard with the earlier post's first
      n or n + 1 words (n the cut post's own), when it reaches
      ``CUT_OFF_MIN_SIMILARITY`` (1.0, the very words, for a post of fewer
      than ``CUT_OFF_EXACT_BELOW``): a cut copy keeps the start of a post,
      and the rest is missing, not different;
    - posts with a Jaccard of at least ``EDIT_MIN_JACCARD``:
      ``edit_similarity`` of their words;
    - posts that ``may_embed``, of which one holds the other's words
      unbroken and in order (``embedded``): 1.0, the Jaccard of the shorter
      and the words of the longer that hold it.
    """
    if whole >= threshold:
        return whole
    best = whole
    length = len(sketch.words)
    if sketch.cut_off and length >= CUT_OFF_MIN_WORDS and len(other_words) > length:
        start_words = _ints(other_words[: length + 1])
        start = max(jaccard(query, verification_set(start_words[:size], shingle_size)) for size in (length, length + 1))
        least = max(threshold, CUT_OFF_MIN_SIMILARITY) if length >= CUT_OFF_EXACT_BELOW else 1.0
        if start >= least:
            best = max(best, start)
    if whole >= EDIT_MIN_JACCARD:
        best = max(best, edit_similarity(sketch.words, other_words))
    if best < threshold and may_embed(length, len(other_words)) and embedded(_ints(sketch.words), _ints(other_words)):
        best = 1.0  # the Jaccard of the shorter and the words of the longer that hold it
    return best


def may_embed(length: int, other_length: int) -> bool:
    """Whether posts of ``length`` and ``other_length`` words are long
    enough, and near enough in length, for the one to copy the other
    embedded (``embedded``): the shorter has ``EMBED_MIN_WORDS`` words or
    more, and ``EMBED_MIN_SHARE`` of the longer's or more, and the longer
    ``EMBED_MAX_WORDS`` or fewer."""
    shorter, longer = min(length, other_length), max(length, other_length)
    return EMBED_MIN_WORDS <= shorter and EMBED_MIN_SHARE * longer <= shorter and longer <= EMBED_MAX_WORDS


# The rules' constants in the order the compiled best_match takes them.
_KERNEL_RULES = (
    CUT_OFF_MIN_WORDS,
    CUT_OFF_MIN_SIMILARITY,
    CUT_OFF_EXACT_BELOW,
    EDIT_MIN_WORDS,
    EDIT_MAX_EDITS,
    EDIT_MIN_JACCARD,
    EMBED_MIN_WORDS,
    EMBED_MIN_SHARE,
    EMBED_MAX_WORDS,
)


def _c_best_match(
    serials: Sequence[int],
    posts: list[CachedPost | None],
    sketch: Sketch,
    own: CachedPost,
    after: float,
    threshold: float,
    shingle_size: int,
) -> tuple[Match, int] | None:
    """``_py_best_match``, in C (``_kernel_rules.c``)."""
    answer = kernel.best_match(
        posts, own.words, sketch.shingles, after, threshold, shingle_size, sketch.cut_off, _KERNEL_RULES
    )
    if answer is None:
        return None
    index, similarity = answer
    post = posts[index]
    assert post is not None
    return Match(post.post_id, similarity), serials[index]


def _py_best_match(
    serials: Sequence[int],
    posts: list[CachedPost | None],
    sketch: Sketch,
    own: CachedPost,
    after: float,
    threshold: float,
    shingle_size: int,
) -> tuple[Match, int] | None:
    """The post ``sketch`` duplicates among the candidates (``serials`` in
    rank order, ``posts`` theirs; None for a post that is gone), with its
    serial; or None.

    Candidates at or before ``after`` (the horizon) do not count. The first
    with the sketch's very words wins at once; otherwise the most similar at
    or above the threshold, the first among equals. ``own`` is the sketch as
    a CachedPost. A comparison builds ``own``'s set, so the judge that
    records the sketch keeps it (in C, ``own.packed``; here, ``own.members``).
    """
    best: tuple[Match, int] | None = None
    for serial, post in zip(serials, posts, strict=True):
        if post is None or post.timestamp <= after:
            continue
        if post.words == own.words:  # the same words in the same order: the same set
            return Match(post.post_id, 1.0), serial
        found = _similarity(own, sketch, post, shingle_size)
        if found < threshold and (
            found >= EDIT_MIN_JACCARD or sketch.cut_off or may_embed(len(sketch.words), len(post.words) // 4)
        ):  # the rarer cases
            assert own.members is not None  # _similarity built it
            found = under_threshold(found, sketch, own.members, _word_list(post), shingle_size, threshold)
        if found >= threshold and (best is None or found > best[0].similarity):
            best = Match(post.post_id, found), serial
            if found == 1.0:
                break
    return best


best_match = chosen(_c_best_match, _py_best_match)


def referenced(
    candidates: Iterable[tuple[int, CachedPost | None]], post_id: str, after: float
) -> tuple[Match, int] | None:
    """The live post ``post_id`` among ``candidates`` ((serial, post), found
    under its id key, newest first), as a Match with its serial; None when it is not there."""
    for serial, post in candidates:
        if post is not None and post.post_id == post_id and post.timestamp > after:
            return Match(post_id, 1.0), serial
    return None
