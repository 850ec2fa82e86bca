"""Time the text a hostile user writes to stall the filter, against a budget.

No post may cost more than a few milliseconds per kilobyte. Each case is a
shape that was once super-linear (a dotted word in the URL pattern, floods of
combining marks in Unicode normalisation) or could be (long runs of each
kind of character the normaliser treats apart), at 1 KB to 100 KB, timed
through the whole sketch of one post (normalise, shingle, MinHash, band keys).

    python benchmarks/hostile.py            # prints ms and ms/KB; exits 1 past the budget
    python benchmarks/hostile.py --budget 5
"""

from __future__ import annotations

import argparse
import sys
import time

from streamfilter import FilterConfig
from streamfilter._engine import Sketcher
from streamfilter.adapters import record_adapter

CASES = {
    "dotted word a.a.a…/": lambda n: "see " + "a." * (n // 2) + "/ now",
    "dotted host a.a.a….com/": lambda n: "see " + "a." * (n // 2) + "com/x now",
    "two kinds of marks": lambda n: "a" + "\u0301" * (n // 2) + "\u0316" * (n // 2),
    "alternating marks": lambda n: "a" + "\u0301\u0316" * (n // 2),
    "www.www.www…": lambda n: "www." * (n // 4),
    "RT @a RT @a …": lambda n: "RT @a " * (n // 6),
    "via via via …": lambda n: "via " * (n // 4),
    "one word a!a!a…": lambda n: "a!" * (n // 2),
    "broken words ab.cd ab.cd…": lambda n: "ab.cd " * (n // 6),
    "a.a.a…1": lambda n: "a." * (n // 2) + "1",
    "symbol words w!n w!n…": lambda n: "w!n " * (n // 4),
    "@@@@…": lambda n: "@" * n,
    "emoji and joiners": lambda n: "\U0001f600\u200d" * (n // 2),
    "letters joined by emoji": lambda n: "a\U0001f525" * (n // 5),
    "a🔥b🔥c… ending a😀": lambda n: "a\U0001f525" * (n // 5) + "a\U0001f600",
    "Han run": lambda n: "漢字" * (n // 2),
    "one-letter words": lambda n: "a " * (n // 2),
    "a\\nb c\\n…": lambda n: "a\nb c\n" * (n // 6),
    "ellipsis and links": lambda n: "word… " + "http://x.co/ " * (n // 13),
    "html entities": lambda n: "&amp;" * (n // 5),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=3.0, help="ms per KB allowed (default 3)")
    args = parser.parse_args()
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("text"))
    sketcher.prepare([(0, "warm up: load the emoji tables ☕ é 漢字")])
    print(f"{'case':<26} {'chars':>8} {'ms':>9} {'ms/KB':>7}")
    worst = 0.0
    for name, make in CASES.items():
        for size in (1_000, 10_000, 99_000):
            text = make(size)
            times = []
            for _ in range(3):  # the median of three: a busy machine adds, never takes away
                started = time.perf_counter()
                sketcher.prepare([(1, text)])
                times.append((time.perf_counter() - started) * 1000)
            elapsed = sorted(times)[1]
            per_kb = elapsed / (len(text.encode("utf-8", "surrogatepass")) / 1024)
            worst = max(worst, per_kb)
            print(f"{name:<26} {len(text):>8,} {elapsed:>9.2f} {per_kb:>7.3f}")
    verdict = "within" if worst <= args.budget else "OVER"
    print(f"worst {worst:.3f} ms/KB: {verdict} the budget of {args.budget} ms/KB")
    return 0 if worst <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
