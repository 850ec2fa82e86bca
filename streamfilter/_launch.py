"""The ``streamfilter`` command's entry point, light enough to run first.

A replay sketches in a worker process (``_workers``), and a new Python needs
about as long to import numpy and the rest as the command itself does. So
before importing anything of its own, the command starts that worker: both
processes import at once, on two cores, and the worker is ready when the
replay has its first batch, instead of a third of a second later (measured
on the labelled stream: the worker was ready 0.31 s after it was started, and
it was started 0.27 s into the run). The worker is handed to the first
``SketchProcess.start``; one that is never used is closed when the command
ends. Only the standard library is imported here.
"""

from __future__ import annotations

import atexit
import gc
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
# A worker's pipes (or socket) hold a whole batch's frame, a few hundred kB,
# so each side writes it in one go (Linux's default pipe-max-size).
FRAME_BYTES = 1 << 20
# Each frame between a replay and its worker: this header (the length of what
# follows), then a pickle.
FRAME_HEADER = struct.Struct("<Q")


# Input below this many bytes (a compressed file counted 8 times) is
# sketched in the replay's own process. Two processes importing at once on
# this project's 2-core host each take about 50 ms longer (137-178 ms alone,
# 193-234 ms beside another), and a worker saves about 20 us a post: it pays
# off from about 3,000 posts of the labelled stream, 0.8 MB. A 25-line
# replay took 174-193 ms without a worker and 251-280 ms with one.
SMALL_INPUT_BYTES = 1 << 20
# The replay command's options, as _cli's parser defines them (a test keeps
# the two the same): those that take no value, and those that take one.
_REPLAY_FLAGS = frozenset({"-h", "--help", "--resume", "--no-progress"})
_REPLAY_OPTIONS = frozenset(
    {
        "--db", "--store", "--out", "--verdicts", "--rejects", "--format", "--id-field", "--text-field",
        "--time-field", "--threshold", "--shingle-size", "--num-perm", "--bands", "--rows", "--ttl",
        "--retweets", "--batch-size", "--sketch-processes",
    }
)  # fmt: skip


def default_sketch_processes() -> int:
    """Worker processes for a replay when the config leaves it open: one per
    core beyond the one the store stage uses, at most two (past that the store
    stage is the bottleneck)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(0, min(2, cores - 1))


def worker_environment() -> dict[str, str]:
    """The environment of a worker process: this one's, with this very
    package first on the path, wherever it was imported from."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, environment.get("PYTHONPATH")]))
    return environment


def pace_collector_for_batches() -> None:
    """Slow the cyclic garbage collector down, in a process streamfilter owns
    (the CLI's, a worker's), never in a library caller's.

    Batches allocate and free tens of thousands of objects without cycles,
    and at CPython's default pace (a collection per 700 net allocations) the
    collector rescanned them for 10% of a replay's time in the store stage
    and 5% in a worker (measured with gc.callbacks). Objects made before
    streaming starts (modules, settings) are frozen out of its scans.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def run() -> None:
    """The ``streamfilter`` command: ``_cli.main`` in a process of its own."""
    prestarted = _prestart_worker(sys.argv[1:])
    from . import _workers
    from ._cli import main

    if prestarted is not None:
        _workers.hand_over(*prestarted)
    pace_collector_for_batches()
    try:
        code = main()
    finally:
        _workers.close_unused()
    _exit_without_teardown(code)


def _exit_without_teardown(code: int) -> NoReturn:
    """End the process once the command has returned, without the
    interpreter's teardown.

    The command has closed its outputs and its index by then. What is left
    of a normal exit is joining other threads, the exit handlers (a test's,
    coverage's, logging's), which run here as they would, and freeing every
    module and object one by one, which took 45-60 ms after a replay of the
    labelled stream and is skipped. With a thread that is not a daemon still
    running, or without CPython's hook for the handlers, the exit is normal.
    """
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    main_thread = threading.main_thread()
    if run_exit_handlers is None or any(not t.daemon for t in threading.enumerate() if t is not main_thread):
        sys.exit(code)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: what was left to write is lost
            code = code or 1
    os._exit(code)


def _wants_worker(argv: Sequence[str]) -> bool:
    """Whether this command line is a replay that will sketch in a worker process."""
    if not argv or argv[0] != "replay" or "-h" in argv or "--help" in argv:
        return False
    for index, arg in enumerate(argv):
        value = None
        if arg == "--sketch-processes" and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("--sketch-processes="):
            value = arg.partition("=")[2]
        if value is not None:
            return value.strip() not in ("0", "")
    inputs = _replay_inputs(argv[1:])
    if inputs is not None and small_input(inputs):
        return False
    return default_sketch_processes() > 0


def _replay_inputs(argv: Sequence[str]) -> list[str] | None:
    """The INPUT arguments of a replay's command line (after ``replay``), or
    None when an option is not one of the replay's own by its full name."""
    inputs: list[str] = []
    value_next = False
    for arg in argv:
        if value_next:
            value_next = False
        elif arg.startswith("-") and arg != "-":
            name = arg.partition("=")[0]
            if name in _REPLAY_OPTIONS:
                value_next = "=" not in arg
            elif name not in _REPLAY_FLAGS:
                return None  # "--", an abbreviation, a mistake: the parser decides
        else:
            inputs.append(arg)
    return inputs


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


def _prestart_worker(argv: Sequence[str]) -> tuple[subprocess.Popen[bytes], socket.socket] | None:
    if sys.platform == "win32" or not _wants_worker(argv):  # pass_fds is POSIX only
        return None
    try:
        ours, theirs = socket.socketpair()
    except OSError:
        return None
    try:  # room for a whole batch's frame, as the pipes of other workers have
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, FRAME_BYTES)
    except OSError:
        pass
    try:
        process = subprocess.Popen(
            [
                sys.executable,
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
