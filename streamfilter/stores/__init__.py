"""Band stores: where the LSH index lives.

A store keeps the index and offers one thing: an index transaction
(:meth:`BandStore.begin`) in which the one batch judge (``_judge``) asks, for
each sketch of a batch in order, "is there a live post that shares a band
with this one and is similar enough? If not, record this one", so that two
writers can never both let the same text through.

A batch is judged as columns (``Sketches``) and answered as columns
(``Matches``); ``check_and_insert`` also takes a list of ``Sketch`` and its
answer reads as a list of ``Match`` or None.

The stores are imported on first use (PEP 562): a sketch worker needs
``Sketches`` and nothing of LMDB or Redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names
from ._base import BandStore, IndexSettings, Match, Matches, Sketch, Sketches

if TYPE_CHECKING:
    from .lmdb import LMDBStore
    from .memory import MemoryStore
    from .redis import RedisStore

_HOMES = {"LMDBStore": ".lmdb", "MemoryStore": ".memory", "RedisStore": ".redis"}

__all__ = [
    "BandStore",
    "IndexSettings",
    "LMDBStore",
    "Match",
    "Matches",
    "MemoryStore",
    "RedisStore",
    "Sketch",
    "Sketches",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
