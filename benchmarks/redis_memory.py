"""How much Redis memory an index takes per live post, for sizing a Redis index.

    python benchmarks/redis_memory.py benchmarks/out/stream.jsonl [--num-perm 32]

Starts a redis-server of its own on a free loopback port (no persistence),
replays the stream into it with ``streamfilter replay --store`` and ``--ttl 0``
(nothing expires, so every novel post is still there), and prints Redis's
``used_memory`` before and after, the records and band keys stored, and the
bytes per live post. Needs ``redis-server`` on PATH and the ``redis`` extra.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import redis


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def count(client: redis.Redis, pattern: str) -> int:
    return sum(1 for _ in client.scan_iter(match=pattern, count=10_000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream")
    parser.add_argument("--num-perm", default="32")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not on PATH (apt-get install redis-server)")
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", directory],
            stdout=subprocess.DEVNULL,
        )
        try:
            client = redis.Redis(port=port)
            for _ in range(100):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            before = int(client.info("memory")["used_memory"])
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "streamfilter", "replay", args.stream, "--out", "/dev/null"]
                + ["--store", f"redis://127.0.0.1:{port}/0", "--ttl", "0", "--num-perm", args.num_perm],
                check=True,
            )
            seconds = time.monotonic() - started
            after = int(client.info("memory")["used_memory"])
            posts, bands = count(client, "sf:p:*"), count(client, "sf:b:*")
            print(f"num_perm {args.num_perm}: {posts:,} posts recorded, {bands:,} band keys, {seconds:.1f} s")
            print(f"used_memory {before:,} B before, {after:,} B after: {(after - before) / posts:,.0f} B a live post")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
