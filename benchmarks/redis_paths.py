"""The two ways to keep the rules atomic on one Redis node, side by side.

- **Lua** (what a single Redis runs): one script judges and records a whole
  batch on the server (``stores/redis/batch.lua``).
- **Cluster protocol** (what a Cluster runs, here on a one-node cluster that
  holds every slot): the rules run in Python, in steps of one script each
  (read, claim, append, recheck, pin, drop).

Both replay the labelled stream through ``streamfilter replay --store``, in
alternating order; the figures are medians. The verdicts must be the same.

    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/redis_paths.py benchmarks/out/stream.jsonl --rounds 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.redis_servers import RedisServer  # noqa: E402


def replay(stream: str, url: str, verdicts: Path) -> float:
    started = time.perf_counter()
    command = [sys.executable, "-m", "streamfilter", "replay", stream, "--store", url, "--verdicts", str(verdicts)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="streamfilter-redis-paths-"))
    single = RedisServer(scratch / "single").start()
    node = RedisServer(scratch / "node", cluster=True).start()
    try:
        node.cli("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        while "cluster_state:ok" not in node.cli("CLUSTER", "INFO"):
            time.sleep(0.1)
        paths = {"lua, single Redis": single.url, "cluster protocol, one node": node.url}
        seconds: dict[str, list[float]] = {name: [] for name in paths}
        for round_number in range(args.rounds):
            for name, url in paths.items():
                verdicts = scratch / f"{name.split(',')[0]}.jsonl"
                seconds[name].append(replay(args.stream, f"{url}?prefix=r{round_number}", verdicts))
                print(f"round {round_number + 1}: {name} {seconds[name][-1]:.2f} s", file=sys.stderr)
        same = (scratch / "lua.jsonl").read_bytes() == (scratch / "cluster protocol.jsonl").read_bytes()
        posts = sum(1 for _ in open(args.stream, "rb"))
        print(f"{posts} posts, {args.rounds} alternating rounds, medians; verdicts identical: {same}")
        print("| path | wall s | posts/s |")
        print("|---|---|---|")
        for name, values in seconds.items():
            median = statistics.median(values)
            print(f"| {name} | {median:.2f} | {posts / median:,.0f} |")
    finally:
        single.stop()
        node.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
