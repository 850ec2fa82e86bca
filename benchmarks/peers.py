"""Run a peer deduplicator over a labelled stream and write --verdicts-style output.

    python benchmarks/peers.py datasketch-seed STREAM VERDICTS
    python benchmarks/peers.py datasketch-tuned STREAM VERDICTS
    python benchmarks/peers.py rensa STREAM VERDICTS

- datasketch-seed: MinHashLSH as the seed article used it: character 4-shingles
  after stripping non-word characters, threshold 0.8, 128 permutations.
- datasketch-tuned: MinHashLSH, threshold 0.5, 128 permutations, over word
  2-shingles of streamfilter's tweet-aware normaliser.
- rensa: RMinHashDeduplicator (LSH, threshold 0.5, 128 permutations) over the
  same normalised word 2-shingles.

Peers are in-memory and judge one post at a time: query, then insert when no
candidate came back. They verify nothing beyond their own LSH candidates.
A retweet is judged on the retweeted status's text, like streamfilter's
default policy. Prints "indexed N" so the caller can divide index bytes.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NON_WORD = re.compile(r"\W+")
_index: object = None


def texts(path: str):
    with open(path, "rb") as handle:
        for line in handle:
            record = json.loads(line)
            source = record.get("retweeted_status") or record
            yield record["id_str"], source.get("full_text") or source["text"]


def word_shingles(text: str) -> list[str]:
    from streamfilter import normalize

    words = normalize(text).split()
    if len(words) < 2:
        return [" ".join(words) or text]
    return [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


def char_shingles(text: str) -> list[str]:
    stripped = NON_WORD.sub("", text.lower())
    if len(stripped) < 4:
        return [stripped or text]
    return [stripped[i : i + 4] for i in range(len(stripped) - 3)]


def run_datasketch(posts, out, seed_config: bool) -> int:
    """Judge (post id, text) pairs in order, writing a verdict line for each to ``out``."""
    from datasketch import MinHash, MinHashLSH

    threshold = 0.8 if seed_config else 0.5
    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    shingle = char_shingles if seed_config else word_shingles
    indexed = 0
    global _index
    _index = lsh
    for post_id, text in posts:
        minhash = MinHash(num_perm=128)
        minhash.update_batch([s.encode() for s in shingle(text)])
        found = lsh.query(minhash)
        if found:
            out.write(json.dumps({"id": post_id, "verdict": "duplicate", "duplicate_of": found[0]}) + "\n")
        else:
            lsh.insert(post_id, minhash)
            indexed += 1
            out.write(json.dumps({"id": post_id, "verdict": "novel", "duplicate_of": None}) + "\n")
    return indexed


def run_rensa(posts, out) -> int:
    from rensa import RMinHash, RMinHashDeduplicator

    dedup = RMinHashDeduplicator(threshold=0.5, num_perm=128, use_lsh=True)
    indexed = 0
    for post_id, text in posts:
        minhash = RMinHash(num_perm=128, seed=42)
        minhash.update(word_shingles(text))
        if dedup.add(post_id, minhash):
            indexed += 1
            out.write(json.dumps({"id": post_id, "verdict": "novel", "duplicate_of": None}) + "\n")
        else:
            out.write(json.dumps({"id": post_id, "verdict": "duplicate", "duplicate_of": None}) + "\n")
    return indexed


def main() -> None:
    peer, stream, verdicts = sys.argv[1:4]
    with open(verdicts, "w", encoding="utf-8") as out:
        if peer == "rensa":
            indexed = run_rensa(texts(stream), out)
        elif peer in ("datasketch-seed", "datasketch-tuned"):
            indexed = run_datasketch(texts(stream), out, seed_config=peer == "datasketch-seed")
        else:
            raise SystemExit(f"unknown peer {peer}")
    index_bytes = "n/a"
    if _index is not None:
        import pickle

        index_bytes = str(len(pickle.dumps(_index)))
    print(f"indexed {indexed} index_bytes {index_bytes}", file=sys.stderr)


if __name__ == "__main__":
    main()
