"""``streamfilter report``: the campaigns in a stream and the verdicts a replay wrote for it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

import anyio

from .._exceptions import StreamFilterError
from .._wording import counted
from ..adapters import RecordAdapter, record_adapter
from ..report import Clusters, render
from ..report._members import MemberSpool
from ..report._signals import Coordination
from ._console import notice
from ._inputs import Inputs, Progress
from ._parser import UsageError

__all__ = ["run_report"]


class _NotAVerdict(ValueError):
    """A line of a verdicts file that no replay wrote."""


def _verdicts(lines: IO[str]) -> Iterator[dict[str, Any]]:
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            verdict = dict(json.loads(text))
            verdict["line"] = int(verdict["line"])
            _ = verdict["id"], verdict["verdict"]
        except json.JSONDecodeError as exc:
            raise _NotAVerdict(f"its line {number} is no JSON ({exc.msg} at character {exc.pos})") from None
        except KeyError as exc:
            raise _NotAVerdict(f"its line {number} has no {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise _NotAVerdict(f"its line {number} is no verdict ({exc})") from None
        yield verdict


def _lines_taken(counts: dict[str, int]) -> str:
    return f"streamfilter report: {counts['lines']:>10,} lines"


async def _collect(
    inputs: Inputs,
    handles: list[IO[bytes]],
    verdicts: Iterator[dict[str, Any]],
    adapter: RecordAdapter,
    clusters: Clusters,
    progress: Progress,
) -> None:
    """Each record with its verdicts into ``clusters``. The lines come from
    replay's own reader (``Inputs.chunks``), so they are numbered, cut and
    read past exactly as the replay that wrote the verdicts did."""
    pending = next(verdicts, None)
    line = 0
    unjudged: list[int] = []  # lines no verdict names
    strangers: list[tuple[int, str]] = []  # (line, id) of verdicts that name no post of their line
    async for chunk in inputs.chunks(handles):
        if isinstance(chunk, int):  # lines skipped on resume: none here
            line += chunk
            continue
        for raw in chunk:
            line += 1
            found = []
            while pending is not None and pending["line"] <= line:
                if pending["line"] == line:
                    found.append(pending)
                pending = next(verdicts, None)
            if not found:
                unjudged.append(line)
                continue
            try:
                posts = adapter.adapt(raw)
            except Exception:  # noqa: BLE001 - its verdict says why (invalid, skipped)
                posts = []
            ids = {post.id if post.id is not None else f"line:{line}" for post in posts}
            strangers += [
                (line, str(v["id"])) for v in found if posts and v["verdict"] != "invalid" and v["id"] not in ids
            ]
            clusters.add(posts, found)
        inputs.done(line)
        progress.show({"lines": line})
    progress.show({"lines": line}, final=True)
    _check_match(line, unjudged, strangers, pending)


def _check_match(lines: int, unjudged: list[int], strangers: list[tuple[int, str]], left: Any) -> None:
    """Refuse verdicts of another stream: every line judged, by ids of its own posts, and none past the end."""
    problems = []
    if unjudged:
        problems.append(f"{len(unjudged):,} of its {lines:,} lines have no verdict (the first: line {unjudged[0]})")
    if strangers:
        at, post_id = strangers[0]
        problems.append(f"{len(strangers):,} verdicts name posts not on their line (line {at}: {post_id!r})")
    if left is not None:
        problems.append(f"verdicts go on past its last line, {lines:,} (line {left['line']})")
    if problems:
        raise StreamFilterError(
            f"these verdicts are not of this input: {'; '.join(problems)}. Give the input the verdicts were "
            "written for, as replay read it (follow and consume write only novel posts to --out: report on "
            "their input, not their output)"
        )


def _check_writable(option: str, path: str) -> None:
    """Refuse, before any work, an output path that cannot be written."""
    if os.path.isdir(path):
        raise UsageError(f"{option} {path} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: the directory {parent} does not exist")


def run_report(args: argparse.Namespace) -> int:
    if not (args.html or args.json or args.graph or args.members):
        raise UsageError("report needs --html FILE, --json FILE, --graph FILE or --members FILE")
    outputs = (("--html", args.html), ("--json", args.json), ("--graph", args.graph), ("--members", args.members))
    for option, path in outputs:
        if path:
            _check_writable(option, path)
    adapter = record_adapter(
        args.format, id_field=args.id_field, text_field=args.text_field, time_field=args.time_field
    )
    coordination = Coordination(args.min_accounts, args.min_burst, args.window, args.co_post_window)
    spool = MemberSpool() if args.members else None
    clusters = Clusters(coordination, hash_authors=os.urandom(16) if args.hash_authors else None, spool=spool)
    inputs = Inputs(args.inputs)
    handles = inputs.open_all()
    progress = Progress(sys.stderr.isatty() and not args.no_progress, inputs, _lines_taken)
    try:
        with open(args.verdicts, encoding="utf-8") as verdict_file:
            verdicts = _verdicts(verdict_file)
            anyio.run(_collect, inputs, handles, verdicts, adapter, clusters, progress)
    except OSError as exc:
        raise UsageError(f"cannot read {args.verdicts}: {exc.strerror or exc}") from None
    except _NotAVerdict as exc:  # the data, not the command line: no usage line
        raise StreamFilterError(f"{args.verdicts} is not a verdicts file of replay or follow: {exc}") from None
    except UnicodeDecodeError:
        raise StreamFilterError(f"{args.verdicts} is not a verdicts file: it is not UTF-8 text") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise StreamFilterError(f"{args.verdicts} is not a verdicts file of replay or follow ({exc!r})") from None
    finally:
        for handle in handles:
            if handle is not sys.stdin.buffer:
                handle.close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            clusters.write_json(out, args.top)
    if args.graph:
        clusters.graph().write(args.graph, [campaign.id for campaign in clusters.campaigns()])
    if spool is not None:
        try:
            spool.write_csv(args.members, [campaign.id for campaign in clusters.campaigns()])
        finally:
            spool.close()
    if args.html:
        with open(args.html, "w", encoding="utf-8") as out:
            out.write(render(clusters, args.top, f"streamfilter report: {', '.join(args.inputs)}"))
    found = clusters.campaigns()
    largest = f", the largest of {found[0].size:,} posts" if found else ""
    campaigns = f"{len(found):,} of them {'a campaign' if len(found) == 1 else 'campaigns'}"
    notice(
        f"{counted(clusters.posts, 'post')}, {counted(len(clusters.clusters()), 'cluster')} of 2 posts or more, "
        f"{campaigns}{largest}"
    )
    return 0
