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

import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from ._compiled import compiled_kernel
from ._config import FilterConfig
from ._exceptions import InvalidRecordError, StreamFilterError
from ._judge import run_batch
from ._lsh import id_keys
from ._normalize import normalize_fallback, words_and_cut
from ._post import VERDICT_SLOTS, RetweetPolicy, Verdict, VerdictKind
from ._prepared import ENTRY_SLOTS, NO_SHINGLES, NO_WORDS, Columns, Entry, PreparedBatch, post_fields
from ._shingle import ShingleSets
from ._sketching import BatchSketcher
from ._stats import StatsRecorder
from .adapters import NotAPost, RecordAdapter
from .stores._base import BandStore, IndexSettings, Match, Sketch

__all__ = ["Engine", "PreparedBatch", "Sketcher"]

logger = logging.getLogger("streamfilter")

_EXACT_TEXT_MARK = "\x00"
REASON_EMPTY = "empty text: nothing to compare, passed and not indexed"
REASON_KEPT_RETWEET = "retweet passed unjudged (retweet policy keep)"
REASON_TEXTLESS_REPOST = "repost without text (reposted post not in the payload): passed and not indexed"
REASON_REPOST_UNSEEN = "repost of a post not in the index (never seen, or expired): passed and not indexed"
REASON_REPOST_SEEN = "repost of a post already seen"


class Sketcher:
    """The pure half of the engine: records in, posts and sketches out, no I/O.

    It holds nothing but settings, so a worker process can run one too.
    """

    def __init__(self, config: FilterConfig, adapter: RecordAdapter) -> None:
        self.config = config
        self.adapter = adapter
        assert config.bands is not None and config.rows is not None
        self._sketcher = BatchSketcher(config.num_perm, config.seed, config.shingle_size, config.bands, config.rows)

    # -- sketching -------------------------------------------------------------
    def words(self, text: str) -> tuple[list[str], bool]:
        """The words a post is shingled from (see the module docstring for the
        empty rule), and whether its text was cut off by "…" (never for the
        exact-text fallback)."""
        words, cut_off = words_and_cut(text)
        if words:
            return words, cut_off
        fallback = normalize_fallback(text)
        return ([_EXACT_TEXT_MARK + fallback] if fallback else []), False

    def _sketch_words(self, word_lists: Sequence[Sequence[str]]) -> tuple[ShingleSets, npt.NDArray[np.uint64]]:
        """(the verification sets, with the word hashes; the band keys) of a batch."""
        return self._sketcher.sketch(*self._sketcher.words(word_lists))

    def rekey(self, word_seqs: Sequence[npt.NDArray[np.uint32]], post_ids: Sequence[str]) -> npt.NDArray[np.uint64]:
        """The band keys a stored post was filed under, its id key included,
        from its word hashes as stored."""
        offsets = np.zeros(len(word_seqs) + 1, dtype=np.int64)
        np.cumsum([len(words) for words in word_seqs], out=offsets[1:])
        words = np.concatenate(word_seqs).astype(np.uint32) if word_seqs else NO_WORDS
        _, keys = self._sketcher.sketch(words, offsets)
        return np.column_stack([keys, id_keys(post_ids, self.config.seed)])

    # -- the two stages ----------------------------------------------------------
    def prepare(self, records: Sequence[tuple[int, object]]) -> PreparedBatch:
        """Adapt and sketch a batch of (line number, record); no I/O."""
        entries, columns = self._prepare(records)
        return PreparedBatch(entries, columns.sketches())

    def prepare_wire(self, records: Sequence[tuple[int, object]]) -> tuple[Any, ...]:
        """``prepare`` as a worker process sends it back: rows of plain values
        and the flat columns (``PreparedBatch.from_wire`` rebuilds the batch).
        Raw records are left out; the receiver has them."""
        entries, columns = self._prepare(records)
        entry_rows = [
            (
                entry.line,
                entry.kind,
                entry.reason,
                entry.sketch_index,
                entry.reference,
                None if (post := entry.post) is None else post_fields(post),
                entry.deletes,
            )
            for entry in entries
        ]
        return (
            entry_rows,
            columns.rows,
            columns.key_counts,
            columns.shingle_counts,
            columns.word_counts,
            columns.keys,
            columns.shingles,
            columns.words,
        )

    def _prepare(self, records: Sequence[tuple[int, object]]) -> tuple[list[Entry], Columns]:
        # Two passes over the batch, the adapters' then the normaliser's, so
        # that each keeps its code and tables in the CPU's caches: 7-8% less
        # of a worker's time than one pass doing both for each post.
        entries, to_word = self._adapt(records)
        to_sketch: list[Entry] = []
        word_lists: list[list[str]] = []
        for entry in to_word:
            post = entry.post
            assert post is not None
            try:
                words, entry.cut_off = self.words(_without_lone_surrogates(post.text))
            except Exception as exc:  # noqa: BLE001 - no record may stop the stream; see _unreadable
                entry.kind, entry.reason = VerdictKind.INVALID, _unreadable(entry.line, exc)
                continue
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
        return entries, self._columns(to_sketch, word_lists)

    def _adapt(self, records: Sequence[tuple[int, object]]) -> tuple[list[Entry], list[Entry]]:
        """Every record's entries, in order, and those of them whose posts'
        texts are to be judged (the rest are judged already)."""
        policy = self.config.retweet_policy
        entries: list[Entry] = []
        to_word: list[Entry] = []
        for line, record in records:
            try:
                posts = self.adapter.adapt(record)
            except NotAPost as exc:
                entries.append(Entry(line, record, None, VerdictKind.SKIPPED, exc.reason, deletes=exc.deletes))
                continue
            except InvalidRecordError as exc:
                entries.append(Entry(line, record, None, VerdictKind.INVALID, exc.reason))
                continue
            except Exception as exc:  # noqa: BLE001 - no record may stop the stream; see _unreadable
                entries.append(Entry(line, record, None, VerdictKind.INVALID, _unreadable(line, exc)))
                continue
            if not posts:
                entries.append(Entry(line, record, None, VerdictKind.INVALID, "record carries no posts"))
                continue
            for post in posts:
                entry = Entry(line, record, post)
                entries.append(entry)
                bad_id = _lone_surrogate(post.id) or _lone_surrogate(post.retweet_of)
                if bad_id is not None:
                    entry.kind = VerdictKind.INVALID
                    entry.reason = f"post id holds a lone surrogate (U+{ord(bad_id):04X}), which is not Unicode text"
                    continue
                if post.is_retweet and policy is RetweetPolicy.DROP:
                    entry.kind = VerdictKind.RETWEET
                    continue
                if post.is_retweet and policy is RetweetPolicy.KEEP:
                    entry.kind, entry.reason = VerdictKind.NOVEL, REASON_KEPT_RETWEET
                    continue
                to_word.append(entry)
        return entries, to_word

    def _columns(self, to_sketch: list[Entry], word_lists: list[list[str]]) -> Columns:
        """The sketches of ``to_sketch`` (``word_lists`` holds the words of those
        that are not references), in that order, as columns."""
        now = time.time()
        seed = self.config.seed
        rows: list[tuple[str, float, bool, str | None, bool]] = []
        for index, entry in enumerate(to_sketch):
            post = entry.post
            assert post is not None
            entry.sketch_index = index
            post_id = post.id if post.id is not None else f"line:{entry.line}"
            timestamp = post.timestamp if post.timestamp is not None else now
            rows.append(
                (post_id, timestamp, post.id is None, post.retweet_of if entry.reference else None, entry.cut_off)
            )
        if word_lists:
            shingles, keys = self._sketch_words(word_lists)
            # every post is filed under its id too, for reposts that carry no text
            text_ids = [row[0] for row, entry in zip(rows, to_sketch, strict=True) if not entry.reference]
            keys = np.column_stack([keys, id_keys(text_ids, seed)])
            shingle_counts = np.diff(shingles.offsets).tolist()
            word_counts = np.diff(shingles.word_offsets).tolist()
        if len(word_lists) == len(to_sketch):  # no references: the batch's arrays as they are
            if not word_lists:
                return Columns([], [], [], [], NO_SHINGLES, NO_SHINGLES, NO_WORDS)
            key_counts = [keys.shape[1]] * len(rows)
            return Columns(rows, key_counts, shingle_counts, word_counts, keys.ravel(), shingles.hashes, shingles.words)
        # Reposts without text among them: their one key is their reposted
        # post's id key, and they have no shingles and no words.
        referenced = [entry.post.retweet_of or "" for entry in to_sketch if entry.reference and entry.post]
        reference_keys = id_keys(referenced, seed)
        key_parts: list[npt.NDArray[np.uint64]] = []
        shingle_parts: list[npt.NDArray[np.uint64]] = []
        word_parts: list[npt.NDArray[np.uint32]] = []
        text_index = reference_index = 0
        for entry in to_sketch:
            if entry.reference:
                key_parts.append(reference_keys[reference_index : reference_index + 1])
                shingle_parts.append(NO_SHINGLES)
                word_parts.append(NO_WORDS)
                reference_index += 1
            else:
                key_parts.append(keys[text_index])
                shingle_parts.append(shingles[text_index])
                word_parts.append(shingles.words_of(text_index))
                text_index += 1
        return Columns(
            rows,
            [len(part) for part in key_parts],
            [len(part) for part in shingle_parts],
            [len(part) for part in word_parts],
            np.concatenate(key_parts),
            np.concatenate(shingle_parts),
            np.concatenate(word_parts),
        )


def _unreadable(line: int, exc: Exception) -> str:
    """The reason of a record that failed in a way no check foresaw: the
    record is ``invalid`` and the stream goes on, and the log keeps the
    traceback, for it is a bug to report."""
    logger.error("streamfilter: record %d could not be read (please report this)", line, exc_info=exc)
    return f"record could not be read: {type(exc).__name__}: {str(exc)[:200]}"


def _line(number: int) -> str:
    return f"line {number}"


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


# A post this far (or a TTL, if longer) ahead of the clock is held at the
# clock's time unless the next dated post is as far ahead (see _place_in_time).
_HELD_JUMP = 86400.0


# A code point JSON can escape (\udc00) but UTF-8 cannot encode: surrogate
# pairs are joined when JSON is decoded, so one left in a string is alone.
_SURROGATE = re.compile("[\ud800-\udfff]")
_KERNEL = compiled_kernel()


def _lone_surrogate(text: str | None) -> str | None:
    """The first lone surrogate of ``text``, or None."""
    if text is None or text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.group()


def _without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so it can be hashed and stored."""
    return text if _lone_surrogate(text) is None else _SURROGATE.sub("\ufffd", text)


def _span(seconds: float) -> str:
    days = seconds / 86400
    return f"{days / 365.25:.1f} years" if days >= 365.25 else f"{days:.1f} days"


class Engine:
    """Sketcher and store, wired by one FilterConfig."""

    def __init__(self, config: FilterConfig, store: BandStore, adapter: RecordAdapter) -> None:
        self.config = config
        self.store = store
        self.adapter = adapter
        self.sketcher = Sketcher(config, adapter)
        self.prepare = self.sketcher.prepare
        # the newest event time judged, from the index's own clock when the store tells it
        self._latest = -math.inf
        self._latest_dated = -math.inf  # the same, of dated posts only (see _place_in_time)
        self._warned_behind = False
        # the last dated post was more than a TTL after the clock, and was held at it (see _place_in_time)
        self._held_jump = False
        self.stats = StatsRecorder()
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
        self._latest = float(store.clock())

    def commit(
        self,
        batch: PreparedBatch,
        *,
        progress: Mapping[str, int | str] | None = None,
        deliver: Callable[[list[Verdict]], None] | None = None,
        where: Callable[[int], str] | None = None,
        arrived: float | None = None,
    ) -> list[Verdict]:
        """Judge a prepared batch against the store in one transaction.

        ``deliver`` gets the verdicts after they are judged and before the
        transaction commits (``_judge.run_batch``); ``progress`` is recorded in it.
        ``where`` names a record number in warnings (by default "line N").
        ``arrived`` is when the batch's first record arrived (``time.monotonic``),
        for the latency in ``stats``; by default, when this call began.
        """
        began = time.monotonic() if arrived is None else arrived
        self._place_in_time(batch, where or _line)
        honour = self.config.honour_deletes and hasattr(self.store, "forget")
        parts = batch.split_after_deletes() if honour else [batch]
        verdicts: list[Verdict] = []
        for number, part in enumerate(parts, 1):
            # the progress goes with the last part: a crash between parts replays the whole batch
            verdicts += self._commit_part(part, progress if number == len(parts) else None, deliver)
            deleted = [entry.deletes for entry in part.entries if entry.deletes is not None]
            if honour and deleted:
                self.forget(deleted)
        self.stats.committed(verdicts, time.monotonic() - began)
        return verdicts

    def _commit_part(
        self,
        batch: PreparedBatch,
        progress: Mapping[str, int | str] | None,
        deliver: Callable[[list[Verdict]], None] | None,
    ) -> list[Verdict]:
        built: list[list[Verdict]] = []

        def verdicts_out(matches: list[Match | None]) -> None:
            verdicts = self._verdicts(batch, matches)
            if deliver is not None:
                deliver(verdicts)
            built.append(verdicts)

        run_batch(self.store, batch.sketches, progress=progress, deliver=verdicts_out)
        return built[-1]

    def forget(self, post_ids: Sequence[str]) -> int:
        """Remove these posts from the index: a later copy of one no longer
        matches it. Returns how many live posts were forgotten."""
        forget = getattr(self.store, "forget", None)
        if forget is None:
            raise StreamFilterError(f"{type(self.store).__name__} cannot forget posts: it has no forget()")
        # An id with a lone surrogate is no Unicode text: no such post is ever
        # indexed (it is invalid), and the id has no UTF-8 to hash (mmh3 dies
        # of one). A delete notice that names one, hostile or broken, forgets nothing.
        ids = [post_id for post_id in post_ids if _lone_surrogate(post_id) is None]
        keys = id_keys(ids, self.config.seed).tolist()
        return int(forget(list(zip(ids, keys, strict=True))))

    @property
    def newest_event_time(self) -> float | None:
        """The newest event time judged (or in the index at open); None before any."""
        return self._latest if math.isfinite(self._latest) else None

    def _place_in_time(self, batch: PreparedBatch, where: Callable[[int], str]) -> None:
        """Give undated posts the stream's time, and warn where one post
        moves the clock past every post before it, or arrives behind it, by
        more than a TTL.

        An undated post takes the newest event time among the dated posts
        judged so far, or, before any, that of the first dated post after
        it in its batch; only in a stream with no dated post yet does it keep
        the wall clock (a plain-text stream expires in wall time). Before,
        it always took the wall clock, so in a replay of old posts one
        undated line moved the clock to now and expired everything.

        The store's clock is the newest event time seen, so a post dated
        more than a TTL after every post before it expires everything
        earlier at once, and one more than a TTL behind the clock is
        recorded already expired: nothing after it can match it. A
        mis-dated line in an old replay, or posts replayed into an index
        that saw newer ones, silently stop the filtering. So one post more
        than a TTL ahead of the clock is judged and recorded at the clock's
        time; only when the next dated post is past the TTL too has the
        stream moved on, and that post moves the clock (a replay of two
        recordings months apart holds back one post). A gap of less than a
        day is no mis-dating (a quiet hour of a live stream under a short
        TTL): such a post moves the clock at once. The warnings say where."""
        ttl = self.config.ttl_seconds
        latest, dated = self._latest, self._latest_dated
        waiting: list[Sketch] = []  # undated, before the stream's first dated post
        for entry in batch.entries:
            if entry.kind is not None:
                continue
            sketch = batch.sketches[entry.sketch_index]
            if entry.post is not None and entry.post.timestamp is None:
                if math.isfinite(dated):
                    sketch.timestamp = dated
                else:
                    waiting.append(sketch)
                    continue
            else:
                ahead = sketch.timestamp - latest if ttl > 0 and math.isfinite(latest) else 0.0
                held, self._held_jump = self._held_jump, ahead > max(ttl, _HELD_JUMP) and not self._held_jump
                if self._held_jump:
                    self._warn(
                        entry,
                        where,
                        sketch.timestamp,
                        f"is {_span(ahead)} newer than every post before it, more than the TTL: it is "
                        f"judged at the stream's time ({_utc(latest)}), so that one mis-dated post does not "
                        "expire the index; if the next dated post is that far ahead too, the clock moves",
                    )
                    sketch.timestamp = latest
                for undated in waiting:
                    undated.timestamp = sketch.timestamp
                waiting.clear()
                dated = max(dated, sketch.timestamp)
            timestamp = sketch.timestamp
            if ttl > 0 and math.isfinite(latest):
                if timestamp - latest > ttl:
                    self._warn(
                        entry,
                        where,
                        timestamp,
                        f"is {_span(timestamp - latest)} newer than every post before it, more than the TTL"
                        f"{', as was the dated post before it' if held else ''}: every earlier post has "
                        "expired and matches no more",
                    )
                elif latest - timestamp > ttl and not self._warned_behind:
                    self._warned_behind = True
                    self._warn(
                        entry,
                        where,
                        timestamp,
                        f"is {_span(latest - timestamp)} older than the newest post the index "
                        "has seen, more than the TTL: it is recorded already expired, and no later post can "
                        "match it (later such posts are not reported)",
                    )
            latest = max(latest, timestamp)
        for undated in waiting:  # no dated post yet: the wall clock, as the sketcher stamped it
            latest = max(latest, undated.timestamp)
        self._latest, self._latest_dated = latest, dated

    def _warn(self, entry: Entry, where: Callable[[int], str], timestamp: float, what: str) -> None:
        post = entry.post
        when = "dated " + _utc(timestamp) if post is not None and post.timestamp is not None else "undated"
        logger.warning("streamfilter: %s (post %s, %s) %s", where(entry.line), post.id if post else None, when, what)

    def _verdicts(self, batch: PreparedBatch, matches: Sequence[Match | None]) -> list[Verdict]:
        if _KERNEL is not None:  # the loop below, compiled (_kernel_objects.c)
            return _KERNEL.verdicts_of(  # type: ignore[no-any-return]
                batch.entries,
                list(matches),
                Entry,
                ENTRY_SLOTS,
                Verdict,
                VERDICT_SLOTS,
                VerdictKind.NOVEL,
                VerdictKind.DUPLICATE,
                REASON_REPOST_UNSEEN,
                REASON_REPOST_SEEN,
            )
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
