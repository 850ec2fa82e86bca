"""Many workers on one Redis stream: `streamfilter consume` against one `replay`.

    python benchmarks/consume.py benchmarks/out/stream.jsonl --workers 1 2 4

Starts a redis-server of its own on a free loopback port, and for each
worker count: puts the stream's lines in a fresh Redis stream, runs that many
`streamfilter consume` processes of one group against a shared Redis index,
and times them from start until every entry is acknowledged. A `replay
--store` of the same file into its own index is the baseline. Prints posts/s
and the novel count of each run (the consumers together must pass as many
posts as the replay, whatever the order they judged them in).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
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


def replay(stream: str, url: str) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "streamfilter", "replay", stream, "--store", f"{url}?prefix=replay", "--out", "-"],
        capture_output=True,
        check=True,
    )
    return time.monotonic() - started, done.stdout.count(b"\n")


def consume(lines: list[bytes], url: str, client: redis.Redis, workers: int, run: int) -> tuple[float, int]:
    name = f"bench{run}"
    for start in range(0, len(lines), 5000):
        pipe = client.pipeline(transaction=False)
        for line in lines[start : start + 5000]:
            pipe.xadd(name, {"data": line})
        pipe.execute()
    command = [sys.executable, "-m", "streamfilter", "consume", f"{url}?stream={name}&group=g"]
    command += ["--store", f"{url}?prefix={name}", "--out-stream", f"{name}:novel", "--stats-interval", "0"]
    started = time.monotonic()
    processes = [subprocess.Popen([*command, "--consumer", f"w{n}"], stderr=subprocess.DEVNULL) for n in range(workers)]
    try:
        while True:
            groups = client.xinfo_groups(name)
            if groups and groups[0]["lag"] == 0 and groups[0]["pending"] == 0:
                break
            time.sleep(0.02)
        seconds = time.monotonic() - started
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(60)
    return seconds, int(client.xlen(f"{name}:novel"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not on PATH (apt-get install redis-server)")
    with open(args.stream, "rb") as handle:
        lines = [line for line in handle.read().splitlines() if line]
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
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
            print(f"{len(lines):,} posts; {os.cpu_count()} cores")
            seconds, novel = replay(args.stream, url)
            print(f"replay --store        {seconds:6.2f} s  {len(lines) / seconds:8,.0f} posts/s  {novel:,} novel")
            for run, workers in enumerate(args.workers):
                seconds, novel = consume(lines, url, client, workers, run)
                print(
                    f"consume x {workers:<2}          {seconds:6.2f} s  {len(lines) / seconds:8,.0f} posts/s  "
                    f"{novel:,} novel"
                )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
