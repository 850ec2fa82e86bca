"""The command line's inputs: files and stdin read in blocks, live sources, progress and signals."""

from __future__ import annotations

import bisect
import collections
import gzip
import os
import signal
import stat
import sys
import time
import zlib
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import IO, Any, Protocol, cast

import anyio

from .._early import EARLY_SIGNALS
from ..adapters._base import CLIPPED_LINE_BYTES, MAX_LINE_BYTES
from ._console import notice, quiet
from ._parser import UsageError

__all__ = ["Inputs", "Live", "Progress", "watch_signals"]

# Bytes asked of an input per read, each one a call in a thread. A pipe
# gives what it holds, so a live stdin waits for no more. Each read is a
# hand-off between threads that contends with the store stage for the
# interpreter, so reads are large.
_READ_SIZE = 1 << 20


# -- input ---------------------------------------------------------------------------
class Inputs:
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
        self._handles: list[IO[bytes]] = []
        # (lines read, bytes read) after each chunk read, until its lines are done
        self._read_marks: collections.deque[tuple[int, int]] = collections.deque()
        self._bytes_done = 0  # into the inputs' bytes, as far as their lines are done (``done``)

    def total_bytes(self) -> int | None:
        """The inputs' size on disk (compressed for .gz), None for stdin or a pipe."""
        try:
            sizes = [os.stat(path) for path in self.paths if path != "-"]
        except OSError:
            return None
        if "-" in self.paths or not all(_is_file(size) for size in sizes):
            return None
        return sum(size.st_size for size in sizes) or None

    def bytes_done(self) -> int:
        """How far into the inputs' bytes the lines done have come (``done``;
        for .gz, into the compressed file): not reading, which runs ahead of
        judging by the batches in flight."""
        return self._bytes_done

    def done(self, last_line: int) -> None:
        """Every line up to ``last_line`` is done (judged and committed, or
        taken into a report): the progress line counts the bytes up to the
        last chunk read that ended there or before."""
        marks = self._read_marks
        while marks and marks[0][0] <= last_line:
            self._bytes_done = marks.popleft()[1]

    def _bytes_read(self) -> int:
        """How far into the inputs' bytes reading has come."""
        done = 0
        for handle in self._handles:
            raw = getattr(handle, "fileobj", handle)  # a gzip file's position in its compressed file
            try:
                done += raw.tell()
            except (OSError, ValueError, AttributeError):
                break  # closed: read whole, and the ones after it not begun
        return done

    def open_all(self) -> list[IO[bytes]]:
        handles = self._handles
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
                raise UsageError(f"cannot open input {path}: {exc.strerror or exc}") from None
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
        self.done(last_line)
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
            broke = False
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
                    pending, broke = [], True
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
                self._read_marks.append((self.lines_read, self._bytes_read()))
                yield lines
            last = b"".join(pending)
            if last and not self.stopping:
                self.lines_read += 1
                self._read_marks.append((self.lines_read, self._bytes_read()))
                if to_skip:
                    to_skip -= 1
                    yield 1
                else:
                    yield [last]
            if self.stopping:
                return
            if to_skip and not broke:  # read whole, and shorter than recorded
                self._report_replaced(len(self._starts) - 1, to_skip)

    def _report_replaced(self, index: int, missing: int) -> None:
        lines = self.lines_read - self._starts[index]
        message = (
            f"{self.paths[index]}: --resume: the index recorded {lines + missing:,} lines of it as done, but it has "
            f"only {lines:,}: it was replaced or cut since that run, and none of it was judged now; restore the "
            "file, or replay it without --resume (then what the index has seen is judged duplicate)"
        )
        print(f"streamfilter: error: {message}", file=sys.stderr)
        self.broken.append(message)


class Progress:
    """The one progress line of replay and report, on a terminal's stderr,
    rewritten in place: what ``describe`` says of the counts, the rate, and
    for inputs of known size the share of their bytes done (judged, not
    read ahead) and the time left at the pace so far."""

    def __init__(
        self, enabled: bool, inputs: Inputs | None = None, describe: Callable[[dict[str, int]], str] | None = None
    ) -> None:
        self.enabled = enabled and not quiet()
        self.started = time.monotonic()
        self._shown = 0.0
        self._inputs = inputs
        self._total = inputs.total_bytes() if inputs is not None and self.enabled else None
        self._describe = describe or _posts_judged
        self._width = 0

    def show(self, counts: dict[str, int], final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not final and now - self._shown < 0.2):
            return
        self._shown = now
        elapsed = max(now - self.started, 1e-9)
        line = self._describe(counts) + f"  {counts.get('posts', counts.get('lines', 0)) / elapsed:>9,.0f}/s"
        if self._total and self._inputs is not None:
            share = min(self._inputs.bytes_done() / self._total, 1.0)
            left = elapsed * (1 - share) / share if share > 0 else None
            line += f"  {share:4.0%}" + (f"  {_clock(left)} left" if left is not None else "")
        self._width = max(self._width, len(line))
        sys.stderr.write("\r" + line)
        if final:
            sys.stderr.write("\r" + " " * self._width + "\r")
        sys.stderr.flush()


def _posts_judged(counts: dict[str, int]) -> str:
    return f"{counts['posts']:>10,} posts  {counts['novel']:>9,} novel  {counts['duplicate']:>9,} dup"


def _clock(seconds: float) -> str:
    """``1:05:09`` or ``05:09``."""
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}" if hours else f"{minute:02d}:{second:02d}"


def _is_file(result: os.stat_result) -> bool:
    return stat.S_ISREG(result.st_mode)


async def watch_signals(inputs: Inputs | Live, received: list[int]) -> None:
    """Stop ``inputs`` at the first SIGINT or SIGTERM, including one that came
    before this watch began (``_early.EARLY_SIGNALS``)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        if EARLY_SIGNALS:
            _stop(inputs, received, EARLY_SIGNALS[0])
            return
        async for signum in signals:
            _stop(inputs, received, signum)
            return


def _stop(inputs: Inputs | Live, received: list[int], signum: int) -> None:
    received.append(signum)
    notice(f"{signal.Signals(signum).name}: finishing the current batch")
    inputs.stop()


class Live:
    """A live source as the command line sees it: how its records are named
    in messages, and how SIGINT or SIGTERM stops it (``source.stop()``: the
    records already read are still judged and committed)."""

    def __init__(self, name: str, where: Callable[[int], str] | None = None) -> None:
        self.name = name  # as every message shows it: redacted
        self._where = where
        self._source: Stoppable | None = None
        self.stopping = False

    def attach(self, source: Stoppable) -> None:
        self._source = source
        if self.stopping:
            source.stop()

    def where(self, line: int) -> str:
        return self._where(line) if self._where is not None else f"{self.name}: record {line}"

    def stop(self) -> None:
        self.stopping = True
        if self._source is not None:
            self._source.stop()


class Stoppable(Protocol):
    def stop(self) -> None: ...
