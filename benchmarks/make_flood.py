"""A low-entropy flood: posts of a few random words from a tiny vocabulary.

    python benchmarks/make_flood.py --out benchmarks/out/flood.jsonl --labels benchmarks/out/flood-labels.jsonl
    python benchmarks/bench.py benchmarks/out/flood.jsonl benchmarks/out/flood-labels.jsonl --tools streamfilter,rensa

Each post is ``--words`` words drawn at random from the first ``--vocabulary``
letters' words. Unrelated posts of such a stream share LSH bands far more
often than real text does, which is what an adversary sends to make a
filter's look-ups slow. Posts with the very same words as an earlier one are
labelled duplicates (kind ``same words``); the rest are novel (kind ``flood``).
"""

from __future__ import annotations

import argparse
import json
import random


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=12)
    parser.add_argument("--vocabulary", type=int, default=26)
    parser.add_argument("--seed", type=int, default=59)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    vocabulary = [letter * 3 + "x" for letter in "abcdefghijklmnopqrstuvwxyz"[: args.vocabulary]]
    seen: dict[str, str] = {}
    with open(args.out, "w", encoding="utf-8") as out, open(args.labels, "w", encoding="utf-8") as labels:
        for number in range(args.posts):
            text = " ".join(rng.choice(vocabulary) for _ in range(args.words))
            post_id = str(10**17 + number)
            minute, second = divmod(number // 20, 60)
            created = f"Fri May 04 {14 + minute // 60:02d}:{minute % 60:02d}:{second:02d} +0000 2012"
            out.write(json.dumps({"id_str": post_id, "created_at": created, "text": text}) + "\n")
            original = seen.setdefault(text, post_id)
            duplicate = original != post_id
            labels.write(
                json.dumps({"id": post_id, "duplicate": duplicate, "kind": "same words" if duplicate else "flood"})
                + "\n"
            )


if __name__ == "__main__":
    main()
