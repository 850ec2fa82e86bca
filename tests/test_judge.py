"""The batch loop around the judge: a store that must always begin again is reported, not spun on."""

from __future__ import annotations

import pytest

from streamfilter import MemoryStore, StoreError
from streamfilter._judge import run_batch
from streamfilter.stores._base import RetryBatch

from .stores.test_conformance import TEXT, settings, sketch


class _AlwaysChanged(MemoryStore):
    """A memory store whose every commit finds the index changed, as a shared
    index under a writer that never stops (or a hostile server) would say."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def begin(self):  # type: ignore[no-untyped-def]
        txn = super().begin()
        store = self

        class Changed(type(txn)):  # type: ignore[misc]
            def commit(self, progress):  # type: ignore[no-untyped-def]
                store.attempts += 1
                self.abort()
                raise RetryBatch

        txn.__class__ = Changed
        return txn


def test_a_batch_that_must_always_begin_again_fails_saying_so() -> None:
    store = _AlwaysChanged()
    store.open(settings())
    with pytest.raises(StoreError, match="had to begin again 100 times"):
        run_batch(store, [sketch("a", 1, TEXT)])
    assert store.attempts == 100
    # the store is left usable: nothing of the batch was recorded, and its lock is free
    assert store.post_count() == 0 and store._lock.acquire(blocking=False)
