"""The ``streamfilter`` command's entry point, light enough to run first.

A replay sketches in a worker process (``_workers``), and a new Python needs
about as long to import numpy and the rest as the command itself does. So
before importing anything of its own, the command starts that worker: both
processes import at once, on two cores, and the worker is ready when the
replay has its first batch, instead of a third of a second later
(docs/design/pipeline.md). The worker is handed to the first
``SketchProcess.start``; one that is never used is closed when the command
ends. Only the standard library is imported here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence

from ._early import catch_early_sigterm
from ._protocol import (
    default_sketch_processes,
    exit_without_teardown,
    pace_collector_for_batches,
    single_threaded_blas,
    small_input,
    spawn_worker,
)

# The replay command's options, as the CLI's parser defines them (a test keeps
# the two the same): those that take no value, and those that take one.
_REPLAY_FLAGS = frozenset({"-h", "--help", "-q", "--quiet", "--resume", "--no-progress"})
_REPLAY_OPTIONS = frozenset(
    {
        "--db", "--store", "--out", "--verdicts", "--rejects", "--format", "--id-field", "--text-field",
        "--time-field", "--threshold", "--shingle-size", "--num-perm", "--bands", "--rows", "--ttl",
        "--retweets", "--deletes", "--batch-size", "--sketch-processes", "--metrics", "--seed",
    }
)  # fmt: skip


_STREAM_COMMANDS = ("replay", "follow", "consume")


def run() -> None:
    """The ``streamfilter`` command: ``cli.main`` in a process of its own."""
    if sys.argv[1:2] and sys.argv[1] in _STREAM_COMMANDS:
        catch_early_sigterm()  # a stream command stops at its first batch (_early)
    single_threaded_blas(os.environ)  # before numpy is imported, here and in the worker
    prestarted = _prestart_worker(sys.argv[1:])
    from . import _workers
    from .cli import main

    if prestarted is not None:
        _workers.hand_over(*prestarted)
    pace_collector_for_batches()
    try:
        code = main()
    finally:
        _workers.close_unused()
    exit_without_teardown(code)


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


def _prestart_worker(argv: Sequence[str]) -> tuple[subprocess.Popen[bytes], socket.socket] | None:
    return spawn_worker() if _wants_worker(argv) else None
