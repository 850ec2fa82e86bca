"""What a band look-up costs inside Redis: ``each_entry`` of the store's scripts.

    pip install -e '.[redis,bench]'
    python benchmarks/redis_lookup.py

A batch on one Redis reads its band buckets in ``read_batch.lua`` and, when
other workers have recorded since, checks them again in ``commit.lua``; both
look up every band key of the batch with ``index.lua``'s ``each_entry``.
This times that function alone, in a script on a ``redis-server`` started
here: 1,024 band buckets of 200 entries each (an index of about 12,800
posts), then 20,000 band queries (a batch of 1,250 posts), one in ten of
them filed in its bucket. It prints the best of ``--rounds`` runs, in
microseconds a query, for the queries in the order a batch sends them and
sorted by bucket.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from streamfilter.stores.redis._scripts import script  # noqa: E402
from tests.redis_servers import RedisServer  # noqa: E402

BITS = 10  # a slice's first part: 1,024 buckets
ENTRIES = 200  # a bucket's entries
QUERIES = 20_000

LOOKUP = """
local hits = 0
each_entry('p', live_parts('p', -math.huge), ARGV[1], 8, function(q, s, bits, v) hits = hits + 1 end)
return hits
"""


def fill(client: redis.Redis, rng: random.Random) -> list[bytes]:
    """The buckets, as the store lays them out (``_layout``); the queries."""
    fields: dict[int, list[bytes]] = {}
    for bucket in range(1 << BITS):
        entries = []
        for n in range(ENTRIES):
            field = rng.getrandbits(32).to_bytes(4, "big")
            entries.append(field + (n << BITS | bucket).to_bytes(6, "big"))
            fields.setdefault(bucket, []).append(field)
        client.set(f"p:b:0:{bucket}", b"".join(entries))
    client.hset("p:slices", mapping={"b0": BITS, "n0": 1})
    queries = []
    for _ in range(QUERIES):
        bucket = rng.randrange(1 << BITS)
        filed = rng.random() < 0.1
        field = rng.choice(fields[bucket]) if filed else rng.getrandbits(32).to_bytes(4, "big")
        queries.append((bucket << (16 - BITS) | rng.getrandbits(16 - BITS)).to_bytes(2, "big") + field)
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    server = RedisServer(Path(tempfile.mkdtemp(prefix="sf-lookup-"))).start()
    try:
        client = redis.Redis.from_url(server.url)
        queries = fill(client, random.Random(1))
        # the index's functions, without commit.lua's own body
        lookup = client.script_load(script("commit").split("-- One Redis: record")[0] + LOOKUP)
        print(f"{1 << BITS} buckets of {ENTRIES} entries, {QUERIES:,} queries, best of {args.rounds}\n")
        print("| queries | hits | ms | us a query |\n|---|---|---|---|")
        for label, sent in (("as a batch sends them", queries), ("sorted by bucket", sorted(queries))):
            best, hits = float("inf"), 0
            for _ in range(args.rounds):
                started = time.perf_counter()
                hits = client.evalsha(lookup, 0, b"".join(sent))
                best = min(best, time.perf_counter() - started)
            print(f"| {label} | {hits:,} | {best * 1e3:.2f} | {best / QUERIES * 1e6:.3f} |")
        client.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
