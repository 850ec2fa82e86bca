"""The command line's outputs: novel records, verdict lines, and the summary."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import IO

from .._exceptions import InvalidRecordError
from .._json import loads
from .._post import VerdictKind
from .._verdicts import Verdicts
from .._wording import counted
from ..adapters import page_of_posts
from ._console import notice
from ._inputs import Inputs, Live
from ._parser import UsageError

__all__ = ["Writer", "drop_torn_line", "summary"]


def _novel_output(verdicts: Verdicts, start: int, end: int) -> bytes | None:
    """What --out gets for one input line, rows ``start`` to ``end`` of a
    batch's columns: the line itself, byte for byte (a CRLF line keeps its
    CR), when all its posts are novel; for a page with some duplicates, the
    page cut to its novel posts; for an event that wraps a status
    (Mastodon's streaming ``update``), the status itself."""
    novel = [at for at in range(start, end) if verdicts.kinds[at] is VerdictKind.NOVEL]
    if not novel:
        return None
    raw = verdicts.raws[start]
    if len(novel) == end - start and isinstance(raw, bytes):
        return _unwrapped(raw, verdicts.entries.platform(novel[0])) or raw
    page = page_of_posts(raw, {verdicts.entries.ids[at] for at in novel})  # a line's posts share its record
    if page is not None:
        return page + b"\r" if isinstance(raw, bytes) and raw.endswith(b"\r") else page
    return raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "backslashreplace")


def _records(lines: list[int], raws: list[object]) -> bytes:
    """Each record of a batch once, as it came, a line each (``--record``): the
    input a later ``report`` reads, numbered as the verdicts number it."""
    out, last = [], None
    for line, raw in zip(lines, raws, strict=True):
        if line == last:
            continue
        last = line
        data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "backslashreplace")
        out.append(data.replace(b"\r", b" ").replace(b"\n", b" ") + b"\n")
    return b"".join(out)


def _unwrapped(raw: object, platform: str | None) -> bytes | None:
    """The status a Mastodon streaming event carries in its ``payload``, as
    the server sent it; None for any other record."""
    if platform != "mastodon" or not isinstance(raw, bytes) or b'"payload"' not in raw[:64]:
        return None
    try:
        payload = loads(raw).get("payload")
    except InvalidRecordError:
        return None
    if isinstance(payload, str):
        return payload.encode("utf-8", "backslashreplace")
    if isinstance(payload, dict):
        return json.dumps(payload, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return None


class Writer:
    """Writes each batch's outputs inside its transaction (``CommitHooks.deliver``).

    Novel records go to --out (stdout by default), or to ``novel`` when
    given (consume's --out-stream), as a list of records a batch. Files are
    appended to under --resume, or when ``append`` says so (consume, whose
    every start continues the group's work), and written afresh otherwise."""

    def __init__(
        self,
        args: argparse.Namespace,
        inputs: Inputs | Live,
        novel: Callable[[list[bytes]], None] | None = None,
        append: bool = False,
    ) -> None:
        self.inputs = inputs
        if args.verdicts == "-" and novel is None and args.out in (None, "-"):
            raise UsageError("--verdicts - and the novel posts would both go to stdout: give --out FILE (or /dev/null)")
        mode = "ab" if args.resume or append else "wb"
        self._novel = novel
        self.out = None if novel is not None else _open_output(args.out, mode) if args.out else sys.stdout.buffer
        self.verdicts = _open_output(args.verdicts, mode) if args.verdicts else None
        self.rejects = _open_output(args.rejects, mode) if args.rejects else None
        record = getattr(args, "record", None)  # follow and consume: the stream, for report
        self.record = _open_output(record, mode) if record else None
        self.counts = dict.fromkeys(("posts", "novel", "duplicate", "retweet", "invalid", "skipped"), 0)

    def write(self, verdicts: Verdicts) -> None:
        counts = self.counts
        counts["posts"] += len(verdicts)
        for kind, count in verdicts.counts().items():
            counts[kind] += count
        output: list[bytes] = []
        kinds, lines, raws = verdicts.kinds, verdicts.lines, verdicts.raws
        if self.record is not None and kinds:
            self.record.write(_records(lines, raws))
        start = 0
        while start < len(kinds):
            kind, line, raw = kinds[start], lines[start], raws[start]
            end = start + 1
            while end < len(kinds) and lines[end] == line:
                end += 1
            if kind is VerdictKind.INVALID:
                self._reject(line, verdicts.reasons[start], raw)
            elif end == start + 1 and kind is not VerdictKind.NOVEL:
                pass  # one duplicate, retweet or skipped record: nothing passes
            elif end == start + 1 and isinstance(raw, bytes):
                output.append(_unwrapped(raw, verdicts.entries.platform(start)) or raw)  # one novel post: its line
            elif (novel := _novel_output(verdicts, start, end)) is not None:
                output.append(novel)
            start = end
        # Runs inside the store transaction, before its commit: what the index
        # will record as seen is already out of this process.
        if self.verdicts is not None and kinds:
            self.verdicts.write(verdicts.json_lines())
        if output and self._novel is not None:
            self._novel(output)
        elif output and self.out is not None:
            self.out.write(b"\n".join(output) + b"\n")
        for handle in (self.out, self.verdicts, self.rejects, self.record):
            if handle is not None:
                handle.flush()

    def _reject(self, line: int, reason: str | None, raw: object) -> None:
        notice(f"{self.inputs.where(line)}: invalid: {reason}")
        if self.rejects is not None:
            data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "backslashreplace")
            self.rejects.write(data + b"\n")

    def close(self) -> None:
        for handle in (self.out, self.verdicts, self.rejects, self.record):
            if handle is not None:
                handle.flush()
                if handle is not sys.stdout.buffer:
                    handle.close()


def _open_output(path: str, mode: str) -> IO[bytes]:
    if path == "-":
        return sys.stdout.buffer
    try:
        if mode == "ab":
            drop_torn_line(path)
        return open(path, mode)  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def drop_torn_line(path: str) -> None:
    """Cut an output file back to its last complete line before appending.

    A run killed while writing a batch can leave half a line at the end. That
    batch was never committed (its output is written before its commit), so
    ``--resume`` writes it again; appending to the torn line would glue the
    two into one broken line. Only a regular file is cut: a pipe, a terminal
    or ``/dev/stdout`` has no end to go back to.
    """
    if not os.path.isfile(path):
        return
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
            notice(
                f"{path} ended in a partial line ({end - position} bytes) "
                "left by a run that was killed; cut it off before resuming"
            )


def summary(counts: dict[str, int], seconds: float) -> None:
    """The last line of a run: ``1,024 posts, 1,000 novel, 1 duplicate, … in 0.31 s, 3,303 posts/s``."""

    notice(
        f"{counted(counts['posts'], 'post')}, {counts['novel']:,} novel, {counted(counts['duplicate'], 'duplicate')}, "
        f"{counted(counts['retweet'], 'retweet')}, {counts['invalid']:,} invalid, {counts['skipped']:,} skipped "
        f"in {seconds:.2f} s, {counts['posts'] / max(seconds, 1e-9):,.0f} posts/s"
    )
