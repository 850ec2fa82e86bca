"""The sync API's cost a record: one is_novel call each, against one check_many.

    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/sync_calls.py benchmarks/out/stream.jsonl --records 20000

Each way runs on a new LMDB index, durable (every commit synced to disk):
``check_many`` of every record in one call; ``is_novel`` in a loop, its calls
sharing a group transaction that commits within ``commit_within`` seconds
(0.1, the default); and the loop with ``commit_within=0``, a durable commit
a call. Every way gives the same verdicts, which the script checks by
counting the novel posts.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from streamfilter import FilterConfig, StreamFilter

WAYS = {
    "check_many, one call": ("check_many", 0.1),
    "is_novel loop (commit_within=0.1, the default)": ("is_novel", 0.1),
    "is_novel loop, commit_within=0": ("is_novel", 0.0),
}


def timed(records: list[object], way: str, commit_within: float) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as directory:
        with StreamFilter(FilterConfig(seed=1), path=Path(directory) / "index", commit_within=commit_within) as sf:
            started = time.perf_counter()
            if way == "check_many":
                novel = sum(verdict.is_novel for verdict in sf.check_many(records))
            else:
                novel = sum(sf.is_novel(record) for record in records)
                sf.flush()  # every verdict durable, as check_many's are when it returns
            return time.perf_counter() - started, novel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stream", type=Path)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    with args.stream.open("rb") as lines:
        records = [json.loads(line) for _, line in zip(range(args.records), lines, strict=False)]
    print(f"{len(records)} records")
    print("| way | seconds | µs a record | ÷ check_many | novel |")
    print("|---|---|---|---|---|")
    batch = None
    for label, (way, commit_within) in WAYS.items():
        seconds, novel = timed(records, way, commit_within)
        batch = batch or (seconds, novel)
        assert novel == batch[1], (label, novel, batch[1])
        per_record = seconds / len(records) * 1e6
        print(f"| {label} | {seconds:.2f} | {per_record:.0f} | {seconds / batch[0]:.1f}× | {novel} |")


if __name__ == "__main__":
    main()
