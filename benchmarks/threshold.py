"""What moving --threshold does: precision, recall and speed on the labelled stream, and the S-curve.

    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl
    python benchmarks/threshold.py benchmarks/out/stream.jsonl benchmarks/out/labels.jsonl --png docs/images/threshold.png

Replays the whole stream through ``streamfilter replay`` at each threshold (the
LSH split each one derives, as a user gets it) and prints a Markdown table:
precision, recall, F1, posts/s and the split. With ``--png`` it draws two
charts side by side (needs the ``report`` extra, for vl-convert): P(candidate)
against similarity for the split of each threshold (the S-curve), and
precision and recall against the threshold.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamfilter import FilterConfig, candidate_probability

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def replay(stream: Path, labels: list[dict], threshold: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        verdicts = Path(work) / "verdicts.jsonl"
        command = [sys.executable, "-m", "streamfilter", "replay", str(stream), "--threshold", str(threshold)]
        started = time.perf_counter()
        subprocess.run([*command, "--verdicts", str(verdicts), "--out", "/dev/null", "-q"], check=True)
        seconds = time.perf_counter() - started
        flagged = [json.loads(line)["verdict"] in ("duplicate", "retweet") for line in verdicts.open()]
    tp = sum(f and label["duplicate"] for f, label in zip(flagged, labels, strict=True))
    fp = sum(f and not label["duplicate"] for f, label in zip(flagged, labels, strict=True))
    fn = sum(not f and label["duplicate"] for f, label in zip(flagged, labels, strict=True))
    precision, recall = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / max(precision + recall, 1e-9),
        "posts_per_s": len(labels) / seconds,
    }


def chart(rows: list[dict], path: Path) -> None:
    import vl_convert  # the report extra

    splits: dict[tuple[int, int], list[float]] = {}
    for row in rows:  # thresholds that derive the same split share one curve
        splits.setdefault((row["bands"], row["rows"]), []).append(row["threshold"])
    curve = [
        {"similarity": s / 100, "P(candidate)": candidate_probability(s / 100, bands, per_band),
         "split": f"{bands} × {per_band} (--threshold {', '.join(map(str, used))})"}
        for (bands, per_band), used in splits.items()
        for s in range(0, 101, 2)
    ]  # fmt: skip
    scores = [
        {"threshold": row["threshold"], "measure": measure, "value": row[measure]}
        for row in rows
        for measure in ("precision", "recall")
    ]
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "resolve": {"scale": {"color": "independent"}},
        "hconcat": [
            {
                "title": "P(candidate) of each threshold's LSH split",
                "data": {"values": curve},
                "mark": "line",
                "width": 320,
                "height": 220,
                "encoding": {
                    "x": {"field": "similarity", "type": "quantitative", "title": "Jaccard similarity of a pair"},
                    "y": {"field": "P(candidate)", "type": "quantitative"},
                    "color": {
                        "field": "split",
                        "type": "nominal",
                        "title": "bands × rows",
                        "legend": {"orient": "bottom", "direction": "vertical"},
                    },
                },
            },
            {
                "title": "Measured on the labelled stream",
                "data": {"values": scores},
                "mark": {"type": "line", "point": True},
                "width": 320,
                "height": 220,
                "encoding": {
                    "x": {"field": "threshold", "type": "quantitative", "title": "--threshold"},
                    "y": {"field": "value", "type": "quantitative", "scale": {"zero": False}, "title": None},
                    "color": {"field": "measure", "type": "nominal", "title": None, "legend": {"orient": "bottom"}},
                },
            },
        ],
    }
    path.write_bytes(vl_convert.vegalite_to_png(json.dumps(spec), scale=2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stream", type=Path)
    parser.add_argument("labels", type=Path)
    parser.add_argument("--png", type=Path, help="draw the S-curves and the measured trade here")
    args = parser.parse_args()
    labels = [json.loads(line) for line in args.labels.open()]
    rows = []
    print("| --threshold | LSH split | precision | recall | F1 | posts/s |\n|---|---|---|---|---|---|")
    for threshold in THRESHOLDS:
        config = FilterConfig(jaccard_threshold=threshold)
        row = {"threshold": threshold, "bands": config.bands, "rows": config.rows}
        row |= replay(args.stream, labels, threshold)
        rows.append(row)
        print(
            f"| {threshold} | {config.bands} × {config.rows} | {row['precision']:.4f} | {row['recall']:.4f} "
            f"| {row['f1']:.4f} | {row['posts_per_s']:,.0f} |",
            flush=True,
        )
    if args.png:
        chart(rows, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
