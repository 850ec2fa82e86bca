"""Soak: a long stream with a short TTL through the real CLI; RSS and index size over time.

    python benchmarks/soak.py --posts 2000000 --ttl 10m
    python benchmarks/soak.py --posts 10000000 --ttl 10m --every 1000000   # the 10 M scale run

Generates posts on the fly (nothing is held in memory) and pipes them into
``streamfilter replay - --db DIR --ttl TTL``. Event time advances one second
per 100 posts, so a 10-minute TTL keeps about 60,000 posts live. A third of
the posts copy a recent one. Every --every posts it prints the replay
process's resident memory (its own, its sketch workers', and the index pages
it has mapped), the
LMDB file size, the pages the index uses, and the posts in the
index: with purging keeping pace, all of them level off. It also prints the
throughput of each interval, and at the end the last interval's over the
first's.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import lmdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from streamfilter import parse_duration  # noqa: E402


def rss_mb(pid: int) -> tuple[float, float]:
    """(anonymous, file-backed) resident MB: the process's own memory, and the
    pages of the mapped LMDB file it has touched (page cache the kernel can reclaim)."""
    found = {"RssAnon:": 0.0, "RssFile:": 0.0}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name = line.split(":")[0] + ":"
        if name in found:
            found[name] = int(line.split()[1]) / 1024
    return found["RssAnon:"], found["RssFile:"]


def workers_anon_mb(pid: int) -> float:
    """Anonymous resident MB of the replay's sketch worker processes (its children)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    total = 0.0
    for child in children.read_text().split() if children.exists() else []:
        try:
            total += rss_mb(int(child))[0]
        except FileNotFoundError:
            pass  # a worker that just exited
    return total


def index_bytes_in_use(env: lmdb.Environment, txn: lmdb.Transaction) -> int:
    """Bytes of the pages the index's sub-databases use (the file also holds free pages)."""
    pages = 0
    for stat in [env.stat()] + [
        txn.stat(env.open_db(name, txn=txn, create=False)) for name in (b"posts", b"runs", b"meta")
    ]:
        pages += stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
    return pages * env.stat()["psize"]


def index_facts(db: Path) -> tuple[float, float, int]:
    env = lmdb.open(str(db), readonly=True, lock=False, max_dbs=4)
    try:
        posts = env.open_db(b"posts", create=False)
        with env.begin() as txn:
            count = txn.stat(posts)["entries"]
            used = index_bytes_in_use(env, txn)
    finally:
        env.close()
    return (db / "data.mdb").stat().st_size / 2**20, used / 2**20, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--posts", type=int, default=2_000_000)
    parser.add_argument("--ttl", default="10m")
    parser.add_argument("--every", type=int, default=200_000)
    args = parser.parse_args()
    ttl = parse_duration(args.ttl)
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(20000)]
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "index"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamfilter",
                "replay",
                "-",
                "--db",
                str(db),
                "--ttl",
                f"{ttl:.0f}s",
                "--out",
                "/dev/null",
            ],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdin is not None
        written = [0]

        def feed() -> None:
            recent: deque[str] = deque(maxlen=5000)
            start = 1_600_000_000
            for i in range(args.posts):
                if recent and rng.random() < 0.33:
                    text = "@copy " + rng.choice(recent)
                else:
                    text = " ".join(rng.choices(vocabulary, k=rng.randint(6, 20)))
                    recent.append(text)
                line = json.dumps({"id": str(i), "text": text, "created_at": start + i // 100}) + "\n"
                process.stdin.write(line.encode())  # type: ignore[union-attr]
                written[0] = i + 1
            process.stdin.close()  # type: ignore[union-attr]

        feeder = threading.Thread(target=feed, daemon=True)
        started = time.perf_counter()
        feeder.start()
        print(
            f"{'posts sent':>11} {'seconds':>8} {'posts/s':>8} {'anon MB':>8} {'workers MB':>10} {'mapped MB':>9} "
            f"{'file MB':>8} "
            f"{'used MB':>8} {'indexed':>9}",
            flush=True,
        )
        next_report = args.every
        rates: list[float] = []
        last = (0, started)
        while process.poll() is None:
            time.sleep(0.2)
            if written[0] >= next_report and db.exists():
                now, sent = time.perf_counter(), written[0]
                rates.append((sent - last[0]) / (now - last[1]))
                last = (sent, now)
                file_mb, used_mb, count = index_facts(db)
                anon_mb, mapped_mb = rss_mb(process.pid)
                workers_mb = workers_anon_mb(process.pid)
                print(
                    f"{sent:>11,} {now - started:>8.0f} {rates[-1]:>8,.0f} {anon_mb:>8.0f} {workers_mb:>10.0f} "
                    f"{mapped_mb:>9.0f} "
                    f"{file_mb:>8.1f} {used_mb:>8.1f} {count:>9,}",
                    flush=True,
                )
                next_report += args.every
        feeder.join()
        stderr = process.stderr.read().decode() if process.stderr else ""
        print(stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {process.returncode}")
        if len(rates) >= 2:
            print(f"throughput of the last interval / the first: {rates[-1] / rates[0]:.2f}")


if __name__ == "__main__":
    main()
