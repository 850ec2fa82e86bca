"""The sync API's cost a record: one is_novel call each, against one check_many.

    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/sync_calls.py benchmarks/out/stream.jsonl --records 20000

Each way runs on a new LMDB index, durable (the default: every commit synced
to disk) and with ``durable=False``; both ways give the same verdicts, which
the script checks by counting the novel posts.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from streamfilter import FilterConfig, StreamFilter
from streamfilter.stores.lmdb import LMDBStore


def timed(records: list[object], way: str, durable: bool) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as directory:
        store = LMDBStore(Path(directory) / "index", durable=durable)
        with StreamFilter(FilterConfig(seed=1), store=store) as sf:
            started = time.perf_counter()
            if way == "check_many":
                novel = sum(verdict.is_novel for verdict in sf.check_many(records))
            else:
                novel = sum(sf.is_novel(record) for record in records)
            return time.perf_counter() - started, novel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stream", type=Path)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    with args.stream.open("rb") as lines:
        records = [json.loads(line) for _, line in zip(range(args.records), lines, strict=False)]
    print(f"{len(records)} records")
    print("| commits | check_many s | is_novel loop s | loop ÷ check_many | novel |")
    print("|---|---|---|---|---|")
    for durable in (True, False):
        batch, batch_novel = timed(records, "check_many", durable)
        loop, loop_novel = timed(records, "is_novel", durable)
        assert batch_novel == loop_novel, (batch_novel, loop_novel)
        label = "durable" if durable else "durable=False"
        print(f"| {label} | {batch:.2f} | {loop:.2f} | {loop / batch:.1f}× | {batch_novel} |")


if __name__ == "__main__":
    main()
