"""The command line: ``streamfilter replay`` and ``streamfilter params``."""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import re
import signal
import sys
import time
import zlib
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from json.scanner import make_scanner
from typing import IO, Any, cast

import anyio
import anyio.abc

from ._config import FilterConfig, parse_duration
from ._exceptions import ConfigError, ConfigMismatchError, StreamFilterError
from ._filter import StreamFilter
from ._launch import small_input
from ._lsh import choose_for_rates
from ._pipeline import Chunks, CommitHooks
from ._post import RetweetPolicy, Verdict, VerdictKind
from .adapters._base import CLIPPED_LINE_BYTES, MAX_LINE_BYTES
from .stores import BandStore, LMDBStore
from .stores.redis import RedisStore

__all__ = ["main"]

# Bytes asked of an input per read, each one a call in a thread. A pipe
# gives what it holds, so a live stdin waits for no more. At 64 KB, a
# replay of 70 MB of Mastodon statuses made 1,070 such calls, each a hand-off
# between threads that contend with the store stage for the interpreter:
# 1 MB took its wall time from 1.80 to 1.39 s (medians of 7 alternating runs).
_READ_SIZE = 1 << 20
_SIMILARITIES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class _UsageError(Exception):
    pass


# -- argument parsing ------------------------------------------------------------
def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamfilter",
        description="Filter near-duplicate posts out of social-media streams.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    replay = commands.add_parser(
        "replay",
        help="replay JSON Lines (or text) files through the filter",
        description="Replay recorded streams; novel posts go to --out, one verdict per post to --verdicts.",
    )
    replay.add_argument("inputs", nargs="*", metavar="INPUT", help="JSON Lines files (.gz too) or -; none means stdin")
    _add_filtering(replay)
    replay.add_argument(
        "--resume",
        action="store_true",
        help="continue each input from the last batch committed to --db or --store; outputs are appended",
    )
    replay.add_argument("--no-progress", action="store_true", help="no progress line even when stderr is a terminal")
    replay.add_argument(
        "--sketch-processes",
        type=int,
        default=None,
        metavar="N",
        help="worker processes that sketch input lines beside the store stage; 0 sketches in this process "
        "(default: one per spare core, at most 2)",
    )

    follow = commands.add_parser(
        "follow",
        help="filter a live stream (JSON Lines over HTTP, server-sent events, WebSocket)",
        description="Follow a live stream and write its novel posts to stdout (or --out) as they come. "
        "Reconnects with backoff and jitter, resuming where the protocol allows (SSE Last-Event-ID, "
        "Jetstream cursor); connection state goes to stderr. Stop with SIGINT or SIGTERM.",
    )
    follow.add_argument(
        "url", metavar="URL", help="http(s):// for JSON Lines or server-sent events, ws(s):// for WebSocket"
    )
    _add_filtering(follow)
    follow.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for every connection, e.g. 'Authorization: Bearer TOKEN' (repeatable)",
    )
    follow.add_argument(
        "--max-retries",
        type=int,
        default=None,
        help="give up after this many reconnects in a row that deliver nothing (default: never)",
    )
    follow.set_defaults(resume=False, batch_size=None)

    params = commands.add_parser(
        "params",
        help="show the LSH split chosen for a threshold, or for target error rates",
        description="Without --fn-rate/--fp-rate: the split FilterConfig derives from --threshold and --num-perm. "
        "With them: the cheapest split that misses at most --fn-rate of the pairs at --fn-at and makes "
        "candidates of at most --fp-rate of the pairs at --fp-at.",
    )
    _add_tuning(params)
    params.add_argument(
        "--max-miss-rate",
        type=float,
        default=None,
        help="allowed share of missed pairs at the threshold (default: 0.02)",
    )
    params.add_argument("--fn-rate", type=float, help="allowed share of missed pairs at --fn-at, e.g. 0.01")
    params.add_argument("--fn-at", type=_threshold, help="similarity of the pairs that must be caught, e.g. 0.6")
    params.add_argument("--fp-rate", type=float, help="allowed share of candidate pairs at --fp-at, e.g. 0.2")
    params.add_argument(
        "--fp-at", type=_threshold, help="similarity of pairs that should not become candidates, e.g. 0.3"
    )
    return parser


def _add_filtering(parser: argparse.ArgumentParser) -> None:
    """Where the index lives, where verdicts go, how records are read and judged."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--db", metavar="PATH", help="LMDB index directory (default: a temporary one, removed at exit)")
    where.add_argument(
        "--store",
        metavar="URL",
        help="a shared index on Redis or Redis Cluster instead of LMDB: redis://host:6379/0[?prefix=name] "
        "(needs pip install 'streamfilter[redis]')",
    )
    parser.add_argument("--out", metavar="FILE", help="novel posts, input lines byte for byte (default: stdout)")
    parser.add_argument("--verdicts", metavar="FILE", help="one JSON verdict per post, in input order")
    parser.add_argument("--rejects", metavar="FILE", help="invalid lines, unchanged")
    parser.add_argument(
        "--format", choices=("auto", "twitter", "mastodon", "bluesky", "text", "generic"), default="auto"
    )
    parser.add_argument("--id-field", default="id", help="dotted path of the id in generic JSON (default: id)")
    parser.add_argument("--text-field", default="text", help="dotted path of the text in generic JSON (default: text)")
    parser.add_argument(
        "--time-field",
        default="created_at",
        help="dotted path of the time in generic JSON (default: created_at)",
    )
    _add_tuning(parser)
    parser.add_argument(
        "--ttl",
        type=_duration,
        metavar="DURATION",
        help="expiry in event time: 90s, 24h, 7d, or 0 for never (default: 7d)",
    )
    parser.add_argument(
        "--retweets",
        choices=[p.value for p in RetweetPolicy],
        default=None,
        help="retweet policy (default: content)",
    )
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=1024,
        help="posts per store transaction at most; a batch is also flushed 2 ms after its first post (default: 1024)",
    )


def _add_tuning(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threshold", type=_threshold, help="Jaccard similarity that makes a duplicate (default: 0.5)")
    parser.add_argument(
        "--shingle-size",
        type=_positive_int,
        help="words per MinHash shingle, and the longest run of words verification compares (default: 2)",
    )
    parser.add_argument("--num-perm", type=_positive_int, help="MinHash permutations (default: 32)")
    parser.add_argument(
        "--bands", type=_positive_int, help="LSH bands; give --rows too (default: derived from the threshold)"
    )
    parser.add_argument("--rows", type=_positive_int, help="rows per band; bands x rows must equal --num-perm")


def _config(args: argparse.Namespace, stored: dict[str, Any] | None) -> FilterConfig:
    settings: dict[str, Any] = {}
    if args.threshold is not None:
        settings["jaccard_threshold"] = args.threshold
    if args.shingle_size is not None:
        settings["shingle_size"] = args.shingle_size
    if args.num_perm is not None:
        settings["num_perm"] = args.num_perm
    if args.bands is not None or args.rows is not None:
        settings["bands"], settings["rows"] = args.bands, args.rows
    if getattr(args, "ttl", None) is not None:
        settings["ttl_seconds"] = args.ttl
    if getattr(args, "retweets", None) is not None:
        settings["retweet_policy"] = RetweetPolicy(args.retweets)
    if getattr(args, "batch_size", None) is not None:
        settings["batch_size"] = args.batch_size
    if getattr(args, "sketch_processes", None) is not None:
        settings["sketch_processes"] = args.sketch_processes
    elif small_input(getattr(args, "inputs", None) or []):
        settings["sketch_processes"] = 0  # as _launch, which then started no worker early
    if getattr(args, "max_miss_rate", None) is not None:
        settings["max_miss_rate"] = args.max_miss_rate
    if stored:
        # An existing index keeps the shape it was built with, unless the
        # command line asks for another one (which then fails, naming it).
        settings.setdefault("shingle_size", stored.get("shingle_size"))
        settings.setdefault("seed", stored.get("seed"))
        if "num_perm" not in settings or settings["num_perm"] == stored.get("num_perm"):
            settings["num_perm"] = stored.get("num_perm")
            settings.setdefault("bands", stored.get("bands"))
            settings.setdefault("rows", stored.get("rows"))
    return FilterConfig(**settings)


# -- input ---------------------------------------------------------------------------
class _Inputs:
    """Reads every input in blocks and yields lists of lines, numbered globally.

    Each named input is tracked by its absolute path, so that ``--resume``
    can skip the lines a committed batch already covered.
    """

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths) or ["-"]
        self.keys = ["-" if path == "-" else os.path.abspath(path) for path in self.paths]
        self._starts: list[int] = []
        self.lines_read = 0
        self.skip: dict[str, int] = {}
        self.stopping = False
        self.broken: list[str] = []  # inputs that ended in a read error, as reported
        self._stop_scope: anyio.CancelScope | None = None

    def open_all(self) -> list[IO[bytes]]:
        handles = []
        for path in self.paths:
            if path == "-":
                handles.append(sys.stdin.buffer)
                continue
            try:
                handle = cast(
                    IO[bytes],
                    gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=0),  # noqa: SIM115
                )
            except OSError as exc:
                raise _UsageError(f"cannot open input {path}: {exc.strerror or exc}") from None
            handles.append(handle)
        return handles

    def stop(self) -> None:
        """Read no more input; what was read is still judged and committed."""
        self.stopping = True
        if self._stop_scope is not None:
            self._stop_scope.cancel()

    def where(self, line: int) -> str:
        """'path:line' of a global line number."""
        index = max(bisect.bisect_right(self._starts, line - 1) - 1, 0)
        name = "<stdin>" if self.paths[index] == "-" else self.paths[index]
        return f"{name}:{line - self._starts[index]}"

    def progress(self, last_line: int) -> dict[str, int]:
        """Lines done per input once every line up to ``last_line`` is committed.

        A batch can span the end of one input and the start of the next, so
        every input before the last one touched is reported as finished.
        """
        index = max(bisect.bisect_right(self._starts, last_line - 1) - 1, 0)
        done = {self.keys[i]: self._starts[i + 1] - self._starts[i] for i in range(index)}
        done[self.keys[index]] = last_line - self._starts[index]
        return done

    def _report_broken(self, index: int, cut: bool, exc: BaseException) -> None:
        name = "<stdin>" if self.paths[index] == "-" else self.paths[index]
        whole = self.lines_read - self._starts[index]
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        message = f"{name}: input broke off after line {whole}: {reason}"
        if cut:
            message += f"; line {whole + 1} is incomplete and was not judged"
        print(f"streamfilter: {message}", file=sys.stderr)
        self.broken.append(message)

    async def _read(self, read: Any) -> bytes:
        with anyio.CancelScope() as scope:
            self._stop_scope = scope
            if self.stopping:
                return b""
            block: bytes = await anyio.to_thread.run_sync(read, _READ_SIZE, abandon_on_cancel=True)
            return block
        return b""

    async def chunks(self, handles: list[IO[bytes]]) -> AsyncGenerator[list[bytes] | int, None]:
        for key, handle in zip(self.keys, handles, strict=True):
            self._starts.append(self.lines_read)
            to_skip = self.skip.get(key, 0)
            pending: list[bytes] = []  # the blocks of a line not yet ended
            pending_bytes = 0
            # A line over MAX_LINE_BYTES keeps only its first CLIPPED_LINE_BYTES
            # (the adapter rejects it by its line number, and --rejects gets
            # that much of it); the rest is read past, so a line that never
            # ends (a binary file given by mistake) cannot exhaust memory.
            clipping = False
            read = getattr(handle, "read1", None) or handle.read
            while not self.stopping:
                try:
                    block = await self._read(read)
                except (OSError, EOFError, zlib.error) as exc:
                    # A truncated or corrupt .gz, or a failing disk: every
                    # whole line read so far is judged, then the next input.
                    # A line cut off is not: --resume reads it again once the
                    # input is whole.
                    self._report_broken(len(self._starts) - 1, any(pending), exc)
                    pending = []
                    break
                if not block:
                    break
                if b"\n" not in block:
                    # joined once the line ends: a line of many blocks costs one copy, not one per block
                    if not clipping:
                        pending.append(block)
                        pending_bytes += len(block)
                        if pending_bytes > MAX_LINE_BYTES:
                            pending, clipping = [b"".join(pending)[:CLIPPED_LINE_BYTES]], True
                    continue
                if clipping:  # the rest of the clipped line ends in this block
                    block, clipping = block[block.index(b"\n") :], False
                pending.append(block)
                lines = b"".join(pending).split(b"\n")
                pending = [lines.pop()]
                pending_bytes = len(pending[0])
                if to_skip:
                    skipped = min(to_skip, len(lines))
                    to_skip -= skipped
                    self.lines_read += skipped
                    yield skipped
                    lines = lines[skipped:]
                    if not lines:
                        continue
                self.lines_read += len(lines)
                yield lines
            last = b"".join(pending)
            if last and not self.stopping and not to_skip:
                self.lines_read += 1
                yield [last]
            if self.stopping:
                return


# -- output --------------------------------------------------------------------------
# A page whose posts come first: {"data": [ or {"statuses": [
_PAGE_START = re.compile(r'\s*\{\s*"(data|statuses)"\s*:\s*\[\s*')
_BLANK = re.compile(r"[ \t\n\r]*")
# json's own C scanner, as JSONDecoder builds it (typeshed types its argument as the scanner itself)
_scan_value = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _after_blanks(text: str, position: int) -> int:
    blanks = _BLANK.match(text, position)
    return position if blanks is None else blanks.end()


def _cut_page(text: str, keep: set[str | None]) -> str | None:
    """``text``, a response page that starts with its ``data`` or
    ``statuses`` array and names neither key anywhere else, with only the
    items of that array whose id is in ``keep``: every other character as
    it was. Each item is read by json's scanner, and the rest of the page
    (its ``includes``, often most of it) is not read at all, where decoding
    and encoding the whole page took 3.5 ms for a Twitter v2 page of 100
    tweets. None for any other page, which is then decoded whole."""
    start = _PAGE_START.match(text)
    if start is None or text.count('"data"') + text.count('"statuses"') != 1:
        return None
    position = start.end()
    if text.startswith("]", position):
        return None
    kept: list[str] = []
    while True:
        try:
            item, end = _scan_value(text, position)
        except (StopIteration, ValueError):
            return None
        if isinstance(item, dict) and str(item.get("id_str", item.get("id"))) in keep:
            kept.append(text[position:end])
        position = _after_blanks(text, end)
        if text.startswith(",", position):
            position = _after_blanks(text, position + 1)
        elif text.startswith("]", position):
            return text[: start.end()] + ",".join(kept) + text[position:]
        else:
            return None


def _novel_output(verdicts: Sequence[Verdict]) -> bytes | None:
    """What --out gets for one input line: the line itself when all its posts
    are novel; for a page with some duplicates, the page cut to its novel posts."""
    novel = [v for v in verdicts if v.kind is VerdictKind.NOVEL]
    if not novel:
        return None
    raw = verdicts[0].raw
    if len(novel) == len(verdicts) and isinstance(raw, bytes):
        return raw.rstrip(b"\r")
    post_record = novel[0].post.raw if novel[0].post is not None else None
    keep = {v.post.id for v in novel if v.post is not None}
    if isinstance(post_record, bytes):
        # the adapter read it as UTF-8 (a first line's byte-order mark dropped)
        cut = _cut_page(post_record.decode("utf-8").removeprefix("\ufeff").rstrip("\r"), keep)
        if cut is not None:
            return cut.encode("utf-8")
    if isinstance(post_record, bytes | str) and post_record.lstrip()[:1] in (b"{", "{"):
        post_record = json.loads(post_record)  # a page, decoded again to cut it
    if isinstance(post_record, dict):
        page = dict(post_record)
        for key in ("data", "statuses"):
            if isinstance(page.get(key), list):
                page[key] = [
                    item
                    for item in page[key]
                    if isinstance(item, dict) and str(item.get("id_str", item.get("id"))) in keep
                ]
        return json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
    return raw if isinstance(raw, bytes) else str(raw).encode()


class _Writer:
    def __init__(self, args: argparse.Namespace, inputs: _Inputs | _Live) -> None:
        self.inputs = inputs
        mode = "ab" if args.resume else "wb"
        self.out = _open_output(args.out, mode) if args.out else sys.stdout.buffer
        self.verdicts = _open_output(args.verdicts, mode) if args.verdicts else None
        self.rejects = _open_output(args.rejects, mode) if args.rejects else None
        self.counts = dict.fromkeys(("posts", "novel", "duplicate", "retweet", "invalid", "skipped"), 0)

    def write(self, verdicts: list[Verdict]) -> None:
        counts = self.counts
        counts["posts"] += len(verdicts)
        kinds = [verdict.kind for verdict in verdicts]
        for kind in VerdictKind:
            counts[kind.value] += kinds.count(kind)
        output: list[bytes] = []
        start = 0
        while start < len(verdicts):
            first = verdicts[start]
            end = start + 1
            while end < len(verdicts) and verdicts[end].line == first.line:
                end += 1
            if first.kind is VerdictKind.INVALID:
                self._reject(first)
            elif end == start + 1 and first.kind is not VerdictKind.NOVEL:
                pass  # one duplicate, retweet or skipped record: nothing passes
            elif end == start + 1 and isinstance(first.raw, bytes):
                output.append(first.raw.rstrip(b"\r"))  # one novel post: its line as read
            elif (novel := _novel_output(verdicts[start:end])) is not None:
                output.append(novel)
            start = end
        # Runs inside the store transaction, before its commit: what the index
        # will record as seen is already out of this process.
        if self.verdicts is not None and verdicts:
            self.verdicts.write("".join([verdict.json_line() + "\n" for verdict in verdicts]).encode())
        if output:
            self.out.write(b"\n".join(output) + b"\n")
        for handle in (self.out, self.verdicts, self.rejects):
            if handle is not None:
                handle.flush()

    def _reject(self, verdict: Verdict) -> None:
        print(f"streamfilter: {self.inputs.where(verdict.line)}: invalid: {verdict.reason}", file=sys.stderr)
        if self.rejects is not None:
            raw = verdict.raw if isinstance(verdict.raw, bytes) else str(verdict.raw).encode()
            self.rejects.write(raw + b"\n")

    def close(self) -> None:
        for handle in (self.out, self.verdicts, self.rejects):
            if handle is not None:
                handle.flush()
                if handle is not sys.stdout.buffer:
                    handle.close()


def _open_output(path: str, mode: str) -> IO[bytes]:
    if path == "-":
        return sys.stdout.buffer
    try:
        if mode == "ab":
            _drop_torn_line(path)
        return open(path, mode)  # noqa: SIM115
    except OSError as exc:
        raise _UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _drop_torn_line(path: str) -> None:
    """Cut an output file back to its last complete line before appending.

    A run killed while writing a batch can leave half a line at the end. That
    batch was never committed (its output is written before its commit), so
    ``--resume`` writes it again; appending to the torn line would glue the
    two into one broken line.
    """
    try:
        handle = open(path, "r+b")  # noqa: SIM115
    except FileNotFoundError:
        return
    with handle:
        end = position = handle.seek(0, os.SEEK_END)
        while position > 0:
            start = max(0, position - 65536)
            handle.seek(start)
            newline = handle.read(position - start).rfind(b"\n")
            if newline >= 0:
                position = start + newline + 1
                break
            position = start
        if position < end:
            handle.truncate(position)
            print(
                f"streamfilter: {path} ended in a partial line ({end - position} bytes) "
                "left by a run that was killed; cut it off before resuming",
                file=sys.stderr,
            )


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self._shown = 0.0

    def show(self, counts: dict[str, int], final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not final and now - self._shown < 0.2):
            return
        self._shown = now
        elapsed = max(now - self.started, 1e-9)
        sys.stderr.write(
            f"\r{counts['posts']:>10,} posts  {counts['novel']:>9,} novel  "
            f"{counts['duplicate']:>9,} dup  {counts['posts'] / elapsed:>9,.0f}/s"
        )
        if final:
            sys.stderr.write("\r" + " " * 72 + "\r")
        sys.stderr.flush()


async def _watch_signals(inputs: _Inputs | _Live, received: list[int]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            received.append(signum)
            print(f"\nstreamfilter: {signal.Signals(signum).name}: finishing the current batch", file=sys.stderr)
            inputs.stop()
            return


def _index(args: argparse.Namespace) -> tuple[BandStore | None, FilterConfig]:
    """The store named by --store (None: LMDB at --db) and the config, adopting the index's pinned settings."""
    store: BandStore | None = None
    if args.store:
        if not args.store.startswith(("redis://", "rediss://", "unix://")):
            raise _UsageError(f"--store takes a redis://, rediss:// or unix:// URL, got {args.store!r}")
        store = RedisStore(args.store)
        stored = store.pinned_settings()
    else:
        stored = LMDBStore(args.db).pinned_settings() if args.db else None
    return store, _config(args, stored)


def _filter(args: argparse.Namespace, store: BandStore | None, config: FilterConfig) -> StreamFilter:
    """The StreamFilter that --db or --store and the format options describe."""
    return StreamFilter(
        config,
        path=args.db,
        store=store,
        format=args.format,
        id_field=args.id_field,
        text_field=args.text_field,
        time_field=args.time_field,
    )


def _summary(counts: dict[str, int], seconds: float) -> None:
    print(
        f"streamfilter: {counts['posts']} posts, {counts['novel']} novel, {counts['duplicate']} duplicates, "
        f"{counts['retweet']} retweets, {counts['invalid']} invalid, {counts['skipped']} skipped, {seconds:.2f} s, "
        f"{counts['posts'] / max(seconds, 1e-9):.0f} posts/s",
        file=sys.stderr,
    )


async def _replay(args: argparse.Namespace) -> int:
    if args.resume and not (args.db or args.store):
        raise _UsageError("--resume needs --db or --store, where progress is recorded")
    if args.resume and (not args.inputs or "-" in args.inputs):
        raise _UsageError("--resume needs named input files; stdin cannot be replayed from a position")
    store, config = _index(args)
    inputs = _Inputs(args.inputs)
    handles = inputs.open_all()
    writer = _Writer(args, inputs)
    progress = _Progress(sys.stderr.isatty() and not args.no_progress)
    received: list[int] = []
    started = time.monotonic()
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_watch_signals, inputs, received)
            async with _filter(args, store, config) as sf:
                if args.resume:
                    inputs.skip = sf.store.progress()
                hooks = CommitHooks(before_commit=writer.write, progress=inputs.progress, where=inputs.where)
                async for _ in sf.judge_batches(Chunks(inputs.chunks(handles)), hooks):
                    progress.show(writer.counts)
            task_group.cancel_scope.cancel()
    finally:
        writer.close()
        progress.show(writer.counts, final=True)
        for handle in handles:
            if handle is not sys.stdin.buffer:
                handle.close()
    _summary(writer.counts, time.monotonic() - started)
    if received:
        return 128 + received[0]
    return 1 if inputs.broken else 0


class _Live:
    """The records of a live URL, read by a task that SIGINT or SIGTERM can stop."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._scope: anyio.CancelScope | None = None
        self.stopping = False

    def where(self, line: int) -> str:
        return f"{self.url}: record {line}"

    def stop(self) -> None:
        """Read no more records; those already read are still judged and committed."""
        self.stopping = True
        if self._scope is not None:
            self._scope.cancel()

    async def pump(self, source: AsyncGenerator[bytes, None], send: anyio.abc.ObjectSendStream[bytes]) -> None:
        async with send, aclosing(source):
            with anyio.CancelScope() as self._scope:
                if self.stopping:
                    return
                async for record in source:
                    await send.send(record)


async def _follow(args: argparse.Namespace) -> int:
    from .sources import follow

    headers = {}
    for header in args.header:
        name, colon, value = header.partition(":")
        if not colon or not name.strip():
            raise _UsageError(f"--header takes 'Name: value', got {header!r}")
        headers[name.strip()] = value.strip()
    store, config = _index(args)
    live = _Live(args.url)
    writer = _Writer(args, live)
    received: list[int] = []
    started = time.monotonic()

    def state(message: str) -> None:
        print(f"streamfilter: {message}", file=sys.stderr, flush=True)

    source = follow(args.url, headers=headers, max_retries=args.max_retries, on_state=state)
    send, receive = anyio.create_memory_object_stream[bytes](config.batch_size)
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_watch_signals, live, received)
            async with _filter(args, store, config) as sf:
                task_group.start_soon(live.pump, source, send)
                async with receive:
                    hooks = CommitHooks(before_commit=writer.write, where=live.where)
                    async for _ in sf.judge_batches(receive, hooks):
                        pass
            task_group.cancel_scope.cancel()
    finally:
        writer.close()
    _summary(writer.counts, time.monotonic() - started)
    if received:
        return 128 + received[0]
    return 0


def _params(args: argparse.Namespace) -> int:
    targets = (args.fn_rate, args.fn_at, args.fp_rate, args.fp_at)
    if any(value is not None for value in targets):
        if any(value is None for value in targets):
            raise _UsageError("--fn-rate, --fn-at, --fp-rate and --fp-at go together")
        if not (0 < args.fn_rate < 1 and 0 < args.fp_rate < 1 and args.fp_at < args.fn_at):
            raise _UsageError("rates must be in (0, 1) and --fp-at below --fn-at")
        found = choose_for_rates(args.fn_at, args.fn_rate, args.fp_at, args.fp_rate)
        if found is None:
            raise _UsageError("no split of up to 256 permutations meets both rates; loosen one of them")
        plan = found
        print(
            f"cheapest split for P(miss | {args.fn_at}) <= {args.fn_rate} "
            f"and P(candidate | {args.fp_at}) <= {args.fp_rate}:"
        )
        print(
            f"use --num-perm {plan.num_perm} --bands {plan.bands} --rows {plan.rows} "
            f"(FilterConfig(num_perm={plan.num_perm}, bands={plan.bands}, rows={plan.rows}))"
        )
    else:
        config = _config(args, None)
        plan = config.plan
    print(f"threshold {plan.threshold}  num_perm {plan.num_perm}  bands {plan.bands}  rows {plan.rows}")
    print(f"mean P(candidate) below the threshold (false-positive rate): {plan.false_positive_rate:.4f}")
    print(f"mean P(missed) at or above the threshold (false-negative rate): {plan.false_negative_rate:.6f}")
    print(
        f"work per post: {plan.num_perm} hash permutations per shingle, {plan.bands} band look-ups, "
        f"{plan.bands} band entries in the index for a novel post"
    )
    print("similarity  P(candidate)")
    for similarity, probability in plan.table(_SIMILARITIES):
        print(f"{similarity:>10.2f}  {probability:.6f}")
    return 0


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from task groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        try:
            if args.command == "params":
                return _params(args)
            if args.command == "follow":
                return int(anyio.run(_follow, args))
            return int(anyio.run(_replay, args))
        except BaseExceptionGroup as group:
            raise _leaf(group) from None
    except _UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"streamfilter: error: {exc}", file=sys.stderr)
        return 2
    except StreamFilterError as exc:
        print(f"streamfilter: error: {exc}", file=sys.stderr)
        # a bad setting is a usage error; an index built otherwise is a failure to open it
        usage = isinstance(exc, ConfigError) and not isinstance(exc, ConfigMismatchError)
        return 2 if usage else 1
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        print(
            f"streamfilter: error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("streamfilter: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the contract is one line, not a traceback
        print(f"streamfilter: error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
