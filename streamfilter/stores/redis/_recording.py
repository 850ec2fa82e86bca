"""Recording a judged batch on a Redis Cluster: claim, file, recheck, pin and drop.

See ``_store`` for the protocol and what it guarantees. Every duplicate pins
the record it matched, and every post that the recheck would drop pins the
post it defers to, before any drop. A worker drops its own post only if
nobody pinned it, atomically on its record, so a verdict never names a post
that did not pass. A duplicate whose match was dropped first is judged again.
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING

import numpy as np

from ... import _rules
from ..._rules import Match
from ..._shingle import verification_set
from ..._values import Matches, Sketches
from .._base import is_same_post, key_bytes
from .._records import encode_record
from ._layout import MEMBER_BYTES
from ._scripts import script
from ._transaction import _decode_record, slice_life_ms, text_hash

if TYPE_CHECKING:
    from ..._values import Judgement
    from ._transaction import RedisTransaction

__all__ = ["FILING_LEASE", "ClusterRecording"]

# Seconds a batch's filing counts as under way, at least (``_file``): past
# it, the worker is taken for dead. Four times the store's retry_for when
# that is longer, since a filing may wait that long for a node.
FILING_LEASE = 600.0


class ClusterRecording:
    """One judged batch, recorded on a Cluster (``run``)."""

    def __init__(self, txn: RedisTransaction, sketches: Sketches, judgement: Judgement) -> None:
        self.txn = txn
        self.store = txn._store
        self.layout = txn.layout
        self.settings = txn.settings
        self.sketches = sketches
        self.judgement = judgement
        self.results = Matches(list(judgement.matches.duplicate_of), list(judgement.matches.similarity))
        self.texts = [text_hash(sketch.shingles) for sketch in sketches]
        self.slices = [self.layout.slice_of(sketch.timestamp) for sketch in sketches]
        self.parts: dict[int, int] = {}  # claimed post -> the part of its slice it is recorded in
        self.record_keys: dict[int, bytes] = {}  # recorded post -> its record key
        self.claim_keys: dict[int, bytes] = {}
        self.members: dict[int, bytes] = {}  # recorded post -> its member
        # duplicate -> (record key, member) of the post it names; for a post of
        # this batch, filled in once it has a member
        self.matched: dict[int, tuple[bytes, bytes] | int] = {}
        for index, serial in judgement.matched.items():
            offset = serial - judgement.first_serial
            if offset < 0:
                key, member, _ = txn.record_key_of(serial)
                self.matched[index] = (key, member)
            else:
                self.matched[index] = judgement.recorded[offset]
        self.claimed: list[int] = []  # posts whose claim this batch took
        # duplicates of a post of this batch that lost its claim (another worker
        # holds its text): they name a post that will not pass, so are judged again
        self.stale: list[int] = []

    def run(self) -> Matches:
        store = self.store
        lives = self._claim()
        # Bands go in before the output is written, to keep the window in
        # which a near-duplicate on another worker misses them short.
        alone = self._file(lives)
        wants_drop = {} if alone else self._recheck()
        named: dict[int, tuple[bytes, bytes]] = {}
        for index, target in self.matched.items():
            if isinstance(target, int):  # a post of this batch: named only if it was recorded
                if target not in self.members:
                    self.stale.append(index)
                    continue
                target = (self.record_keys[target], self.members[target])
            named[index] = target
        targets = list(dict.fromkeys([*named.values(), *(other for other, _ in wants_drop.values())]))
        there: dict[tuple[bytes, bytes], bool] = {}
        if targets:
            pinned = store._on_nodes("pin posts", script("pin"), [key for key, _ in targets], lambda n: [targets[n][1]])
            there = {target: bool(p) for target, p in zip(targets, pinned, strict=True)}
        droppable = [index for index, (other, _) in wants_drop.items() if there.get(other)]
        if droppable:
            kept = store._on_nodes(
                "drop posts",
                script("drop"),
                [self.record_keys[i] for i in droppable],
                lambda n: [self.members[droppable[n]], self.claim_keys[droppable[n]], self.texts[droppable[n]]],
            )
            for index, pinned_by_others in zip(droppable, kept, strict=True):
                if not pinned_by_others:
                    self.results[index] = wants_drop[index][1]
        again = [index for index, target in named.items() if not there.get(target)] + self.stale
        if again and self.txn._depth < 3:
            retried = store._judge_again(self.sketches.take(again), self.txn._depth + 1)
            for index, result in zip(again, retried, strict=True):
                self.results[index] = result
        elif again:
            # Their matches kept vanishing: pass them (unindexed) rather than
            # name a post that did not pass. A repeat, never a loss.
            for index in again:
                self.results[index] = None
        self._advance_clock()
        return self.results

    def _claim(self) -> dict[int, int]:
        """Claim the texts of the novel posts worth recording; their slices' Redis TTLs in ms."""
        store, settings, sketches, judgement = self.store, self.settings, self.sketches, self.judgement
        ttl, threshold = settings.ttl_seconds, settings.jaccard_threshold
        clock = self.txn.clock
        horizons: dict[int, float] = {}
        recorded = set(judgement.recorded)
        for index, sketch in enumerate(sketches):
            clock = max(clock, sketch.timestamp)
            if index in recorded:
                horizons[index] = max(_rules.horizon(clock, ttl), -1e300)
        lives = {i: slice_life_ms(self.layout, self.slices[i], judgement.clock, ttl) for i in judgement.recorded}
        claims = [
            (index, post)
            for index, post in zip(judgement.recorded, judgement.posts, strict=True)
            if lives[index] >= 0
            and post.timestamp > _rules.horizon(judgement.clock, ttl)
            and not self.txn.stored_already(sketches[index])
        ]
        if not claims:
            return lives
        posts: dict[int, int] = {}  # slice -> how many posts this batch claims in it
        for index, _ in claims:
            posts[self.slices[index]] = posts.get(self.slices[index], 0) + 1
        parts = store._parts_for(posts, len(sketches[claims[0][0]].band_keys))
        self.txn.parts.update(parts.values())
        # counters for the batch's recorded posts, in order, after every one recorded before
        last = int(store._retrying("take serials", lambda: store._client.incrby(store._serial_key, len(claims))))
        prefix = store._prefix_bytes
        for n, (index, _) in enumerate(claims):
            part, bits = parts[self.slices[index]]
            bucket = self.layout.record_bucket(self.texts[index], bits)
            self.parts[index] = part
            self.members[index] = self.layout.member(last - len(claims) + 1 + n, self.texts[index])
            self.record_keys[index] = self.layout.record_key(prefix, part, bucket)
            self.claim_keys[index] = self.layout.claim_key(prefix, part, bucket)
        holders = store._on_nodes(
            "claim texts",
            script("claim"),
            [self.claim_keys[index] for index, _ in claims],
            lambda n: [
                self.record_keys[claims[n][0]],
                self.texts[claims[n][0]],
                self.members[claims[n][0]],
                encode_record(claims[n][1].timestamp, claims[n][1].post_id, claims[n][1].words),
                repr(horizons[claims[n][0]]),
                lives[claims[n][0]],
                "1" if sketches[claims[n][0]].made_up_id else "0",
            ],
        )
        lost: dict[int, str] = {}  # a post of this batch that lost its claim -> its id
        for (index, _), holder in zip(claims, holders, strict=True):
            if holder is None:
                self.claimed.append(index)
                continue
            # Another worker recorded the same normalised text first.
            del self.members[index]
            member, record = holder[:MEMBER_BYTES], holder[MEMBER_BYTES:]
            _, post_id, words = _decode_record(record)
            similarity = _rules.similarity_to_words(sketches[index], words.tolist(), settings.shingle_size, threshold)
            if similarity >= threshold:
                self.results[index] = Match(post_id, similarity)
                self.matched[index] = (self.record_keys[index], member)
                lost[index] = sketches[index].post_id
        # A later post of this batch may have matched the loser: its verdict
        # would name a post that never passes (``run`` judges it again).
        for index, target in list(self.matched.items()):
            if isinstance(target, int) and target in lost:
                del self.matched[index]
                self.stale.append(index)
        return lives

    def _file(self, lives: dict[int, int]) -> bool:
        """File the claimed posts' band entries, one write a band bucket;
        whether no other batch filed while this one read, judged and filed.

        Every batch counts in ``{prefix}:filing`` (``filing.lua``) that it
        began filing, and holds a lease there until it ends. Alone, a batch
        need not recheck: a batch that ended before this one read is in what
        it read, and one that begins after this one ended files after it, so
        its own recheck finds this one's posts first under every key they
        share, and defers. A count lost to a retry only makes batches
        recheck; the lease of a worker that died runs out (``FILING_LEASE``).
        """
        if not self.claimed:
            return False
        store = self.store
        filing, token = [store._filing_key], secrets.token_hex(8)
        lease = round(1000 * max(FILING_LEASE, 4 * store.retry_for))
        began, under_way = self.txn.filing
        began_now, _ = store._retrying(
            "count a filing", lambda: store._filing(keys=filing, args=["begin", token, lease])
        )
        alone = under_way == 0 and began_now == began + 1  # none filing when this one read, nor since
        keys, entries, life = self._entries_by_bucket(lives)
        store._on_nodes("file band entries", script("append"), keys, lambda n: [life[n], entries[n]])
        began_now, _ = store._retrying("count a filing", lambda: store._filing(keys=filing, args=["end", token]))
        return alone and began_now == began + 1

    def _entries_by_bucket(self, lives: dict[int, int]) -> tuple[list[bytes], list[bytes], list[int]]:
        """The claimed posts' band entries as each band bucket gets them: its
        key, its new entries end to end (in the order of the batch, then of
        the post's bands, as members rise through a bucket), and its slice's
        Redis TTL. An entry is a band key's field (``Layout.fields``), then
        the post's member."""
        claimed, sketches, parts, layout = self.claimed, self.sketches, self.parts, self.layout
        band_keys = np.concatenate([sketches[index].band_keys for index in claimed])
        post_of = np.repeat(np.arange(len(claimed)), [len(sketches[index].band_keys) for index in claimed])
        part = np.array([parts[index] for index in claimed], dtype=np.int64)[post_of]
        bits = np.array([self.txn.parts[parts[index]] for index in claimed], dtype=np.uint64)[post_of]
        bucket = layout.buckets(band_keys, bits).astype(np.int64)
        entries = np.empty((len(band_keys), 4 + MEMBER_BYTES), dtype=np.uint8)
        entries[:, :4] = layout.fields(band_keys).view(np.uint8).reshape(-1, 4)
        members = b"".join(self.members[index] for index in claimed)
        entries[:, 4:] = np.frombuffer(members, dtype=np.uint8).reshape(-1, MEMBER_BYTES)[post_of]
        order = np.lexsort((bucket, part))  # stable: a bucket's entries keep their order
        part, bucket, post_of = part[order], bucket[order], post_of[order]
        packed = entries[order].tobytes()
        starts = np.flatnonzero(np.concatenate(([True], (part[1:] != part[:-1]) | (bucket[1:] != bucket[:-1]))))
        ends = [*starts[1:].tolist(), len(order)]
        width, prefix, band_key = 4 + MEMBER_BYTES, self.store._prefix_bytes, layout.band_key
        firsts = zip(part[starts].tolist(), bucket[starts].tolist(), strict=True)
        keys = [band_key(prefix, part_, bucket_) for part_, bucket_ in firsts]
        values = [packed[start * width : end * width] for start, end in zip(starts.tolist(), ends, strict=True)]
        # a bucket is in one part, so in one slice: any of its posts' lives is its own
        life = [lives[claimed[post]] for post in post_of[starts].tolist()]
        return keys, values, life

    def _advance_clock(self) -> None:
        """Raise the clock, and drop the slices it leaves behind."""
        store = self.store
        clock = self.judgement.clock
        if not math.isfinite(clock):
            return
        store._retrying("raise the clock", lambda: store._raise_clock(keys=[store._clock_key], args=[repr(clock)]))
        store._drop_dead(store._parts(), clock)

    def _recheck(self) -> dict[int, tuple[tuple[bytes, bytes], Match]]:
        """The claimed posts that defer to a near-duplicate recorded meanwhile
        by another worker, each with that post's (record key, member) and Match.

        Each claimed post reads its band keys again, now that its own entries
        are in. A post recorded meanwhile (not under the key when the batch
        read it: one that was is a candidate the rules ranked, verified or
        left out) that matches it is concurrent: of the two, the one that came
        second under the smallest band key they share defers. Both posts look
        at the same key, whose order never changes, so at most one of them
        defers; and the later of the two to append finds the other there, so
        one of them does.
        """
        if not self.claimed:
            return {}
        store, settings, txn = self.store, self.settings, self.txn
        ttl = settings.ttl_seconds
        horizon = _rules.horizon(self.judgement.clock, ttl)
        band_keys = list(dict.fromkeys(key for i in self.claimed for key in key_bytes(self.sketches[i].band_keys)))
        keys_array = np.frombuffer(b"".join(band_keys), dtype=">u8").astype(np.uint64)
        txn.parts = store._parts()  # with the parts this batch and others began since it read
        found, part_of = txn.read_bands(keys_array)
        members = dict(zip(band_keys, found, strict=True))
        own = {self.members[i] for i in self.claimed}
        wanted = {m: part_of[m] for listed in found for m in listed if m not in own}
        stored: dict[bytes, tuple[float, str, set[int], list[int], bytes]] = {}
        for member, (key, record) in txn.records(wanted).items():
            timestamp, post_id, word_view = _decode_record(record)
            word_list = word_view.tolist()
            verified = verification_set(word_list, settings.shingle_size)
            stored[member] = (timestamp, post_id, verified, word_list, key)
        wants_drop: dict[int, tuple[tuple[bytes, bytes], Match]] = {}
        seen = txn.seen()
        for index in self.claimed:
            sketch, member = self.sketches[index], self.members[index]
            own_keys = key_bytes(sketch.band_keys)
            query = set(sketch.shingles.tolist())
            concurrent = (
                other
                for key in own_keys
                for other in members.get(key, ())
                if other not in seen.get(key, ())  # recorded since the batch read this key
            )
            for other in concurrent:
                entry = stored.get(other)
                if entry is None:
                    continue
                timestamp, post_id, verified, other_words, record_key = entry
                if timestamp <= horizon or is_same_post(sketch, post_id, timestamp):
                    continue
                similarity = _rules.judged_similarity(
                    sketch, query, verified, other_words, settings.shingle_size, settings.jaccard_threshold
                )
                if similarity < settings.jaccard_threshold:
                    continue
                # the smallest band key they share, from the other's stored words:
                # not from the lists read, which may not show all of its keys yet
                theirs = key_bytes(settings.rekey([np.array(other_words, dtype=np.uint32)])[0])
                arbiter = min(set(own_keys).intersection(theirs), default=None)
                order = members.get(arbiter, []) if arbiter is not None else []
                if other in order and member in order and order.index(other) < order.index(member):
                    wants_drop[index] = ((record_key, other), Match(post_id, similarity))
                    break
        return wants_drop
