"""Grid search of the settings that shape quality, on the labelled stream.

    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/tune.py benchmarks/out/stream.jsonl benchmarks/out/labels.jsonl

Each setting replays the whole stream through the library (sync API, LMDB
index in a temporary directory) and prints precision, recall, F1, the worst
mutation kind, posts/s and candidates verified per post.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from streamfilter import FilterConfig, LMDBStore, StreamFilter  # noqa: E402


def run(config: FilterConfig, lines: list[bytes], labels: list[dict]) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory() as directory:
        with StreamFilter(config, store=LMDBStore(directory, durable=False)) as sf:
            started = time.perf_counter()
            verdicts = []
            for start in range(0, len(lines), config.batch_size):
                verdicts.extend(sf.check_many(lines[start : start + config.batch_size]))
            seconds = time.perf_counter() - started
    tp = fp = fn = 0
    total: Counter[str] = Counter()
    hit: Counter[str] = Counter()
    for verdict, label in zip(verdicts, labels, strict=True):
        flagged = verdict.kind.value in ("duplicate", "retweet")
        if label["duplicate"]:
            total[label["kind"]] += 1
            hit[label["kind"]] += flagged
            tp += flagged
            fn += not flagged
        else:
            fp += flagged
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn)
    worst = min(total, key=lambda kind: hit[kind] / total[kind])
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall),
        "worst": f"{worst} {hit[worst] / total[worst]:.3f}",
        "posts_per_s": len(lines) / seconds,
    }


def main() -> None:
    lines = Path(sys.argv[1]).read_bytes().splitlines()
    labels = [json.loads(line) for line in Path(sys.argv[2]).read_text().splitlines()]
    grid = itertools.product((1, 2, 3), (0.4, 0.5, 0.6), (32, 64))
    print(
        f"{'k':>2} {'thr':>4} {'perm':>4} {'b':>3}x{'r':<2} {'prec':>7} {'recall':>7} {'F1':>7}  {'worst kind':<22} {'posts/s':>8}"
    )
    for shingle_size, threshold, num_perm in grid:
        config = FilterConfig(
            jaccard_threshold=threshold, shingle_size=shingle_size, num_perm=num_perm, max_miss_rate=0.02
        )
        result = run(config, lines, labels)
        print(
            f"{shingle_size:>2} {threshold:>4} {num_perm:>4} {config.bands:>3}x{config.rows:<2} {result['precision']:>7.4f} "
            f"{result['recall']:>7.4f} {result['f1']:>7.4f}  {result['worst']:<22} {result['posts_per_s']:>8.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
