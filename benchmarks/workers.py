"""N workers sharing one index: LMDB on one disk, Redis, and a 3-node Redis Cluster.

    pip install -e '.[redis,bench]'
    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/workers.py benchmarks/out/stream.jsonl benchmarks/out/labels.jsonl --workers 1 2 4

The stream is split into N partitions by post id (as a Kafka topic keyed by
id would be) and N ``streamfilter replay`` processes run at once, one per
partition, against one index. Reported per store and N: wall time of the
slowest worker, total posts/s, how many labelled clusters passed more than
once or never (TTL off: partitions reorder event time), and for Redis
the bytes per indexed post (``INFO`` used_memory growth, without the server's
per-command statistics and slow log, and the ``MEMORY USAGE`` of the keys,
both divided by the posts the index holds; for LMDB, the pages its index uses),
the keys per post, the CPU seconds the Redis server spent (on two
cores, N workers and their sketch processes share the machine with it),
and the Redis ceiling: the posts over the CPU seconds of the busiest Redis
process, the posts/s at which that process would fill a core of its own,
however many workers fed it.
The Redis servers are started here on loopback ports, in a temporary
directory, with the listpack limits the production guide gives.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import redis
import redis.cluster

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from soak import index_facts  # noqa: E402

from tests.redis_servers import RedisCluster, RedisServer  # noqa: E402

# the listpack limits docs/guides/production.md gives for the Redis store
PRODUCTION = ["--hash-max-listpack-entries", "1024", "--hash-max-listpack-value", "1024"]


def split(stream: Path, workers: int, directory: Path) -> list[Path]:
    parts = [directory / f"part{n}.jsonl" for n in range(workers)]
    handles = [path.open("wb") for path in parts]
    with stream.open("rb") as source:
        for line in source:
            post_id = str(json.loads(line).get("id_str") or json.loads(line).get("id"))
            handles[zlib.crc32(post_id.encode()) % workers].write(line)
    for handle in handles:
        handle.close()
    return parts


def run(parts: list[Path], where: list[str], directory: Path) -> tuple[float, list[Path]]:
    verdicts = [directory / f"verdicts{n}.jsonl" for n in range(len(parts))]
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamfilter",
                "replay",
                str(part),
                *where,
                "--ttl",
                "0",
                "--out",
                "/dev/null",
                "--verdicts",
                str(out),
                "--no-progress",
            ],
            stderr=subprocess.PIPE,
        )
        for part, out in zip(parts, verdicts, strict=True)
    ]
    for process in processes:
        _, stderr = process.communicate()
        if process.returncode != 0:
            raise SystemExit(stderr.decode())
    return time.perf_counter() - started, verdicts


def cluster_counts(verdicts: list[Path], labels: Path) -> tuple[int, int, int, int]:
    """(clusters, extra passes, clusters never passed, duplicates of a post that never passed).

    Partitions reorder the stream, so which copy of a cluster passes first is
    up to the race between workers; what must hold is that each cluster
    passes once. Extra passes are missed duplicates (or near-duplicate
    races). A cluster never passed happens when its posts matched a variant
    of another cluster that arrived first (arrival order decides this). A
    duplicate whose matched post never passed would be a lost post.
    """
    cluster_of = {}
    with labels.open(encoding="utf-8") as handle:
        for line in handle:
            label = json.loads(line)
            cluster_of[label["id"]] = label["cluster"]
    passes: dict[object, int] = dict.fromkeys(cluster_of.values(), 0)
    novel: set[str] = set()
    cited: list[str] = []
    for path in verdicts:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                verdict = json.loads(line)
                if verdict["verdict"] == "novel":
                    passes[cluster_of[verdict["id"]]] += 1
                    novel.add(verdict["id"])
                elif verdict["verdict"] == "duplicate":
                    cited.append(verdict["duplicate_of"])
    dangling = sum(1 for post_id in cited if post_id not in novel)
    return len(passes), sum(max(n - 1, 0) for n in passes.values()), sum(1 for n in passes.values() if n == 0), dangling


def redis_bytes(url: str, prefix: str, used_before: int, cluster: bool) -> tuple[int, float, float, float]:
    """(records, used_memory growth per record, MEMORY USAGE of the keys per
    record, keys per record). Records are the posts the index holds: the
    fields of its record hashes (``{prefix}:r:*``)."""
    client = redis.cluster.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=10000))
    record_keys = [key for key in keys if key.startswith(f"{prefix}:r:".encode())]
    pipe = client.pipeline(transaction=False)
    for key in record_keys:
        pipe.hlen(key)
    records = sum(pipe.execute())
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key)
    usage = sum(value or 0 for value in pipe.execute())
    client.close()
    grown = (used_memory(url, cluster) - used_before) / max(records, 1)
    return records, grown, usage / max(records, 1), len(keys) / max(records, 1)


def redis_cpu(url: str, cluster: bool) -> list[float]:
    """CPU seconds the server (or each of the cluster's primaries) has used so far."""
    with _primaries(url, cluster) as nodes:
        return [float(n.info("cpu")["used_cpu_user"]) + float(n.info("cpu")["used_cpu_sys"]) for n in nodes]


def used_memory(url: str, cluster: bool) -> int:
    """used_memory of the server, or summed over the cluster's primaries,
    without the server's own bookkeeping of the commands it ran: its
    per-command latency histograms (``latency-tracking``, about 0.8 MB a
    node once a run has used its commands) and its slow log. Neither grows
    with the index, so both are cleared before each reading
    (``CONFIG RESETSTAT``, ``SLOWLOG RESET``)."""
    with _primaries(url, cluster) as nodes:
        for node in nodes:
            node.config_resetstat()
            node.slowlog_reset()
        return sum(int(node.info("memory")["used_memory"]) for node in nodes)


@contextlib.contextmanager
def _primaries(url: str, cluster: bool) -> Iterator[list[redis.Redis]]:
    """A client for the server, or for each of the cluster's primaries."""
    if not cluster:
        single = redis.Redis.from_url(url)
        try:
            yield [single]
        finally:
            single.close()
        return
    client = redis.cluster.RedisCluster.from_url(url)
    try:
        yield [client.get_redis_connection(node) for node in client.get_primaries()]
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream", type=Path)
    parser.add_argument("labels", type=Path)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--stores", nargs="+", default=["lmdb", "redis", "redis-cluster"])
    parser.add_argument("--batch-size", type=int, default=None, help="passed to every worker (default: its own)")
    args = parser.parse_args()
    posts = sum(1 for _ in args.stream.open("rb"))
    scratch = Path(tempfile.mkdtemp(prefix="sf-workers-"))
    single = RedisServer(scratch / "redis", config=PRODUCTION).start()
    cluster = RedisCluster(scratch / "cluster", config=PRODUCTION).start()
    rows = []
    try:
        for workers in args.workers:
            parts = split(args.stream, workers, scratch)
            for store in args.stores:
                prefix = f"w{workers}"
                if store == "lmdb":
                    db = scratch / f"lmdb{workers}"
                    where = ["--db", str(db)]
                else:
                    url = single.url if store == "redis" else cluster.url
                    before = used_memory(url, store == "redis-cluster")
                    cpu_before = redis_cpu(url, store == "redis-cluster")
                    where = ["--store", f"{url}?prefix={prefix}"]
                if args.batch_size:
                    where += ["--batch-size", str(args.batch_size)]
                seconds, verdicts = run(parts, where, scratch)
                clusters, extra, lost, dangling = cluster_counts(verdicts, args.labels)
                row = {
                    "store": store,
                    "workers": workers,
                    "seconds": seconds,
                    "posts_per_s": posts / seconds,
                    "clusters": clusters,
                    "extra": extra,
                    "lost": lost,
                    "dangling": dangling,
                }
                if store != "lmdb":
                    records, grown, usage, keys = redis_bytes(url, prefix, before, store == "redis-cluster")
                    row.update(records=records, used_memory_per_post=grown, memory_usage_per_post=usage)
                    cpu_after = redis_cpu(url, store == "redis-cluster")
                    cpu = [now - then for now, then in zip(cpu_after, cpu_before, strict=True)]
                    # posts/s once the busiest Redis process had a core to itself and nothing else to wait for
                    row.update(keys_per_post=keys, redis_cpu_s=sum(cpu), server_ceiling=posts / max(max(cpu), 1e-9))
                else:
                    _, used_mb, records = index_facts(db)
                    row.update(records=records, used_memory_per_post=used_mb * 2**20 / max(records, 1))
                    shutil.rmtree(db)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        single.stop()
        cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{posts} posts; each worker is one process (python -m streamfilter replay), all started at once\n")
    print(
        "| store | workers | wall s | posts/s | clusters passed twice | clusters with no post passed "
        "| duplicates of a post never passed | bytes/post (used_memory) | bytes/post (MEMORY USAGE) "
        "| keys/post | Redis CPU s | Redis ceiling posts/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "keys_per_post" in row:
            memory = (
                f"{row['used_memory_per_post']:.0f}",
                f"{row['memory_usage_per_post']:.0f}",
                f"{row['keys_per_post']:.2f}",
                f"{row['redis_cpu_s']:.2f}",
                f"{row['server_ceiling']:,.0f}",
            )
        else:  # LMDB: the pages its index uses, a post
            memory = (f"{row['used_memory_per_post']:.0f} (pages)", "-", "-", "-", "-")
        print(
            f"| {row['store']} | {row['workers']} | {row['seconds']:.2f} | {row['posts_per_s']:,.0f} | "
            f"{row['extra']} of {row['clusters']} | {row['lost']} | {row['dangling']} | " + " | ".join(memory) + " |"
        )


if __name__ == "__main__":
    main()
