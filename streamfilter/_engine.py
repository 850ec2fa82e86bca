"""The synchronous core that every API wraps: records in, verdicts out.

``prepare`` is pure CPU work (adapt, normalise, shingle, MinHash, band keys)
and touches no store; ``commit`` makes the one store call per batch. The
async pipeline runs them as two stages; the sync API calls them back to back.

Posts that are empty after normalising (emoji-only, URL-only) are judged on
their exact text instead: the text with only entities, case, Unicode forms and
whitespace folded becomes a single shingle, so identical emoji-only posts are
duplicates and any difference makes them novel. A post whose text is empty
even then cannot be compared: it passes as novel and is not indexed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._config import FilterConfig
from ._exceptions import InvalidRecordError
from ._lsh import band_keys, id_keys
from ._minhash import MinHasher
from ._normalize import normalize_fallback, normalize_words
from ._post import Post, RetweetPolicy, Verdict, VerdictKind
from ._shingle import ShingleSets, hash_words, shingles_of_words, verification_hashes
from .adapters import NotAPost, RecordAdapter
from .stores import BandStore, IndexSettings, Match, Sketch

__all__ = ["Engine", "PreparedBatch", "Sketcher"]

_EXACT_TEXT_MARK = "\x00"
REASON_EMPTY = "empty text: nothing to compare, passed and not indexed"
REASON_KEPT_RETWEET = "retweet passed unjudged (retweet policy keep)"
REASON_TEXTLESS_REPOST = "repost without text (reposted post not in the payload): passed and not indexed"
REASON_REPOST_UNSEEN = "repost of a post not in the index (never seen, or expired): passed and not indexed"
REASON_REPOST_SEEN = "repost of a post already seen"
_NO_SHINGLES = np.zeros(0, dtype=np.uint64)
_NO_WORDS = np.zeros(0, dtype=np.uint32)


@dataclass(slots=True)
class _Entry:
    line: int
    raw: object
    post: Post | None
    kind: VerdictKind | None = None  # set when decided without the store
    reason: str | None = None
    sketch_index: int = -1
    reference: bool = False  # a repost without text, judged by the post it reposts


@dataclass(slots=True)
class PreparedBatch:
    entries: list[_Entry]
    sketches: list[Sketch]

    @property
    def last_line(self) -> int:
        return self.entries[-1].line if self.entries else 0

    def to_wire(self) -> tuple[Any, ...]:
        """The batch as rows of plain values and two flat arrays, for a worker
        process to send back: pickling these costs a fraction of pickling the
        objects. Raw records are left out; the receiver has them."""
        entry_rows = [
            (
                entry.line,
                entry.kind,
                entry.reason,
                entry.sketch_index,
                entry.reference,
                None if (post := entry.post) is None else _post_fields(post),
            )
            for entry in self.entries
        ]
        sketches = self.sketches
        sketch_rows = [(s.post_id, s.timestamp, s.made_up_id, s.refers_to) for s in sketches]
        key_counts = [len(s.band_keys) for s in sketches]
        shingle_counts = [len(s.shingles) for s in sketches]
        word_counts = [len(s.words) for s in sketches]
        keys = np.concatenate([s.band_keys for s in sketches]) if sketches else _NO_SHINGLES
        shingles = np.concatenate([s.shingles for s in sketches]) if sketches else _NO_SHINGLES
        words = np.concatenate([s.words for s in sketches]) if sketches else _NO_WORDS
        return entry_rows, sketch_rows, key_counts, shingle_counts, word_counts, keys, shingles, words

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...], records: Sequence[tuple[int, object]]) -> PreparedBatch:
        """The batch ``to_wire`` sent, its raw records put back from ``records``."""
        entry_rows, sketch_rows, key_counts, shingle_counts, word_counts, keys, shingles, words = wire
        raw_of = dict(records)
        entries = []
        for line, kind, reason, sketch_index, reference, fields in entry_rows:
            raw = raw_of[line]
            post = None
            if fields is not None:
                post_id, text, timestamp, retweet_of, is_retweet, platform = fields
                post = Post(post_id, text, timestamp, retweet_of, is_retweet, platform, raw)
            entries.append(_Entry(line, raw, post, kind, reason, sketch_index, reference))
        key_ends = np.cumsum(key_counts).tolist()
        shingle_ends = np.cumsum(shingle_counts).tolist()
        word_ends = np.cumsum(word_counts).tolist()
        sketches = [
            Sketch(
                post_id=post_id,
                timestamp=timestamp,
                band_keys=keys[key_end - key_count : key_end],
                shingles=shingles[shingle_end - shingle_count : shingle_end],
                words=words[word_end - word_count : word_end],
                made_up_id=made_up_id,
                refers_to=refers_to,
            )
            for (
                (post_id, timestamp, made_up_id, refers_to),
                key_count,
                key_end,
                shingle_count,
                shingle_end,
                word_count,
                word_end,
            ) in zip(
                sketch_rows, key_counts, key_ends, shingle_counts, shingle_ends, word_counts, word_ends, strict=True
            )
        ]
        return cls(entries, sketches)


def _post_fields(post: Post) -> tuple[Any, ...]:
    return (post.id, post.text, post.timestamp, post.retweet_of, post.is_retweet, post.platform)


class Sketcher:
    """The pure half of the engine: records in, posts and sketches out, no I/O.

    It holds nothing but settings, so a worker process can run one too.
    """

    def __init__(self, config: FilterConfig, adapter: RecordAdapter) -> None:
        self.config = config
        self.adapter = adapter
        self._minhasher = MinHasher(config.num_perm, config.seed)

    # -- sketching -------------------------------------------------------------
    def words(self, text: str) -> list[str]:
        """The words a post is shingled from (see the module docstring for the empty rule)."""
        words = normalize_words(text)
        if words:
            return words
        fallback = normalize_fallback(text)
        return [_EXACT_TEXT_MARK + fallback] if fallback else []

    def _sketch_words(self, word_lists: Sequence[Sequence[str]]) -> tuple[ShingleSets, npt.NDArray[np.uint64]]:
        """(the verification sets, with the word hashes; the band keys) of a batch."""
        config = self.config
        assert config.bands is not None and config.rows is not None
        words, word_offsets = hash_words(word_lists, config.seed)
        signatures = self._minhasher.signatures(shingles_of_words(words, word_offsets, config.shingle_size))
        verified = verification_hashes(words, word_offsets, config.shingle_size)
        return verified, band_keys(signatures, config.bands, config.rows)

    def rekey(self, word_seqs: Sequence[npt.NDArray[np.uint32]], post_ids: Sequence[str]) -> npt.NDArray[np.uint64]:
        """The band keys a stored post was filed under, its id key included,
        from its word hashes as stored."""
        config = self.config
        assert config.bands is not None and config.rows is not None
        offsets = np.zeros(len(word_seqs) + 1, dtype=np.int64)
        np.cumsum([len(words) for words in word_seqs], out=offsets[1:])
        words = np.concatenate(word_seqs).astype(np.uint32) if word_seqs else _NO_WORDS
        signatures = self._minhasher.signatures(shingles_of_words(words, offsets, config.shingle_size))
        return np.column_stack([band_keys(signatures, config.bands, config.rows), id_keys(post_ids, config.seed)])

    # -- the two stages ----------------------------------------------------------
    def prepare(self, records: Sequence[tuple[int, object]]) -> PreparedBatch:
        """Adapt and sketch a batch of (line number, record); no I/O."""
        policy = self.config.retweet_policy
        entries: list[_Entry] = []
        to_sketch: list[_Entry] = []
        word_lists: list[list[str]] = []
        for line, record in records:
            try:
                posts = self.adapter.adapt(record)
            except NotAPost as exc:
                entries.append(_Entry(line, record, None, VerdictKind.SKIPPED, exc.reason))
                continue
            except InvalidRecordError as exc:
                entries.append(_Entry(line, record, None, VerdictKind.INVALID, exc.reason))
                continue
            if not posts:
                entries.append(_Entry(line, record, None, VerdictKind.INVALID, "record carries no posts"))
                continue
            for post in posts:
                entry = _Entry(line, record, post)
                entries.append(entry)
                if post.is_retweet and policy is RetweetPolicy.DROP:
                    entry.kind = VerdictKind.RETWEET
                    continue
                if post.is_retweet and policy is RetweetPolicy.KEEP:
                    entry.kind, entry.reason = VerdictKind.NOVEL, REASON_KEPT_RETWEET
                    continue
                words = self.words(post.text)
                if not words:
                    if post.is_retweet and post.retweet_of is not None:
                        entry.reference = True  # judged by the post it reposts, in the store
                        to_sketch.append(entry)
                        continue
                    entry.kind = VerdictKind.NOVEL
                    entry.reason = REASON_TEXTLESS_REPOST if post.is_retweet else REASON_EMPTY
                    continue
                to_sketch.append(entry)
                word_lists.append(words)
        sketches: list[Sketch] = []
        if to_sketch:
            now = time.time()
            seed = self.config.seed
            ids = [
                entry.post.id if entry.post and entry.post.id is not None else f"line:{entry.line}"
                for entry in to_sketch
            ]
            texts = [index for index, entry in enumerate(to_sketch) if not entry.reference]
            if texts:
                shingles, keys = self._sketch_words(word_lists)
                # every post is filed under its id too, for reposts that carry no text
                keys = np.column_stack([keys, id_keys([ids[index] for index in texts], seed)])
            referenced = [entry.post.retweet_of or "" for entry in to_sketch if entry.reference and entry.post]
            reference_keys = id_keys(referenced, seed) if referenced else None
            text_index = reference_index = 0
            for index, entry in enumerate(to_sketch):
                post = entry.post
                assert post is not None
                entry.sketch_index = index
                timestamp = post.timestamp if post.timestamp is not None else now
                if entry.reference:
                    assert reference_keys is not None
                    sketch = Sketch(
                        post_id=ids[index],
                        made_up_id=post.id is None,
                        timestamp=timestamp,
                        band_keys=reference_keys[reference_index : reference_index + 1],
                        shingles=_NO_SHINGLES,
                        words=_NO_WORDS,
                        refers_to=post.retweet_of,
                    )
                    reference_index += 1
                else:
                    sketch = Sketch(
                        post_id=ids[index],
                        made_up_id=post.id is None,
                        timestamp=timestamp,
                        band_keys=keys[text_index],
                        shingles=shingles[text_index],
                        words=shingles.words_of(text_index),
                    )
                    text_index += 1
                sketches.append(sketch)
        return PreparedBatch(entries, sketches)


class Engine:
    """Sketcher and store, wired by one FilterConfig."""

    def __init__(self, config: FilterConfig, store: BandStore, adapter: RecordAdapter) -> None:
        self.config = config
        self.store = store
        self.adapter = adapter
        self.sketcher = Sketcher(config, adapter)
        self.prepare = self.sketcher.prepare
        store.open(
            IndexSettings(
                fingerprint=config.fingerprint(),
                jaccard_threshold=config.jaccard_threshold,
                ttl_seconds=config.ttl_seconds,
                rekey=self.sketcher.rekey,
                max_candidates_per_band=config.max_candidates_per_band,
                purge_limit=config.purge_limit,
            )
        )

    def commit(
        self,
        batch: PreparedBatch,
        *,
        progress: Mapping[str, int] | None = None,
        before_commit: Callable[[list[Verdict]], None] | None = None,
    ) -> list[Verdict]:
        """Judge a prepared batch against the store in one transaction.

        ``before_commit`` gets the verdicts inside that transaction, before it
        commits (see BandStore.check_and_insert); ``progress`` is recorded in it.
        """
        built: list[list[Verdict]] = []

        def deliver(matches: list[Match | None]) -> None:
            verdicts = self._verdicts(batch, matches)
            if before_commit is not None:
                before_commit(verdicts)
            built.append(verdicts)

        if batch.sketches or progress or before_commit is not None:
            self.store.check_and_insert(batch.sketches, progress=progress, before_commit=deliver)
        else:
            deliver([])
        return built[-1]

    def _verdicts(self, batch: PreparedBatch, matches: Sequence[Match | None]) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for entry in batch.entries:
            if entry.kind is not None:
                verdicts.append(Verdict(entry.kind, entry.line, entry.post, reason=entry.reason, raw=entry.raw))
                continue
            match = matches[entry.sketch_index]
            if match is None:
                reason = REASON_REPOST_UNSEEN if entry.reference else None
                verdicts.append(Verdict(VerdictKind.NOVEL, entry.line, entry.post, reason=reason, raw=entry.raw))
            else:
                verdicts.append(
                    Verdict(
                        VerdictKind.DUPLICATE,
                        entry.line,
                        entry.post,
                        duplicate_of=match.duplicate_of,
                        similarity=match.similarity,
                        reason=REASON_REPOST_SEEN if entry.reference else None,
                        raw=entry.raw,
                    )
                )
        return verdicts

    def judge(self, records: Sequence[tuple[int, object]]) -> list[Verdict]:
        return self.commit(self.prepare(records))

    def close(self) -> None:
        self.store.close()
