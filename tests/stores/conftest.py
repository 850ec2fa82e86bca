"""The fixtures every store test shares: one store of each kind on the test's own index."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamfilter import LMDBStore, MemoryStore
from streamfilter.stores import BandStore
from streamfilter.stores.redis import RedisStore

from ..conftest import unique_prefix
from .test_conformance import settings


@pytest.fixture(params=["memory", "lmdb", "redis", "redis-cluster"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> Iterator[Callable[..., BandStore]]:
    opened: list[BandStore] = []
    url = ""
    if store_kind == "redis":
        url = unique_prefix(request.getfixturevalue("redis_server").url)
    elif store_kind == "redis-cluster":
        url = unique_prefix(request.getfixturevalue("redis_cluster").url)

    def make(ttl: float = 0, purge_limit: int = 1024, index: str = "", limit: int = 64) -> BandStore:
        """A store on the test's index, or on another one named ``index``."""
        store: BandStore
        if store_kind == "memory":
            store = MemoryStore()
        elif store_kind == "lmdb":
            store = LMDBStore(tmp_path / f"index{index}")
        else:
            store = RedisStore(url + index)
        store.open(settings(ttl, purge_limit, limit=limit))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
