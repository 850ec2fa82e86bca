"""The child side of a sketch worker process (``_workers`` is the parent's).

A worker imports what sketching needs (``_engine``: numpy, the normaliser,
the adapters) as soon as it starts, while its parent imports the rest, and
nothing of the parent's side (anyio, the stores), so it is ready sooner.

The protocol: frames of an 8-byte little-endian length and a body
(``_protocol.frame``: numpy arrays as out-of-band buffers, then a pickle). The
first frame to the child is the Sketcher; the child answers ``ready``. Each
later frame is a list of (line number, raw line) and the answer is
``("ok", wire)`` (``Sketcher.prepare_wire``) or ``("error", exception)``.
"""

from __future__ import annotations

import signal
import socket
from typing import IO, NoReturn

from ._engine import Sketcher
from ._normalize import load_tables
from ._protocol import (
    FRAME_BYTES,
    FRAME_HEADER,
    exit_without_teardown,
    frame,
    from_frame,
    pace_collector_for_batches,
)

__all__ = ["serve_socket"]


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(FRAME_HEADER.size)
    if len(header) < FRAME_HEADER.size:
        return None
    (length,) = FRAME_HEADER.unpack(header)
    payload = stream.read(length)
    return payload if len(payload) == length else None


def _write_frame(stream: IO[bytes], whole: bytes) -> None:
    stream.write(whole)
    stream.flush()


def _serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    # What the first batch would build, built while the parent is still
    # importing and opening its index (a worker starts first): the emoji
    # tables, and numpy's generators, which a Sketcher's MinHasher uses.
    # Not the look-alikes: built here, they put off the worker's first
    # answer on every stream, also those without a look-alike, and a batch
    # builds them when its first look-alike needs them.
    load_tables(lookalikes=False)
    import numpy.random  # noqa: F401

    try:
        body = _read_frame(requests)
        if body is None:
            return
        sketcher: Sketcher = from_frame(body)
        _write_frame(answers, frame(("ready", None)))
        while (body := _read_frame(requests)) is not None:
            records = from_frame(body)
            try:
                answer = frame(("ok", sketcher.prepare_wire(records)))
            except Exception as exc:  # noqa: BLE001 - the parent raises it as its own
                answer = frame(("error", exc), memo=True)
            _write_frame(answers, answer)
    except (BrokenPipeError, ConnectionResetError):
        return  # the parent is gone (it finished early, or was killed): nobody to answer


def serve_socket(descriptor: int) -> NoReturn:
    """A worker's entry point (``_protocol.spawn_worker``): frames on a socket
    (one end of a socketpair) until the parent closes its end; then the
    process ends, without the interpreter's teardown, which the parent would
    wait for."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    connection = socket.socket(fileno=descriptor)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):  # room for a whole frame, as with pipes
        try:
            connection.setsockopt(socket.SOL_SOCKET, option, FRAME_BYTES)
        except OSError:
            pass
    requests = connection.makefile("rb")
    answers = connection.makefile("wb")
    pace_collector_for_batches()
    _serve(requests, answers)
    exit_without_teardown(0)
