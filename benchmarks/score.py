"""Score a --verdicts file against the labels of make_stream.py.

    python benchmarks/score.py benchmarks/out/labels.jsonl verdicts.jsonl

A post counts as flagged when its verdict is duplicate or retweet.
Prints precision, recall, F1 and recall per mutation kind.
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def score(labels_path: str, verdicts_path: str) -> dict[str, object]:
    labels = {}
    with open(labels_path, encoding="utf-8") as handle:
        for line in handle:
            label = json.loads(line)
            labels[label["id"]] = label
    flagged: dict[str, bool] = {}
    with open(verdicts_path, encoding="utf-8") as handle:
        for line in handle:
            verdict = json.loads(line)
            flagged[verdict["id"]] = verdict["verdict"] in ("duplicate", "retweet")
    tp = fp = fn = 0
    per_kind_total: Counter[str] = Counter()
    per_kind_hit: Counter[str] = Counter()
    false_positive_kinds: Counter[str] = Counter()
    for post_id, label in labels.items():
        predicted = flagged.get(post_id, False)
        if label["duplicate"]:
            per_kind_total[label["kind"]] += 1
            if predicted:
                tp += 1
                per_kind_hit[label["kind"]] += 1
            else:
                fn += 1
        elif predicted:
            fp += 1
            false_positive_kinds[label["kind"]] += 1
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    per_kind = {kind: per_kind_hit[kind] / total for kind, total in sorted(per_kind_total.items())}
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "per_kind": per_kind,
        "fp": fp,
        "fn": fn,
        "tp": tp,
    }


def main() -> None:
    result = score(sys.argv[1], sys.argv[2])
    print(
        f"precision {result['precision']:.4f}  recall {result['recall']:.4f}  F1 {result['f1']:.4f}  (tp {result['tp']}, fp {result['fp']}, fn {result['fn']})"
    )
    for kind, recall in result["per_kind"].items():  # type: ignore[union-attr]
        print(f"  {kind:<16} recall {recall:.4f}")


if __name__ == "__main__":
    main()
