"""Arrival-to-verdict latency in streaming use.

    python benchmarks/latency.py --rate 5000 --seconds 20

An async source offers posts at a steady rate (5,000/s is the average load
of the whole Twitter firehose), each arriving at its scheduled time; the
consumer runs ``async for verdict in sf.judge(source)`` against an LMDB
index in a temporary directory and records when each verdict came out.
Prints p50, p99 and max of verdict time minus scheduled arrival time, and
how far the source fell behind its schedule (backpressure; already part of
the latency).

``--max-merged-entries`` sets ``LMDBTuning.max_merged_entries``, the
size at which runs stop merging, and with it the largest run the merge
thread writes under the store's lock (docs/benchmarks.md, "Streaming
latency").

``--pace-collector`` does in this process what the ``streamfilter`` command
does in its own: Python's cyclic collector is paced for batches
(``gc.freeze()`` once the filter is open, and ``gc.set_threshold(50_000, 20,
100)``), so a full collection no longer stalls a batch for tens of ms. A
library leaves the collector to its caller; a caller that streams for
latency can pace it the same way.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from streamfilter import FilterConfig, LMDBStore, StreamFilter  # noqa: E402
from streamfilter.stores.lmdb import LMDBTuning  # noqa: E402


def texts(seed: int = 5) -> Iterator[str]:
    """The benchmark's posts, endlessly: 6 to 20 words of a 20,000-word
    vocabulary, and 30% copies of one of the last 1,000 novel texts under
    a new @mention."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(20000)]
    recent: list[str] = []
    while True:
        if recent and rng.random() < 0.3:
            yield "@copy " + rng.choice(recent)
        else:
            text = " ".join(rng.choices(vocabulary, k=rng.randint(6, 20)))
            recent = (recent + [text])[-1000:]
            yield text


async def run(rate: float, seconds: float, durable: bool, pace_collector: bool, tuning: LMDBTuning) -> None:
    arrivals: dict[str, float] = {}
    total = int(rate * seconds)
    lag = [0.0]

    async def source():  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        made = texts()
        for i in range(total):
            due = start + i / rate
            now = time.perf_counter()
            if due > now:
                await anyio.sleep(due - now)
            else:
                lag[0] = max(lag[0], now - due)
            text = next(made)
            # A post arrives when it is due, even if this loop was too busy
            # to take it then (it would wait in a socket buffer): latency
            # counts from the schedule, so a source held back shows in it.
            arrivals[str(i)] = due
            yield {"id": str(i), "text": text}

    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        async with StreamFilter(FilterConfig(), store=LMDBStore(directory, durable=durable, tuning=tuning)) as sf:
            if pace_collector:
                gc.freeze()
                gc.set_threshold(50_000, 20, 100)
            async for verdict in sf.judge(source()):
                latencies.append(time.perf_counter() - arrivals.pop(verdict.post_id))
    latencies.sort()

    def at(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    print(
        f"rate {rate:.0f}/s for {seconds:.0f} s, durable={durable}: "
        f"{len(latencies)} verdicts; latency p50 {at(0.5):.2f} ms, p99 {at(0.99):.2f} ms, max {at(1.0):.2f} ms; "
        f"source fell behind by at most {lag[0] * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=5000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--no-fsync", action="store_true", help="LMDBStore(durable=False)")
    parser.add_argument(
        "--max-merged-entries", type=int, default=LMDBTuning().max_merged_entries, help="LMDBTuning.max_merged_entries"
    )
    parser.add_argument("--pace-collector", action="store_true", help="pace Python's cyclic GC as the command does")
    args = parser.parse_args()
    tuning = LMDBTuning(max_merged_entries=args.max_merged_entries)
    anyio.run(run, args.rate, args.seconds, not args.no_fsync, args.pace_collector, tuning)


if __name__ == "__main__":
    main()
