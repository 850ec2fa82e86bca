"""Band stores: where the LSH index lives.

A store has one operation that matters, :meth:`BandStore.check_and_insert`:
for each sketch of a batch, in order, "is there a live post that shares a
band with this one and is similar enough? If not, record this one", all in
one transaction, so that two writers can never both let the same text through.
"""

from ._base import BandStore, IndexSettings, Match, Sketch
from .lmdb import LMDBStore
from .memory import MemoryStore
from .redis import RedisStore

__all__ = ["BandStore", "IndexSettings", "LMDBStore", "Match", "MemoryStore", "RedisStore", "Sketch"]
