"""Sketching in worker processes, so a replay uses a second core.

Half of a replay's CPU is the pure stage (decode, adapt, normalise, shingle,
MinHash), and under the GIL no thread can run it beside the store stage.
A ``SketchProcess`` is a child Python that runs ``Sketcher.prepare`` on the
raw lines it is sent and returns the batch as plain rows and flat arrays
(``Sketcher.prepare_wire``); the raw lines never travel back.

Why not ``anyio.to_process``: it pickles the function with every call,
re-runs the parent's ``__main__`` in each worker, and leaves workers in the
terminal's process group, where Ctrl-C would land in a worker mid-batch as a
KeyboardInterrupt returned to the caller. Here the child runs in its own
session and ignores SIGINT (the parent decides how to stop), gets its
Sketcher once, and exits when its socket closes, so a killed parent leaves no
child behind. Every worker starts the same way (``_protocol.spawn_worker``):
the command starts its first one before importing anything heavy, and hands
it to the first ``SketchProcess.start``.

The child's side, and the protocol between them, are in ``_serve``.
"""

from __future__ import annotations

import logging
import pickle
import socket
import subprocess
from collections import deque
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from ._engine import Sketcher
from ._prepared import WireBatch
from ._protocol import FRAME_HEADER, default_sketch_processes, frame, from_frame, most_sketch_processes, spawn_worker

__all__ = [
    "SketchProcess",
    "WorkerLost",
    "close_unused",
    "default_sketch_processes",
    "hand_over",
    "most_sketch_processes",
]

logger = logging.getLogger("streamfilter")

_START_TIMEOUT = 60.0


class WorkerLost(Exception):
    """A worker process died or broke the protocol; its batch is prepared again locally."""


class _Answer:
    __slots__ = ("done", "status", "value")

    def __init__(self) -> None:
        self.done = False
        self.status = ""
        self.value: Any = None

    def set(self, status: str, value: Any) -> None:
        self.status, self.value, self.done = status, value, True


class SketchProcess:
    """One child process that prepares batches of raw lines."""

    def __init__(self, process: _Child, send: ByteSendStream, receive: ByteReceiveStream) -> None:
        self._process = process
        self._stdin = send
        self._stdout = BufferedByteReceiveStream(receive)
        self._broken = False
        self._sending = anyio.Lock()
        self._receiving = anyio.Lock()
        self._asked: deque[_Answer] = deque()  # sent and not yet answered, oldest first

    @classmethod
    async def start(cls, sketcher: Sketcher) -> SketchProcess:
        """Start a child and hand it ``sketcher``; WorkerLost if it cannot start."""
        try:
            init = frame(sketcher, memo=True)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise WorkerLost(f"the adapter or config cannot be sent to a worker process: {exc}") from exc
        while _handed_over:
            early, connection = _handed_over.pop()
            try:
                stream = await SocketStream.from_socket(connection)
            except OSError:
                connection.close()
                early.kill()
                early.wait()
                continue
            try:
                return await cls._greet(cls(_Child(early), stream, stream), init)
            except WorkerLost as exc:  # it died starting: start another the usual way
                logger.warning("streamfilter: the worker process started early was lost (%s)", exc)
        spawned = spawn_worker()
        if spawned is None:
            raise WorkerLost("cannot start a worker process on this platform")
        process, connection = spawned
        try:
            stream = await SocketStream.from_socket(connection)
        except OSError as exc:
            connection.close()
            process.kill()
            process.wait()
            raise WorkerLost(f"cannot start a worker process: {exc}") from exc
        return await cls._greet(cls(_Child(process), stream, stream), init)

    async def _greet(self, init: bytes) -> SketchProcess:
        """Hand a started child its Sketcher and wait for its ``ready``."""
        try:
            with anyio.fail_after(_START_TIMEOUT):
                await self._send(init)
                status, _ = await self._receive()
            if status != "ready":
                raise WorkerLost(f"worker process answered {status!r} to its start")
        except BaseException:
            await self.aclose()
            raise
        return self

    async def prepare(self, records: Sequence[tuple[int, Any]]) -> WireBatch:
        """The child's ``Sketcher.prepare(records)``, as it sent it (its
        ``prepared()`` is the PreparedBatch); records must be raw lines.

        Calls may overlap: the child answers in the order it was asked, so a
        second batch waits in its pipe while the first is sketched, and the
        child never idles between batches."""
        if self._broken:
            raise WorkerLost("worker process already lost")
        answer = _Answer()
        try:
            async with self._sending:
                await self._send(frame(records))
                self._asked.append(answer)
            async with self._receiving:
                while not answer.done:
                    if self._broken:
                        raise WorkerLost("worker process lost while a batch waited")
                    self._asked.popleft().set(*await self._receive())
        except BaseException:
            # Cancelled or failed mid-exchange: the frames are out of step now.
            self._broken = True
            raise
        if answer.status == "error":
            raise answer.value
        return WireBatch(answer.value, records)

    async def _send(self, whole: bytes) -> None:
        try:
            await self._stdin.send(whole)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise WorkerLost(f"worker process is gone: {exc}") from exc

    async def _receive(self) -> tuple[str, Any]:
        try:
            (length,) = FRAME_HEADER.unpack(await self._stdout.receive_exactly(FRAME_HEADER.size))
            status, value = from_frame(await self._stdout.receive_exactly(length))
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ) as exc:
            code = self._process.returncode
            raise WorkerLost(f"worker process ended (exit status {code})") from exc
        return status, value

    async def aclose(self) -> None:
        """Close the child's socket so it exits; kill it if it has not within two seconds."""
        self._broken = True
        with anyio.CancelScope(shield=True):
            try:
                await self._stdin.aclose()
            except (anyio.BrokenResourceError, OSError):
                pass
            with anyio.move_on_after(2):
                await self._process.wait()
            if self._process.returncode is None:
                self._process.kill()
                await self._process.wait()
            await self._process.aclose()


class _Child:
    """A worker's ``subprocess.Popen``, as much of anyio's Process as SketchProcess uses."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    async def wait(self) -> int:
        # abandoned if cancelled; the thread ends when the child does
        return await anyio.to_thread.run_sync(self._process.wait, abandon_on_cancel=True)

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()

    async def aclose(self) -> None:
        await self.wait()


# Children that ``_launch`` started before this module was imported, with the
# parent's end of each one's socket, waiting for ``SketchProcess.start``.
_handed_over: list[tuple[subprocess.Popen[bytes], socket.socket]] = []


def hand_over(process: subprocess.Popen[bytes], connection: socket.socket) -> None:
    """Keep a child that ``_launch`` started for the next ``SketchProcess.start``."""
    _handed_over.append((process, connection))


def close_unused() -> None:
    """End the children handed over and never started (the command failed
    before its pipeline ran): they hold nothing yet, so they are killed."""
    while _handed_over:
        process, connection = _handed_over.pop()
        connection.close()
        process.kill()
        process.wait()
