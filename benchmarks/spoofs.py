"""Copies a reader cannot tell apart: recall on spoofs, precision on everything else.

    python benchmarks/spoofs.py                       # this checkout
    PYTHONPATH=../old-checkout python benchmarks/spoofs.py   # another version, for a before/after

Takes 4,000 distinct airline tweets (../shared/data/airline, read in place: its
licence keeps it out of the repo) and, for every other one, adds one copy a
reader cannot tell from it: letters swapped for look-alikes from Armenian,
Latin extensions, Cyrillic extensions, Cherokee or mathematical letters,
digits of other scripts standing in for "o", or the text written backwards
after a right-to-left override (it displays as the original). The stream goes
through ``streamfilter replay``; a copy flagged duplicate is a hit, and any
other post flagged is a false positive. Prints recall per kind of spoof and
precision over all.
"""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "airline" / "Tweets.csv"

# look-alikes a folding of Cyrillic and Greek alone does not cover
SWAPS = {
    "armenian": {"o": "\u0585", "n": "\u0578", "u": "\u057d", "h": "\u0570", "q": "\u0566", "g": "\u0581"},
    "latin_extensions": {"a": "\u0251", "g": "\u0261", "i": "\u0269", "o": "\u03bf", "d": "\u0501", "l": "\u01c0"},
    "cyrillic_extensions": {"e": "\u0435", "s": "\u0455", "h": "\u04bb", "w": "\u051d", "q": "\u051b", "y": "\u04af"},
    "cherokee_math": {"a": "\U0001d41a", "e": "\U0001d41e", "o": "\U0001d428", "s": "\U0001d42c", "t": "\U0001d42d"},
    "digits_for_o": {"o": "\u09e6"},
    "digits_for_o_thai": {"o": "\u0e50"},
}


def spoof(text: str, kind: str, rng: random.Random) -> str:
    if kind == "rtl_override":
        return "\u202e" + text[::-1]
    swaps = SWAPS[kind]
    return "".join(swaps[c] if c in swaps and rng.random() < 0.6 else c for c in text)


def main() -> int:
    rng = random.Random(39)
    with DATA.open(encoding="utf-8") as handle:
        texts = list(dict.fromkeys(row["text"] for row in csv.DictReader(handle) if len(row["text"].split()) >= 6))
    texts = texts[:4000]
    kinds = [*SWAPS, "rtl_override"]
    records, labels = [], {}
    for n, text in enumerate(texts):
        records.append({"id": f"o{n}", "text": text})
        labels[f"o{n}"] = None
        if n % 2 == 0:
            kind = kinds[(n // 2) % len(kinds)]
            records.append({"id": f"s{n}", "text": spoof(text, kind, rng)})
            labels[f"s{n}"] = kind
    with tempfile.TemporaryDirectory() as work:
        stream, verdicts = Path(work) / "stream.jsonl", Path(work) / "verdicts.jsonl"
        stream.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        command = [sys.executable, "-m", "streamfilter", "replay", str(stream), "--verdicts", str(verdicts)]
        subprocess.run([*command, "--out", "/dev/null"], check=True, stderr=subprocess.DEVNULL)
        flagged = {v["id"]: v["verdict"] == "duplicate" for v in map(json.loads, verdicts.read_text().splitlines())}
    hits, totals = Counter(), Counter()
    false_positives = 0
    for post_id, kind in labels.items():
        if kind is None:
            false_positives += flagged[post_id]
        else:
            totals[kind] += 1
            hits[kind] += flagged[post_id]
    true_positives = sum(hits.values())
    precision = true_positives / max(true_positives + false_positives, 1)
    recall = true_positives / sum(totals.values())
    print(f"{len(records):,} posts, {sum(totals.values()):,} spoofed copies")
    print("| spoof | copies | recall |\n|---|---|---|")
    for kind in kinds:
        print(f"| {kind} | {totals[kind]} | {hits[kind] / totals[kind]:.3f} |")
    print(f"precision {precision:.4f}  recall {recall:.4f}  ({false_positives} originals flagged)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
