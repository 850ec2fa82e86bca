"""The ``streamfilter`` commands: ``replay``, ``follow``, ``consume``, ``report`` and ``params``."""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .._config import FilterConfig
from .._exceptions import ConfigError, ConfigMismatchError, StreamFilterError
from .._filter import StreamFilter
from .._lsh import choose_for_rates
from .._pipeline import Chunks, CommitHooks
from .._redact import redact
from ..stores import BandStore, LMDBStore
from ._console import set_quiet
from ._inputs import Inputs, Live, Progress, watch_signals
from ._outputs import Writer, summary
from ._parser import SIMILARITIES, UsageError, build_parser, config_of
from ._service import headers_of, reporting, say, with_redis_password

__all__ = ["main"]


def _index(args: argparse.Namespace) -> tuple[BandStore | None, FilterConfig]:
    """The store named by --store (None: LMDB at --db) and the config, adopting the index's pinned settings."""
    store: BandStore | None = None
    if args.store:
        if not args.store.startswith(("redis://", "rediss://", "unix://")):
            raise UsageError(f"--store takes a redis://, rediss:// or unix:// URL, got {redact(args.store)!r}")
        from ..stores.redis import RedisStore  # here: a replay into LMDB never loads redis-py

        store = RedisStore(with_redis_password(args.store))
        stored = store.pinned_settings()
    else:
        stored = LMDBStore(args.db).pinned_settings() if args.db else None
    return store, config_of(args, stored)


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


async def _session(
    args: argparse.Namespace,
    index: tuple[BandStore | None, FilterConfig],
    inputs: Inputs | Live,
    writer: Writer,
    judge: Callable[[StreamFilter], Awaitable[None]],
    finish: Callable[[], None] = lambda: None,
) -> int | None:
    """Open the index and run ``judge`` in it, with what every command adds:
    SIGINT and SIGTERM stop ``inputs`` (the batches read are committed),
    --metrics and the stats line run alongside, and once the index was open,
    the summary goes out on any exit, after ``finish``. Returns 128 + the
    signal that stopped it, or None. ``index`` is ``_index(args)``, taken
    before any output file is opened, so an index that cannot be used
    leaves them as they were."""
    store, config = index
    received: list[int] = []
    opened: list[bool] = []
    started = time.monotonic()
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(watch_signals, inputs, received)
            async with _filter(args, store, config) as sf, reporting(args, sf, task_group):
                opened.append(True)
                await judge(sf)
            task_group.cancel_scope.cancel()
    except BaseException as exc:
        if _leaf(exc).__class__ is BrokenPipeError:
            opened.clear()  # a reader that stopped early (`| head`) wants nothing more
        raise
    finally:
        writer.close()
        finish()
        if opened:  # on an error exit too, once the index was open: what was judged before it
            summary(writer.counts, time.monotonic() - started)
    return 128 + received[0] if received else None


def _filled(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def _refuse_tables(args: argparse.Namespace) -> None:
    """A CSV or TSV file named as an input, under ``--format auto``: its rows
    would be read as plain text, each row and the header a post."""
    table = next((path for path in args.inputs if path.lower().endswith(_TABLE_SUFFIXES)), None)
    if table is not None and args.format == "auto":
        raise UsageError(
            f"{table} is a table by its name, and replay reads JSON Lines: each of its rows, and its header, "
            "would be a post of plain text. Convert it to JSON Lines, its columns as fields, and name them "
            "with --text-field, --id-field and --time-field (docs/guides/cli.md, 'Tables'); "
            "--format text reads its lines as posts all the same"
        )


_TABLE_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz")


async def _replay(args: argparse.Namespace) -> int:
    if args.resume and not (args.db or args.store):
        raise UsageError("--resume needs --db or --store, where progress is recorded")
    if args.resume and (not args.inputs or "-" in args.inputs):
        raise UsageError("--resume needs named input files; stdin cannot be replayed from a position")
    written = [name for name in (args.out, args.verdicts, args.rejects) if name not in (None, "-") and _filled(name)]
    if args.resume and args.db and written and not (Path(args.db) / "data.mdb").exists():
        # a new index would replay every input from its start, appending all of it to the outputs again
        raise UsageError(
            f"--resume: there is no index at {args.db} to resume from, but {written[0]} holds output already; "
            "check the --db path, or leave --resume out and write to new outputs"
        )
    _refuse_tables(args)
    index = _index(args)
    inputs = Inputs(args.inputs)
    handles = inputs.open_all()
    writer = Writer(args, inputs)
    # on a terminal that shows the posts too, a progress line would be glued onto them
    shows_posts = args.out in (None, "-") and sys.stdout.isatty()
    progress = Progress(sys.stderr.isatty() and not args.no_progress and not shows_posts, inputs)

    async def judge(sf: StreamFilter) -> None:
        if args.resume:
            inputs.skip = {name: done for name, done in sf.store.progress().items() if isinstance(done, int)}
        hooks = CommitHooks(deliver=writer.write, progress=inputs.progress, where=inputs.where)
        async for _ in sf.judge_batches(Chunks(inputs.chunks(handles)), hooks):
            progress.show(writer.counts)

    def finish() -> None:
        progress.show(writer.counts, final=True)
        for handle in handles:
            if handle is not sys.stdin.buffer:
                handle.close()

    stopped = await _session(args, index, inputs, writer, judge, finish)
    if stopped is not None:
        return stopped
    return 1 if inputs.broken else 0


async def _run_live(
    args: argparse.Namespace,
    index: tuple[BandStore | None, FilterConfig],
    live: Live,
    writer: Writer,
    open_source: Callable[[StreamFilter], Any],
    after_commit: Callable[[int], None] | None = None,
) -> int:
    """Judge a live source until it ends or a signal stops it; ``open_source``
    makes the source once the index is open."""

    async def judge(sf: StreamFilter) -> None:
        source = open_source(sf)
        live.attach(source)
        hooks = CommitHooks(deliver=writer.write, where=live.where, after_commit=after_commit)
        async for _ in sf.judge_batches(source, hooks):
            pass

    return await _session(args, index, live, writer, judge) or 0


async def _follow(args: argparse.Namespace) -> int:
    from ..sources import check_url, follow

    if args.resume and not (args.db or args.store):
        raise UsageError("--resume needs --db or --store, where the resume point is recorded")
    check_url(args.url)  # before the index opens: a bad URL ends the run with no summary of nothing
    headers = headers_of(args)
    index = _index(args)
    live = Live(redact(args.url))

    def open_source(sf: StreamFilter) -> Any:
        resume_from = None
        if args.resume:
            resume_from = sf.resume_point(args.url)
            say(
                f"resuming {live.name} at {resume_from}"
                if resume_from
                else f"no resume point recorded for {live.name} (or its protocol has none); starting now"
            )
        return follow(args.url, headers=headers, max_retries=args.max_retries, on_state=say, resume_from=resume_from)

    return await _run_live(args, index, live, Writer(args, live), open_source)


async def _consume(args: argparse.Namespace) -> int:
    from ..redis_streams import StreamGroup

    if args.out and args.out_stream:
        raise UsageError("give --out or --out-stream, not both")
    if args.claim_idle <= 0:
        raise UsageError("--claim-idle must be above 0: at 0, entries that live consumers are judging are taken too")
    group = StreamGroup(
        with_redis_password(args.source),
        consumer=args.consumer,
        field=args.field,
        from_now=args.from_now,
        claim_idle=args.claim_idle,
        count=args.batch_size or FilterConfig.batch_size,
        on_state=say,
    )
    await anyio.to_thread.run_sync(group.connect)  # a bad URL or server fails before the index opens
    index = _index(args)
    live = Live(redact(args.source), where=group.where)
    # Appended to: the entries of earlier runs were acknowledged and will not come again.
    novel = functools.partial(group.add, args.out_stream) if args.out_stream else None
    writer = Writer(args, live, novel=novel, append=True)

    def open_source(sf: StreamFilter) -> Any:
        say(f"consuming {group.stream} as {group.consumer} of group {group.group}")
        return group

    try:
        return await _run_live(args, index, live, writer, open_source, after_commit=group.acknowledge)
    finally:
        await group.aclose()


def _params(args: argparse.Namespace) -> int:
    targets = (args.fn_rate, args.fn_at, args.fp_rate, args.fp_at)
    if any(value is not None for value in targets):
        if any(value is None for value in targets):
            raise UsageError("--fn-rate, --fn-at, --fp-rate and --fp-at go together")
        if not (0 < args.fn_rate < 1 and 0 < args.fp_rate < 1 and args.fp_at < args.fn_at):
            raise UsageError("rates must be in (0, 1) and --fp-at below --fn-at")
        found = choose_for_rates(args.fn_at, args.fn_rate, args.fp_at, args.fp_rate)
        if found is None:
            raise UsageError("no split of up to 256 permutations meets both rates; loosen one of them")
        plan = found
        print(
            f"cheapest split for P(miss | {args.fn_at}) <= {args.fn_rate} "
            f"and P(candidate | {args.fp_at}) <= {args.fp_rate}:"
        )
        threshold = args.threshold if args.threshold is not None else plan.threshold
        print(
            f"use --threshold {threshold} --num-perm {plan.num_perm} --bands {plan.bands} --rows {plan.rows} "
            f"(FilterConfig(jaccard_threshold={threshold}, num_perm={plan.num_perm}, bands={plan.bands}, "
            f"rows={plan.rows}))"
        )
    else:
        config = config_of(args, None)
        plan = config.plan
    print(f"threshold {plan.threshold}  num_perm {plan.num_perm}  bands {plan.bands}  rows {plan.rows}")
    print(
        f"mean P(candidate) below the threshold: {plan.false_positive_rate:.4f} "
        "(pairs compared for nothing: time, never a wrong verdict, since every candidate is verified)"
    )
    print(f"mean P(missed) at or above the threshold (duplicates LSH never proposes): {plan.false_negative_rate:.6f}")
    print(
        f"work per post: {plan.num_perm} hash permutations per shingle, {plan.bands} band look-ups, "
        f"{plan.bands} band entries in the index for a novel post"
    )
    print("similarity  P(candidate)")
    for similarity, probability in plan.table(SIMILARITIES):
        print(f"{similarity:>10.2f}  {probability:.6f}")
    return 0


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from task groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    set_quiet(getattr(args, "quiet", False))
    try:
        try:
            if args.command == "params":
                return _params(args)
            if args.command == "follow":
                return int(anyio.run(_follow, args))
            if args.command == "consume":
                return int(anyio.run(_consume, args))
            if args.command == "report":
                from ._report import run_report  # here: a replay never loads the report's modules

                return run_report(args)
            return int(anyio.run(_replay, args))
        except BaseExceptionGroup as group:
            raise _leaf(group) from None
    except UsageError as exc:
        getattr(args, "command_parser", parser).print_usage(sys.stderr)
        print(f"streamfilter: error: {exc}", file=sys.stderr)
        return 2
    except StreamFilterError as exc:
        print(f"streamfilter: error: {exc}", file=sys.stderr)
        # a bad setting is a usage error; an index built otherwise is a failure to open it
        usage = isinstance(exc, ConfigError) and not isinstance(exc, ConfigMismatchError)
        return 2 if usage else 1
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):  # `| head`: what a command killed by SIGPIPE exits with
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
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
