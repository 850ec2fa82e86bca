"""What a replay and its sketch workers share: the frame format, the worker's
environment, when a worker is worth starting, and how either process ends.
Standard library only, so the command's entry point (``_launch``) can use it
before importing anything heavy."""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import os
import pickle
import socket
import stat
import struct
import subprocess
import sys
import threading
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ._compiled import PURE_VARIABLE, kernel_mode

__all__ = [
    "BLAS_THREADS_VARIABLE",
    "FRAME_BYTES",
    "FRAME_HEADER",
    "SMALL_INPUT_BYTES",
    "default_sketch_processes",
    "exit_without_teardown",
    "frame",
    "from_frame",
    "most_sketch_processes",
    "pace_collector_for_batches",
    "single_threaded_blas",
    "small_input",
    "spawn_worker",
    "worker_environment",
]

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
# A worker's pipes (or socket) hold a whole batch's frame, a few hundred kB,
# so each side writes it in one go (Linux's default pipe-max-size).
FRAME_BYTES = 1 << 20
# Each frame between a replay and its worker: this header (the length of what
# follows), then the body (``frame``).
FRAME_HEADER = struct.Struct("<Q")
_BUFFER_COUNT = struct.Struct("<I")


def frame(value: object, *, memo: bool = False) -> bytes:
    """A whole frame of ``value``: the header, then the body. The body is how
    many out-of-band buffers there are and their lengths, the buffers (the
    bytes of the numpy arrays among the values: a batch's band keys, shingle
    and word hashes), then the pickle of the rest, protocol 5, which names
    them (``from_frame``). The arrays cross as their bytes, which the
    receiver reads in place, without a copy.

    Without ``memo`` (a batch, its answer: plain values and arrays, nothing
    that refers to itself) the pickler keeps no memo, and a value that
    occurs twice may arrive as two; that takes about half the time. The
    Sketcher and errors keep the memo (``memo=True``). ``Pickler.fast`` is
    marked deprecated in the docs; where a later Python drops it, the memo
    stays."""
    buffers: list[pickle.PickleBuffer] = []
    stream = io.BytesIO()
    pickler = pickle.Pickler(stream, protocol=5, buffer_callback=buffers.append)
    if not memo:
        with contextlib.suppress(AttributeError):
            pickler.fast = True  # no memo
    pickler.dump(value)
    views = [buffer.raw() for buffer in buffers]
    head = [_BUFFER_COUNT.pack(len(views)), *[FRAME_HEADER.pack(view.nbytes) for view in views]]
    body_bytes = sum(len(part) for part in head) + sum(view.nbytes for view in views) + stream.tell()
    return b"".join([FRAME_HEADER.pack(body_bytes), *head, *views, stream.getbuffer()])


def from_frame(body: bytes) -> Any:
    """The value of a frame's body (``frame``); its arrays are read-only
    views of ``body``."""
    view = memoryview(body)
    (count,) = _BUFFER_COUNT.unpack_from(view)
    at = _BUFFER_COUNT.size + count * FRAME_HEADER.size
    buffers = []
    for index in range(count):
        (length,) = FRAME_HEADER.unpack_from(view, _BUFFER_COUNT.size + index * FRAME_HEADER.size)
        buffers.append(view[at : at + length])
        at += length
    return pickle.loads(view[at:], buffers=buffers)


# Input below this many bytes (a compressed file counted 8 times) is
# sketched in the replay's own process: starting a worker costs more than it
# saves on a few thousand posts (docs/design/pipeline.md).
SMALL_INPUT_BYTES = 1 << 20


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_sketch_processes() -> int:
    """Worker processes a replay starts with when the config leaves it open:
    one per core beyond the one the store stage uses, at most two (past that
    the store stage is the bottleneck)."""
    return max(0, min(2, _cores() - 1))


def most_sketch_processes() -> int:
    """The worker processes a replay may grow to while its sketching holds it
    back: two on two cores, where the store stage of a stream of long texts
    uses a fraction of its core (docs/benchmarks.md, "300,000 posts")."""
    return max(default_sketch_processes(), 2 if _cores() >= 2 else 0)


def single_threaded_blas(environment: MutableMapping[str, str]) -> None:
    """Ask numpy's OpenBLAS for one thread, unless the user chose a number.

    At import, OpenBLAS starts a thread per core that spins for a while: CPU
    taken from the replay's own processes on a small machine, for nothing,
    since streamfilter never calls BLAS. Only for processes streamfilter owns
    (the CLI's, a worker's), and before numpy is imported there."""
    environment.setdefault(BLAS_THREADS_VARIABLE, "1")


def worker_environment() -> dict[str, str]:
    """The environment of a worker process: this one's, with this very
    package first on the path, wherever it was imported from."""
    environment = dict(os.environ)
    single_threaded_blas(environment)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, environment.get("PYTHONPATH")]))
    if kernel_mode() == "pure":  # the worker runs what this process runs (and says nothing more of it)
        environment[PURE_VARIABLE] = "1"
    return environment


def pace_collector_for_batches() -> None:
    """Slow the cyclic garbage collector down, in a process streamfilter owns
    (the CLI's, a worker's), never in a library caller's.

    Batches allocate and free tens of thousands of objects without cycles,
    and at CPython's default pace (a collection per 700 net allocations) the
    collector rescans them over and over. Objects made before streaming
    starts (modules, settings) are frozen out of its scans.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def small_input(paths: Sequence[str]) -> bool:
    """Whether ``paths`` are regular files of fewer than ``SMALL_INPUT_BYTES``
    in all; False for stdin (no paths, or ``-``) and for any other path."""
    total = 0
    for path in paths:
        if path == "-":
            return False
        try:
            status = os.stat(path)
        except OSError:
            return False
        if not stat.S_ISREG(status.st_mode):
            return False
        total += status.st_size * (8 if path.endswith(".gz") else 1)
    return bool(paths) and total < SMALL_INPUT_BYTES


def spawn_worker() -> tuple[subprocess.Popen[bytes], socket.socket] | None:
    """Start a sketch worker: a child Python in a session of its own that
    answers frames on one end of a socketpair (``_serve.serve_socket``).
    Returns the child and this process's end; None where it cannot start
    (no socketpair or ``pass_fds``: not POSIX). The one way workers start,
    early from the command's entry point or later from the pipeline."""
    if sys.platform == "win32":
        return None
    try:
        ours, theirs = socket.socketpair()
    except OSError:
        return None
    try:  # room for a whole batch's frame, so each side writes it in one go
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, FRAME_BYTES)
    except OSError:
        pass
    try:
        process = subprocess.Popen(
            # -P: no current directory before that path, where a folder named streamfilter (an
            # unpacked data set, a checkout) would be imported in place of this package
            [
                sys.executable,
                "-P",
                "-c",
                f"from streamfilter._serve import serve_socket; serve_socket({theirs.fileno()})",
            ],
            stdin=subprocess.DEVNULL,
            # never the replay's stdout, which may be its --out: a stray print goes to stderr
            stdout=2,
            stderr=None,
            pass_fds=(theirs.fileno(),),
            env=worker_environment(),
            start_new_session=True,
        )
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
    return process, ours


def exit_without_teardown(code: int) -> NoReturn:
    """End the process once its work is done (the command's, ``_launch``; a
    worker's, ``_serve``), without the interpreter's teardown.

    Its outputs (and the command's index) are closed by then. What is left
    of a normal exit is joining other threads, the exit handlers (a test's,
    coverage's, logging's), which run here as they would, and freeing every
    module and object one by one, which is skipped, as multiprocessing's
    children skip it. A replay waits for its workers to end before it ends
    itself, so a worker's teardown would delay the replay's end as well.

    With a thread that is not a daemon still running, or without CPython's
    hook for the handlers, the exit is normal; but not after a signal
    stopped the command (``code`` 128 + its number): a thread still blocked
    reading an idle stdin would hold the process until the writer closed it.
    """
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    main_thread = threading.main_thread()
    stopped_by_signal = code > 128
    others = any(not t.daemon for t in threading.enumerate() if t is not main_thread)
    if run_exit_handlers is None or (others and not stopped_by_signal):
        sys.exit(code)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: what was left to write is lost
            code = code or 1
    os._exit(code)
