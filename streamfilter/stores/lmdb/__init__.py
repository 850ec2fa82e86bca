"""The embedded default store: an LMDB environment on disk.

One concept a module:

- ``_store``: the environment, its transactions, the format and settings it pins;
- ``_batch``: a batch's look-ups and its run inside one write transaction;
- ``_runs``: the log-structured band index and how a run is searched;
- ``_merging``: which runs merge, and the merge thread;
- ``_caches``: decoded runs and key filters kept across transactions;
- ``_tuning``: the sizes at which the layout changes.

docs/design/lmdb.md describes the layout and why it is so.
"""

from ._store import LMDBStore
from ._tuning import LMDBTuning

__all__ = ["LMDBStore", "LMDBTuning"]
