"""Campaign copies hidden among words of their own (chaff), or cut short without a "…".

    python benchmarks/chaff.py
    PYTHONPATH=../old-checkout python benchmarks/chaff.py   # another version, for a before/after

Takes 3,000 distinct airline tweets of 8 words or more (../shared/data/airline,
read in place: its licence keeps it out of the repo) and, for every other
one, adds one copy, as a campaign account would post it, with a mention of
its own first:

- ``after``, ``before``, ``around``: the tweet with random words of the
  other tweets after it, before it, or half before and half after it, as
  many as its own words (mentions and links aside), 1.5 times as many, or
  twice as many;
- ``cut``: the tweet's first half or first third of its own words, with no "…".

The stream goes through ``streamfilter replay``; a copy flagged duplicate is
a hit, and any original flagged is a false positive. Prints recall per kind
and amount, and precision over all.
"""

from __future__ import annotations

import csv
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spoofs import caught  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "airline" / "Tweets.csv"
KINDS = [(kind, amount) for kind in ("after", "before", "around") for amount in (1, 1.5, 2)] + [("cut", 2), ("cut", 3)]


def copy_of(text: str, kind: str, amount: float, vocabulary: list[str], rng: random.Random) -> str:
    """A copy of ``text``: with chaff ``amount`` times its own words, or its first 1/``amount`` of them."""
    words = text.split()
    own = [word for word in words if not word.startswith("@") and "://" not in word]
    if kind == "cut":
        return " ".join(own[: math.ceil(len(own) / amount)])
    chaff = rng.choices(vocabulary, k=round(amount * len(own)))
    if kind == "after":
        return " ".join([*words, *chaff])
    if kind == "before":
        return " ".join([*chaff, *words])
    half = len(chaff) // 2
    return " ".join([*chaff[:half], *words, *chaff[half:]])


def main() -> int:
    rng = random.Random(62)
    with DATA.open(encoding="utf-8") as handle:
        texts = list(dict.fromkeys(row["text"] for row in csv.DictReader(handle) if len(row["text"].split()) >= 8))
    texts = texts[:3000]
    vocabulary = sorted({word for text in texts for word in text.split() if word.isalpha()})

    def copied(n: int, text: str) -> tuple[str, tuple[str, float]]:
        kind, amount = KINDS[(n // 2) % len(KINDS)]
        return f"@fan{n} {copy_of(text, kind, amount, vocabulary, rng)}", (kind, amount)

    posts, hits, totals, precision, recall = caught(texts, copied)
    print(f"{posts:,} posts, {sum(totals.values()):,} copies")
    print("| copy | recall |")
    print("|---|---|")
    for kind, amount in KINDS:
        what = f"its first 1/{amount} of words" if kind == "cut" else f"chaff {kind} it, {amount}× its words"
        print(f"| {what} | {hits[kind, amount] / totals[kind, amount]:.3f} ({totals[kind, amount]}) |")
    print(f"precision {precision:.4f}  recall {recall:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
