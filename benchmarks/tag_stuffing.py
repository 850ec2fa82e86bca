"""Campaign copies stuffed with hashtags drawn afresh for each copy.

    python benchmarks/tag_stuffing.py
    PYTHONPATH=../old-checkout python benchmarks/tag_stuffing.py   # another version, for a before/after

Takes 2,000 distinct airline tweets (../shared/data/airline, read in place:
its licence keeps it out of the repo) and, for every other one, adds one
copy, as a campaign account would post it: a mention of its own first, a
t.co link of its own last, and before the link a number of hashtags drawn
for that copy from 40 trending ones (``#win #giveaway #iphone …``). Each
number of tags gets a share of the copies. The stream goes through
``streamfilter replay``; a copy flagged duplicate is a hit, and any original
flagged is a false positive. Prints recall per number of tags and by the
words of the tweet copied (6 to 9, 10 to 19, 20 or more, its mention of the
airline counted), and precision over all.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spoofs import caught  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "airline" / "Tweets.csv"
TRENDING = [
    f"#{tag}"
    for tag in (
        "win giveaway iphone free contest follow rt gift prize apple samsung deal sale promo viral trending love "
        "instagood photo fashion music news sports travel food art nature tech crypto nft summer weekend party "
        "fun happy style beauty fitness gaming movie"
    ).split()
]
TAGS = [0, 3, 5, 8, 12]  # tags per copy, in turn


def main() -> int:
    rng = random.Random(61)
    with DATA.open(encoding="utf-8") as handle:
        texts = list(dict.fromkeys(row["text"] for row in csv.DictReader(handle) if len(row["text"].split()) >= 6))
    texts = [text for text in texts[:2000] if "#" not in text]

    def tagged(n: int, text: str) -> tuple[str, tuple[int, int]]:
        count = TAGS[(n // 2) % len(TAGS)]
        tags = " ".join(rng.sample(TRENDING, count))
        copy = f"@fan{n} {text} {tags} https://t.co/{rng.getrandbits(40):x}"
        return copy, (count, min(len(text.split()) // 10 * 10, 20))  # 0 stands for 6 to 9

    posts, hits, totals, precision, recall = caught(texts, tagged)
    print(f"{posts:,} posts, {sum(totals.values()):,} copies with tags of their own")
    print("| tags per copy | recall, 6 to 9 words | 10 to 19 words | 20 or more |")
    print("|---|---|---|---|")
    for count in TAGS:
        cells = [f"{hits[count, words] / totals[count, words]:.3f} ({totals[count, words]})" for words in (0, 10, 20)]
        print(f"| {count} | " + " | ".join(cells) + " |")
    print(f"precision {precision:.4f}  recall {recall:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
