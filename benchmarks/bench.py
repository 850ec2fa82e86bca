"""streamfilter against its peers on one labelled stream, whole processes, side by side.

    pip install -e '.[bench]'
    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/bench.py benchmarks/out/stream.jsonl benchmarks/out/labels.jsonl --rounds 3

Each round runs every tool once, in alternating order, as its own process
(interpreter start-up included), and times it from outside. Reported: the
median wall time, CPU time (streamfilter's includes its sketch worker
processes), posts/s, the ratio of streamfilter's throughput to each
peer's, peak RSS (from wait4), index bytes per indexed post, and the quality
scores.

Every tool runs once untimed before the rounds, and every process gets
Python's bytecode cache: the peers, installed by pip, have theirs compiled at
install, and streamfilter, run from a checkout, writes its own on that first
run. An environment with PYTHONDONTWRITEBYTECODE set (as some sandboxes and
containers have) would otherwise make streamfilter compile its modules from
source in every timed run, a cost no installed copy pays: small here (7
alternating replays each way, medians 1.06 s without caches, 1.03 s with).

Index bytes: for streamfilter, the pages its sub-databases use, and in
brackets the file up to its last page, which also holds pages that merges
freed and later batches reuse; for datasketch, its pickled index; rensa keeps
its index in Rust memory, so only RSS speaks for it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lmdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from score import score  # noqa: E402
from soak import index_bytes_in_use  # noqa: E402

TOOLS = ["streamfilter", "rensa", "datasketch-tuned", "datasketch-seed"]


def command(tool: str, stream: str, verdicts: str, db: str) -> list[str]:
    if tool == "streamfilter":
        return [
            sys.executable,
            "-m",
            "streamfilter",
            "replay",
            stream,
            "--db",
            db,
            "--verdicts",
            verdicts,
            "--out",
            os.devnull,
        ]
    return [sys.executable, str(HERE / "peers.py"), tool, stream, verdicts]


# bytecode caches on for every tool alike (see the module's docstring)
CHILD_ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def run_once(tool: str, stream: str, workdir: Path) -> dict[str, object]:
    """One whole-process run of ``tool`` in a new directory ``workdir``."""
    workdir.mkdir()
    verdicts = str(workdir / f"{tool}.verdicts.jsonl")
    db = workdir / f"{tool}.lmdb"
    started = time.perf_counter()
    process = subprocess.Popen(
        command(tool, stream, verdicts, str(db)), stderr=subprocess.PIPE, text=True, env=CHILD_ENVIRONMENT
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    stderr = process.stderr.read() if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{tool} failed: {stderr}")
    index_bytes: float | None = None
    file_bytes: float | None = None
    indexed = None
    if tool == "streamfilter":
        env = lmdb.open(str(db), readonly=True, lock=False, max_dbs=4)
        posts = env.open_db(b"posts", create=False)
        with env.begin() as txn:
            indexed = txn.stat(posts)["entries"]
            index_bytes = index_bytes_in_use(env, txn)
        file_bytes = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        env.close()
    else:
        for line in stderr.splitlines():
            if line.startswith("indexed"):
                parts = line.split()
                indexed = int(parts[1])
                index_bytes = None if parts[3] == "n/a" else float(parts[3])
    return {
        "seconds": seconds,
        # wait4 counts the process and the children it waited for (streamfilter's
        # sketch workers): CPU is their sum, peak RSS the largest one of them
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "bytes_per_post": None if index_bytes is None or not indexed else index_bytes / indexed,
        "file_bytes_per_post": None if file_bytes is None or not indexed else file_bytes / indexed,
        "verdicts": verdicts,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stream")
    parser.add_argument("labels")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    tools = args.tools.split(",")
    posts = sum(1 for _ in open(args.stream, "rb"))
    runs: dict[str, list[dict[str, object]]] = {tool: [] for tool in tools}
    with tempfile.TemporaryDirectory() as directory:
        for tool in tools:  # untimed: writes bytecode caches, reads the stream into the page cache
            run_once(tool, args.stream, Path(directory) / f"{tool}-warm-up")
        for round_ in range(args.rounds):
            order = tools if round_ % 2 == 0 else list(reversed(tools))
            for tool in order:
                runs[tool].append(run_once(tool, args.stream, Path(directory) / f"{tool}-{round_}"))
                print(
                    f"round {round_ + 1}: {tool} {runs[tool][-1]['seconds']:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
        quality = {tool: score(args.labels, str(runs[tool][-1]["verdicts"])) for tool in tools}
    median = {tool: statistics.median(float(r["seconds"]) for r in runs[tool]) for tool in tools}
    ours = posts / median["streamfilter"] if "streamfilter" in median else None
    print(
        f"{posts} posts, one untimed warm-up run each, then {args.rounds} alternating rounds, medians; "
        f"CPU: {os.cpu_count()} cores"
    )
    print(
        "| tool | precision | recall | F1 | worst kind | wall s | CPU s | posts/s | streamfilter ÷ tool "
        "| peak RSS MB | index B/post |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tool in tools:
        q = quality[tool]
        per_kind: dict[str, float] = q["per_kind"]  # type: ignore[assignment]
        worst = min(per_kind, key=per_kind.__getitem__, default="-")
        rate = posts / median[tool]
        ratio = f"{ours / rate:.2f}×" if ours else "-"
        bytes_per_post = runs[tool][-1]["bytes_per_post"]
        size = f"{bytes_per_post:.0f}" if isinstance(bytes_per_post, float) else "n/a"
        file_size = runs[tool][-1].get("file_bytes_per_post")
        if isinstance(file_size, float):
            size += f" (file {file_size:.0f})"
        rss = statistics.median(float(r["rss_mb"]) for r in runs[tool])
        cpu = statistics.median(float(r["cpu_seconds"]) for r in runs[tool])
        print(
            f"| {tool} | {q['precision']:.4f} | {q['recall']:.4f} | {q['f1']:.4f} | {worst} {per_kind.get(worst, 1.0):.3f} "
            f"| {median[tool]:.2f} | {cpu:.2f} | {rate:,.0f} | {ratio} | {rss:.0f} | {size} |"
        )


if __name__ == "__main__":
    main()
