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

import dataclasses
import logging
import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _rules
from ._config import FilterConfig
from ._exceptions import ConfigError, InvalidRecordError, StreamFilterError
from ._group import GroupCommit
from ._judge import Judgement, judge_in, run_batch
from ._lsh import PLATFORMS, id_keys, scoped_id, text_keys
from ._normalize import normalize_fallback, same_words_key, words_and_cut
from ._post import RetweetPolicy, VerdictKind
from ._prepared import NO_SHINGLES, NO_WORDS, Entries, Entry, PreparedBatch
from ._rules import CUT_OFF_EXACT_BELOW, CUT_OFF_MIN_WORDS
from ._sketching import BatchSketcher
from ._stats import StatsRecorder
from ._timeline import Timeline
from ._values import Matches, Sketches, offsets_of
from ._verdicts import Verdicts
from .adapters import NotAPost, RecordAdapter
from .stores._base import BandStore, IndexSettings

__all__ = ["Engine", "PreparedBatch", "Sketcher"]

logger = logging.getLogger("streamfilter")

_EXACT_TEXT_MARK = "\x00"
REASON_EMPTY = "empty text: nothing to compare, passed and not indexed"
REASON_KEPT_RETWEET = "retweet passed unjudged (retweet policy keep)"
REASON_TEXTLESS_REPOST = "repost without text (reposted post not in the payload): passed and not indexed"
REASON_REPOST_UNSEEN = "repost of a post not in the index (never seen, or expired): passed and not indexed"
REASON_REPOST_SEEN = "repost of a post already seen"
# A post's text keys (``_lsh.text_keys``): its exact-words key, and the keys
# of its first CUT_OFF_MIN_WORDS and CUT_OFF_EXACT_BELOW words, where a copy
# cut short by "…" finds it.
TEXT_KEY_FIRSTS = (0, CUT_OFF_MIN_WORDS, CUT_OFF_EXACT_BELOW)
# How many texts' words a sketcher keeps (``Sketcher.words``): repeats of a
# text come close together in a stream, and 1,024 catch as many as 4,096.
RECENT_TEXTS = 1024
_RECENT_TEXT_CHARS = 2000  # a post's text is shorter: 280 characters on X, 500 on Mastodon


class Sketcher:
    """The pure half of the engine: records in, posts and sketches out, no I/O.

    It holds nothing but settings, so a worker process can run one too.
    """

    def __init__(self, config: FilterConfig, adapter: RecordAdapter) -> None:
        self.config = config
        self.adapter = adapter
        if config.seed is None:
            raise ConfigError("a Sketcher needs the seed of its index: FilterConfig(seed=...), or the Engine's")
        assert config.bands is not None and config.rows is not None
        self._sketcher = BatchSketcher(config.num_perm, config.seed, config.shingle_size, config.bands, config.rows)
        # the words of the texts seen last, oldest first (``words``)
        self._recent_words: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    # -- sketching -------------------------------------------------------------
    def words(self, text: str) -> tuple[list[str], bool]:
        """The words a post is shingled from (see the module docstring for the
        empty rule), and whether its text was cut off by "…" (never for the
        exact-text fallback).

        The words of the last ``RECENT_TEXTS`` texts (of a post's length) are
        kept: the retweets of one status carry its text, and a storm of them,
        or of a copied text, repeats it thousands of times, each normalised
        once while recent. A campaign's copies that differ in their mentions
        and t.co links alone share one key (``same_words_key``)."""
        kept = len(text) <= _RECENT_TEXT_CHARS  # a flood of long texts would hold megabytes each
        key = same_words_key(text) if kept else text
        known = self._recent_words.get(key)
        if known is not None:
            return list(known[1:]), bool(known[0])
        words, cut_off = words_and_cut(text)
        if not words:  # the fallback is the text's own: kept under the text alone
            words, cut_off = self._fallback(text), False
            if key != text:
                return words, cut_off
        if kept:
            if len(self._recent_words) >= RECENT_TEXTS:
                # the oldest, in one step: threads calling check() sketch at once
                self._recent_words.popitem(last=False)
            # kept as strings alone ("1" first for a cut), which the collector does not track
            self._recent_words[key] = ("1" if cut_off else "", *words)
        return words, cut_off

    @staticmethod
    def _fallback(text: str) -> list[str]:
        """The exact-text word of a text ``normalize`` leaves nothing of, if any."""
        fallback = normalize_fallback(text)
        return [_EXACT_TEXT_MARK + fallback] if fallback else []

    def rekey(self, word_seqs: Sequence[npt.NDArray[np.uint32]]) -> npt.NDArray[np.uint64]:
        """The keys stored posts' texts filed them under (their band keys and
        the keys of their words, ``TEXT_KEY_FIRSTS``; ``IndexSettings.rekey``),
        from their word hashes as stored."""
        offsets = np.zeros(len(word_seqs) + 1, dtype=np.int64)
        np.cumsum([len(words) for words in word_seqs], out=offsets[1:])
        words = np.concatenate(word_seqs).astype(np.uint32) if word_seqs else NO_WORDS
        _, keys = self._sketcher.sketch(words, offsets)
        seed = self.config.seed
        assert seed is not None
        return np.column_stack([keys, text_keys(words, offsets, seed, TEXT_KEY_FIRSTS)])

    # -- the two stages ----------------------------------------------------------
    def prepare(self, records: Sequence[tuple[int, object]]) -> PreparedBatch:
        """Adapt and sketch a batch of (line number, record); no I/O."""
        entries, sketches = self._prepare(records)
        return PreparedBatch(Entries.of(entries), sketches)

    def prepare_wire(self, records: Sequence[tuple[int, object]]) -> tuple[Any, ...]:
        """``prepare`` as a worker process sends it back: the rows' columns
        and the sketches' (``PreparedBatch.from_wire`` rebuilds the batch).
        Raw records are left out; the receiver has them."""
        entries, sketches = self._prepare(records)
        return (Entries.wire_of(entries), *sketches.columns())

    def _prepare(self, records: Sequence[tuple[int, object]]) -> tuple[list[Entry], Sketches]:
        # Two passes over the batch, the adapters' then the normaliser's, so
        # that each keeps its code and tables in the CPU's caches (cheaper than
        # one pass doing both for each post; docs/benchmarks.md).
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
        return entries, self._sketches(to_sketch, word_lists)

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
                deletes = None if exc.deletes is None else (exc.platform, exc.deletes)
                entries.append(Entry(line, record, None, VerdictKind.SKIPPED, exc.reason, deletes=deletes))
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

    def _sketches(self, to_sketch: list[Entry], word_lists: list[list[str]]) -> Sketches:
        """The sketches of ``to_sketch`` (``word_lists`` holds the words of those
        that are not references), in that order, as columns."""
        now = time.time()
        seed = self.config.seed
        assert seed is not None
        post_ids: list[str] = []
        timestamps: list[float] = []
        refers_to: list[str | None] = []
        made_up_id: list[bool] = []
        cut_off: list[bool] = []
        for index, entry in enumerate(to_sketch):
            post = entry.post
            assert post is not None
            entry.sketch_index = index
            post_ids.append(post.id if post.id is not None else f"line:{entry.line}")
            timestamps.append(post.timestamp if post.timestamp is not None else now)
            refers_to.append(post.retweet_of if entry.reference else None)
            made_up_id.append(post.id is None)
            cut_off.append(entry.cut_off)
        if not to_sketch:
            return Sketches.empty()
        flags = (np.array(made_up_id, dtype=np.bool_), np.array(cut_off, dtype=np.bool_))
        rows = (post_ids, np.array(timestamps, dtype=np.float64), *flags, refers_to)
        if word_lists:
            # every post is filed under its words in order, and under its id,
            # for reposts that carry no text
            text_ids = [
                scoped_id(entry.post.platform, post_id)
                for post_id, entry in zip(post_ids, to_sketch, strict=True)
                if not entry.reference and entry.post is not None
            ]
            shingles, keys = self._sketcher.sketch_posts(word_lists, text_ids, TEXT_KEY_FIRSTS)
            if len(word_lists) == len(to_sketch):  # no references: the batch's arrays as they are
                key_ends = np.arange(0, keys.size + 1, keys.shape[1], dtype=np.int64)
                return Sketches(
                    *rows,
                    key_ends,
                    keys.ravel(),
                    shingles.offsets,
                    shingles.hashes,
                    shingles.word_offsets,
                    shingles.words,
                )
        # Reposts without text among them: their one key is their reposted
        # post's id key, and they have no shingles and no words.
        referenced = [
            scoped_id(entry.post.platform, entry.post.retweet_of or "")
            for entry in to_sketch
            if entry.reference and entry.post
        ]
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
        return Sketches(
            *rows,
            offsets_of(map(len, key_parts)),
            np.concatenate(key_parts),
            offsets_of(map(len, shingle_parts)),
            np.concatenate(shingle_parts),
            offsets_of(map(len, word_parts)),
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


# A code point JSON can escape (\udc00) but UTF-8 cannot encode: surrogate
# pairs are joined when JSON is decoded, so one left in a string is alone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str | None) -> str | None:
    """The first lone surrogate of ``text``, or None."""
    if text is None or text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.group()


def _without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so it can be hashed and stored."""
    return text if _lone_surrogate(text) is None else _SURROGATE.sub("\ufffd", text)


class Engine:
    """Sketcher and store, wired by one FilterConfig."""

    def __init__(
        self, config: FilterConfig, store: BandStore, adapter: RecordAdapter, *, commit_within: float = 0.0
    ) -> None:
        self.store = store
        self.adapter = adapter
        self.stats = StatsRecorder()
        pinned = store.open(
            IndexSettings(
                fingerprint=config.fingerprint(),
                jaccard_threshold=config.jaccard_threshold,
                ttl_seconds=config.ttl_seconds,
                rekey=self._rekey,
                max_candidates_per_band=config.max_candidates_per_band,
                purge_limit=config.purge_limit,
            )
        )
        if config.seed is None:  # the index's own (drawn when it was created)
            config = dataclasses.replace(config, seed=int(pinned["seed"]))
        self.config = config
        self.sketcher = Sketcher(config, adapter)
        self.prepare = self.sketcher.prepare
        # posts placed in event time from the index's own clock, when the store tells it
        self._timeline = Timeline(config.ttl_seconds, float(store.clock()), self.stats.noticed)
        # one-record calls share a transaction that commits within commit_within seconds (_group)
        grouped = commit_within > 0 and getattr(store, "holds", False)
        self._group = GroupCommit(store, commit_within) if grouped else None

    def _rekey(self, word_seqs: Sequence[npt.NDArray[np.uint32]]) -> npt.NDArray[np.uint64]:
        return self.sketcher.rekey(word_seqs)

    def commit(
        self,
        batch: PreparedBatch,
        *,
        progress: Mapping[str, int | str] | None = None,
        deliver: Callable[[Verdicts], None] | None = None,
        where: Callable[[int], str] | None = None,
        arrived: float | None = None,
        grouped: bool = False,
    ) -> Verdicts:
        """Judge a prepared batch against the store in one transaction.

        ``deliver`` gets the verdicts after they are judged and before the
        transaction commits (``_judge.run_batch``); ``progress`` is recorded in it.
        ``where`` names a record number in warnings (by default "line N").
        ``arrived`` is when the batch's first record arrived (``time.monotonic``),
        for the latency in ``stats``; by default, when this call began.
        ``grouped``: judged in the group of the sync API's one-record calls
        (``_group``), which commits within ``commit_within`` seconds; a batch
        with progress or deletes, or a store without groups, commits on its
        own, after the open group.
        """
        began = time.monotonic() if arrived is None else arrived
        grouped = grouped and self._group is not None and progress is None
        grouped = grouped and not any(batch.entries.deletes)  # a delete notice is a (platform, id)
        if not grouped:
            self.flush()
        self._place_in_time(batch, where or _line)
        if grouped and batch.sketches:
            verdicts = self._judged_in_group(batch)
            if deliver is not None:
                deliver(verdicts)
        else:
            verdicts = self._judged_in_parts(batch, progress, deliver)
        self.stats.committed(verdicts.counts(), time.monotonic() - began)
        return verdicts

    def _judged_in_group(self, batch: PreparedBatch) -> Verdicts:
        """The batch judged in the open group of one-record calls (``_group``),
        a group with no delete notice: durable when the group commits."""
        assert self._group is not None
        sketches, noticed = batch.sketches, self._noticed
        return self._verdicts(batch, self._group.judge(lambda txn: judge_in(txn, sketches, noticed)))

    def _judged_in_parts(
        self,
        batch: PreparedBatch,
        progress: Mapping[str, int | str] | None,
        deliver: Callable[[Verdicts], None] | None,
    ) -> Verdicts:
        """The batch judged in a transaction of its own, cut after each delete
        notice it holds (``split_after_deletes``), which is honoured there."""
        honour = self.config.honour_deletes
        parts = batch.split_after_deletes() if honour else [batch]
        judged: list[Verdicts] = []
        for number, part in enumerate(parts, 1):
            # the progress goes with the last part: a crash between parts replays the whole batch
            judged.append(self._commit_part(part, progress if number == len(parts) else None, deliver))
            deleted = [deletes for deletes in part.entries.deletes if deletes is not None]
            if honour and deleted:
                self._honour(deleted)
        return Verdicts.joined(batch.entries, judged)

    def _commit_part(
        self,
        batch: PreparedBatch,
        progress: Mapping[str, int | str] | None,
        deliver: Callable[[Verdicts], None] | None,
    ) -> Verdicts:
        built: list[Verdicts] = []

        def verdicts_out(matches: Matches) -> None:
            verdicts = self._verdicts(batch, matches)
            if deliver is not None:
                deliver(verdicts)
            built.append(verdicts)

        # (a batch with nothing to judge and no progress touches no store)
        run_batch(self.store, batch.sketches, progress=progress, deliver=verdicts_out, judged=self._noticed)
        return built[-1]

    def flush(self) -> None:
        """Commit the open group of one-record calls, if any (``commit(grouped=True)``)."""
        if self._group is not None:
            self._group.flush()

    def _noticed(self, judgement: Judgement) -> None:
        """A committed batch's attack signals (``_stats.ATTACK_SIGNALS``)."""
        if judgement.capped or judgement.full_buckets:
            self.stats.noticed(verification_capped=judgement.capped, full_buckets=judgement.full_buckets)

    def forget(self, post_ids: Sequence[str], platform: str | None = None) -> int:
        """Remove these posts of ``platform`` (``Post.platform``'s names;
        None: of any platform) from the index: a later copy of one no longer
        matches it. Returns how many live posts were forgotten."""
        forget = getattr(self.store, "forget", None)
        if forget is None:
            raise StreamFilterError(f"{type(self.store).__name__} cannot forget posts: it has no forget()")
        if platform is not None and platform not in PLATFORMS:
            raise ConfigError(f"platform must be one of {', '.join(PLATFORMS)} (or None for any), got {platform!r}")
        # An id with a lone surrogate is no Unicode text: no such post is ever
        # indexed (it is invalid), and the id has no UTF-8 to hash (mmh3 dies
        # of one). A delete notice that names one, hostile or broken, forgets nothing.
        ids = [post_id for post_id in post_ids if _lone_surrogate(post_id) is None]
        self.flush()
        platforms = PLATFORMS if platform is None else (platform,)
        pairs = [(post_id, scoped_id(name, post_id)) for name in platforms for post_id in ids]
        keys = id_keys([scoped for _, scoped in pairs], self.config.seed or 0).tolist()
        return int(forget([(post_id, key) for (post_id, _), key in zip(pairs, keys, strict=True)]))

    def _honour(self, deletes: Sequence[tuple[str, str]]) -> None:
        """Forget the posts that delete notices ((platform, id)) name, each
        in its own platform; count those that name no post of their own
        platform but one of another's (``stats``: ignored as cross-platform)."""
        by_platform: dict[str, list[str]] = {}
        for platform, post_id in deletes:
            by_platform.setdefault(platform, []).append(post_id)
        for platform, post_ids in by_platform.items():
            if self.forget(post_ids, platform) < len(post_ids):
                others = [name for name in PLATFORMS if name != platform]
                self.stats.noticed(cross_platform_deletes=self._live_elsewhere(post_ids, others))

    def _live_elsewhere(self, post_ids: Sequence[str], platforms: Sequence[str]) -> int:
        """How many of ``post_ids`` name a live post of one of ``platforms``:
        read in an index transaction given up at once, which changes nothing."""
        ids = [post_id for post_id in post_ids if _lone_surrogate(post_id) is None]
        if not ids:
            return 0
        scoped = [scoped_id(name, post_id) for post_id in ids for name in platforms]
        txn = self.store.begin()
        try:
            queries = np.unique(txn.index_keys(id_keys(scoped, self.config.seed or 0)))
            _, serials = txn.members(queries)
            horizon = _rules.horizon(txn.clock, self.config.ttl_seconds)
            wanted = set(ids)
            found = {
                post.post_id
                for serial in serials.tolist()
                if (post := txn.post(serial)) is not None and post.post_id in wanted and post.timestamp > horizon
            }
        finally:
            txn.abort()
        return len(found)

    @property
    def newest_event_time(self) -> float | None:
        """The newest event time judged (or in the index at open); None before any."""
        latest = self._timeline.latest
        return latest if math.isfinite(latest) else None

    def _place_in_time(self, batch: PreparedBatch, where: Callable[[int], str]) -> None:
        """Place each post of the batch in event time (``_timeline.Timeline``)."""
        entries = batch.entries
        # the rows to judge are the rows sketched, and the sketcher numbers them in order
        judged = [at for at, kind in enumerate(entries.kinds) if kind is None]
        assert len(judged) == len(batch.sketches)
        self._timeline.place(entries, judged, batch.sketches.timestamps, where)

    def _verdicts(self, batch: PreparedBatch, matches: Matches) -> Verdicts:
        """The batch's verdicts: its rows decided without the store as they
        were, the rest by their matches."""
        entries = batch.entries
        count = len(entries)
        kinds: list[VerdictKind] = list(entries.kinds)  # type: ignore[arg-type]  # the None are judged below
        reasons = list(entries.reasons)
        duplicate_of: list[str | None] = [None] * count
        similarity: list[float | None] = [None] * count
        record_ids: dict[int, str] = {}
        for at, (kind, index, reference) in enumerate(
            zip(entries.kinds, entries.sketch_index, entries.reference, strict=True)
        ):
            if kind is not None:
                if kind is VerdictKind.INVALID:  # the id an invalid record's verdict line names
                    record_id = self.adapter.readable_id(entries.raws[at])
                    if record_id is not None:
                        record_ids[at] = record_id
                continue
            original = matches.duplicate_of[index]
            if original is None:
                kinds[at] = VerdictKind.NOVEL
                reasons[at] = REASON_REPOST_UNSEEN if reference else None
            else:
                kinds[at] = VerdictKind.DUPLICATE
                reasons[at] = REASON_REPOST_SEEN if reference else None
                duplicate_of[at], similarity[at] = original, matches.similarity[index]
        return Verdicts(entries, kinds, reasons, duplicate_of, similarity, record_ids)

    def judge(self, records: Sequence[tuple[int, object]]) -> Verdicts:
        return self.commit(self.prepare(records))

    def close(self) -> None:
        try:
            if self._group is not None:
                self._group.close()
        finally:
            self.store.close()
