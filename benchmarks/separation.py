"""How well a similarity measure separates labelled near-duplicates from distinct posts.

    python benchmarks/separation.py benchmarks/out/stream.jsonl benchmarks/out/labels.jsonl

Exact Jaccard, no LSH: for every labelled variant, its similarity to its
base ("missed" when under the threshold); for every base, its highest
similarity to an earlier base ("false" when at or over it: the filter would
call it a duplicate). Retweets are left out (they are judged by id). Five
measures over the normalised words: the words alone, the word pairs alone,
both together (what streamfilter's Jaccard compares with its default k = 2),
both with skip pairs (words one apart, which an edited word leaves intact;
measured, not used), and words and pairs with the word-edit rule that
streamfilter applies under the threshold (``_rules.judged_similarity``:
posts of 6 or more words, 2 word edits apart at most, with a Jaccard of 0.4
or more, score 1 - edits / words).
Earlier bases are found through words that are in fewer than 300 of them,
so a pair of bases that shares only common words is not compared: it is far
below any threshold in the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from streamfilter import normalize  # noqa: E402
from streamfilter._rules import EDIT_MIN_JACCARD, edit_similarity  # noqa: E402

THRESHOLDS = (0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)
_COMMON = 300
# --lengths also lists the bases this far under its threshold or closer
_NEAR = 0.08


def _text(record: dict) -> str:  # type: ignore[type-arg]
    shown = record.get("retweeted_status") or record
    return str(shown.get("full_text") or shown.get("text") or "")


_Sets = tuple[set[str], set[tuple[str, ...]], set[tuple[str, str]], list[str]]


def _sets(text: str) -> _Sets:
    words = normalize(text).split()
    pairs = {(words[i], words[i + 1]) for i in range(len(words) - 1)} or {tuple(words)}
    skips = {(words[i], words[i + 2]) for i in range(len(words) - 2)}
    return set(words), pairs, skips, words


def _with_edits(similarity: float, order_a: list[str], order_b: list[str]) -> float:
    """``similarity`` (words and pairs), raised by the word-edit rule where it applies."""
    return max(similarity, edit_similarity(order_a, order_b)) if similarity >= EDIT_MIN_JACCARD else similarity


def _similarities(a: _Sets, b: _Sets) -> tuple[float, ...]:
    (words_a, pairs_a, skips_a, order_a), (words_b, pairs_b, skips_b, order_b) = a, b

    def jaccard(*kinds: tuple[set, set]) -> float:  # type: ignore[type-arg]
        """Jaccard of the union of one or more kinds of members (their values never collide)."""
        union = sum(len(x | y) for x, y in kinds)
        return sum(len(x & y) for x, y in kinds) / union if union else 1.0

    words, pairs, skips = (words_a, words_b), (pairs_a, pairs_b), (skips_a, skips_b)
    both = jaccard(words, pairs)
    return jaccard(words), jaccard(pairs), both, jaccard(words, pairs, skips), _with_edits(both, order_a, order_b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream")
    parser.add_argument("labels")
    parser.add_argument(
        "--lengths",
        type=float,
        metavar="T",
        help=f"also print the word counts of the variants under T and the bases at T-{_NEAR} or over (words and pairs)",
    )
    args = parser.parse_args()
    lines = Path(args.stream).read_bytes().splitlines()
    labels = [json.loads(line) for line in Path(args.labels).read_text().splitlines()]
    base_of: dict[object, _Sets] = {}
    bases: list[_Sets] = []
    by_word: dict[str, list[int]] = defaultdict(list)
    variants: list[tuple[str, tuple[float, ...]]] = []
    nearest_base: list[tuple[float, ...]] = []
    variant_words: list[int] = []  # the base's words, of each variant
    for line, label in zip(lines, labels, strict=True):
        if label["kind"] in ("retweet_api", "retweet_unseen"):
            continue
        sets = _sets(_text(json.loads(line)))
        if label["duplicate"]:
            if label["cluster"] in base_of:
                variants.append((label["kind"], _similarities(sets, base_of[label["cluster"]])))
                variant_words.append(len(base_of[label["cluster"]][0]))
            continue
        candidates = {other for word in sets[0] if len(by_word[word]) < _COMMON for other in by_word[word]}
        best = [0.0] * 5
        for other in candidates:
            best = [max(old, new) for old, new in zip(best, _similarities(sets, bases[other]), strict=True)]
        nearest_base.append(tuple(best))
        base_of[label["cluster"]] = sets
        for word in sets[0]:
            by_word[word].append(len(bases))
        bases.append(sets)
    edits = [similarity for kind, similarity in variants if kind == "word_edit"]
    print(f"{len(variants)} labelled variants, {len(nearest_base)} bases")
    print("| measure | threshold | missed variants | false (bases) | word_edit recall |")
    print("|---|---|---|---|---|")
    names = ("words", "word pairs", "words and pairs", "words, pairs and skip pairs", "words and pairs, word edits")
    for index, name in enumerate(names):
        for threshold in THRESHOLDS:
            missed = sum(similarity[index] < threshold for _, similarity in variants)
            false = sum(best[index] >= threshold for best in nearest_base)
            recall = 1 - sum(similarity[index] < threshold for similarity in edits) / max(1, len(edits))
            print(f"| {name} | {threshold:.2f} | {missed} | {false} | {recall:.3f} |")
    if args.lengths is not None:
        under = sorted(
            n for (_, similarity), n in zip(variants, variant_words, strict=True) if similarity[2] < args.lengths
        )
        near_threshold = args.lengths - _NEAR
        near = sorted(len(base[0]) for best, base in zip(nearest_base, bases, strict=True) if best[2] >= near_threshold)
        print(f"distinct words of the bases of the variants under {args.lengths} (words and pairs): {under}")
        print(f"distinct words of the bases at {near_threshold:.2f} or over against an earlier base: {near}")


if __name__ == "__main__":
    main()
