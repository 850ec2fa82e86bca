"""Growing the LMDB map, kept apart from this process's read transactions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MapGuard"]


class MapGuard:
    """Keeps this process's read transactions and the map's growth apart.

    LMDB lets a process resize its map only while no transaction of that
    process is open (py-lmdb also invalidates the open ones). Write
    transactions are kept apart by the store's lock; read transactions,
    such as the merge thread's, by this: growth waits for the open ones
    to end, and new ones wait for growth to end.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._growing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            while self._growing:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextmanager
    def growing(self) -> Iterator[None]:
        with self._condition:
            self._growing = True
            while self._readers:
                self._condition.wait()
        try:
            yield
        finally:
            with self._condition:
                self._growing = False
                self._condition.notify_all()
