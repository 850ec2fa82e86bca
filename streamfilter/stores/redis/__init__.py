"""The Redis store: one index that many workers share, on Redis or a Redis Cluster.

- ``_store``: the store, its URL, connection, retries, slices;
- ``_layout``: the keys: time slices of band buckets and record hashes;
- ``_recording``: a batch's transaction: its reads, and its recording on one node;
- ``_recording``: recording a batch on a Cluster, in steps, one script per node;
- ``_scripts`` and the ``.lua`` files: the server-side scripts.

docs/design/redis.md describes the protocol.
"""

from ._store import RedisStore

__all__ = ["RedisStore"]
