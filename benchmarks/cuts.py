"""Truncated copies: how often the start rule finds them, and how often it is wrong.

    python benchmarks/cuts.py

Offline, with exact similarity and no LSH, over the airline tweets thinned
as ``make_stream.py`` thins them (at least 6 words, no two with word-set
Jaccard 0.5 or more). Each base is cut at a share of its characters drawn
uniformly from each range, and "…" is appended, as ``make_stream.py
--cut LOW HIGH`` does:

- found: the cut copy reaches the threshold against its base, by Jaccard with
  the whole base, and with the rule streamfilter applies
  (``_rules.judged_similarity``: the Jaccard with the base's first n or
  n + 1 words, for a cut copy of at least ``CUT_OFF_MIN_WORDS`` words, or
  ``--min-words``);
- false: every base is cut once at a random share of 30-90%, and the rule
  counts it a duplicate of some *earlier*, distinct base. Earlier bases are
  found through the word pairs they share with the cut copy (a start that
  matches at 0.8 or more shares most of its pairs).

The README's "Truncated copies" quotes this script's output.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from make_stream import DEFAULT_CSV, thin  # noqa: E402

from streamfilter import (
    FilterConfig,  # noqa: E402
    _rules,  # noqa: E402
)
from streamfilter._engine import Sketcher  # noqa: E402
from streamfilter._rules import jaccard, judged_similarity  # noqa: E402
from streamfilter.adapters import record_adapter  # noqa: E402
from streamfilter.stores import Sketch  # noqa: E402

RANGES = ((0.8, 0.92), (0.6, 0.8), (0.4, 0.6), (0.25, 0.4))


def _cut(text: str, share: float) -> str:
    return text[: int(len(text) * share)].rstrip() + "…"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", default=str(DEFAULT_CSV))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--min-words",
        type=int,
        default=_rules.CUT_OFF_MIN_WORDS,
        help="measure the rule with another minimum of words (the library's is the default)",
    )
    args = parser.parse_args()
    _rules.CUT_OFF_MIN_WORDS = min_words = args.min_words
    config = FilterConfig(seed=1)
    sketcher = Sketcher(config, record_adapter("generic"))
    threshold, size = config.jaccard_threshold, config.shingle_size

    def sketches(texts: list[str]) -> list[Sketch]:
        return sketcher.prepare([(n, {"id": str(n), "text": text}) for n, text in enumerate(texts)]).sketches

    with open(args.csv, newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    bases = [texts[i] for i in thin(texts, 6, 0.5)]
    whole = sketches(bases)
    sets = [set(s.shingles.tolist()) for s in whole]
    rng = random.Random(args.seed)
    print(f"{len(bases)} bases; threshold {threshold}, start rule from {min_words} words")
    print(f"kept share | cut copies | found, whole Jaccard | found, with the start rule | under {min_words} words")
    for low, high in RANGES:
        cuts = sketches([_cut(text, rng.uniform(low, high)) for text in bases])
        by_whole = by_rule = short = 0
        for base, members, cut in zip(whole, sets, cuts, strict=True):
            own = set(cut.shingles.tolist())
            by_whole += jaccard(own, members) >= threshold
            by_rule += judged_similarity(cut, own, members, base.words, size, threshold) >= threshold
            short += len(cut.words) < min_words
        count = len(cuts)
        print(f"{low:.2f}-{high:.2f} | {count} | {by_whole / count:.3f} | {by_rule / count:.3f} | {short / count:.3f}")
    # distinct bases, cut: does the rule call one a copy of an earlier base?
    cuts = sketches([_cut(text, rng.uniform(0.3, 0.9)) for text in bases])
    by_pair: dict[tuple[int, int], list[int]] = defaultdict(list)
    false: list[tuple[float, int, int]] = []
    judged = 0
    for index, cut in enumerate(cuts):
        words = cut.words.tolist()
        if cut.cut_off and len(words) >= min_words:
            judged += 1
            own = set(cut.shingles.tolist())
            earlier = {other for pair in zip(words, words[1:], strict=False) for other in by_pair.get(pair, ())}
            best = max(
                ((judged_similarity(cut, own, sets[o], whole[o].words, size, threshold), o) for o in earlier),
                default=(0.0, -1),
            )
            if best[0] >= threshold:
                false.append((best[0], index, best[1]))
        base_words = whole[index].words.tolist()
        for pair in set(zip(base_words, base_words[1:], strict=False)):
            by_pair[pair].append(index)
    print(f"false: {len(false)} of {judged} distinct bases cut to {min_words} words or more")
    for similarity, index, other in sorted(false, reverse=True)[:10]:
        print(f"  {similarity:.2f}  {_cut(bases[index], 1.0)[:70]!r}  ~  {bases[other][:70]!r}")


if __name__ == "__main__":
    main()
