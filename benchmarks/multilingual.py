"""Quality, speed and index size per language on the multilingual stream.

    python benchmarks/make_multilingual.py --out benchmarks/out/multi.jsonl --labels benchmarks/out/multi_labels.jsonl
    python benchmarks/multilingual.py benchmarks/out/multi.jsonl benchmarks/out/multi_labels.jsonl

Replays the whole stream through ``streamfilter replay`` at the default
settings and scores the verdicts per language (precision, recall, F1, the
weakest mutation kind); then replays each language's posts alone, as a whole
process, for its throughput and the index's bytes per post in use. With
``--peers``, the seed article's datasketch recipe on character 3-gram
shingles and rensa on whitespace words run on the same stream (the extra
``bench``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import lmdb


def replay(stream: Path, work: Path) -> tuple[dict[str, str], float, float]:
    """(verdict per id, wall seconds, bytes per indexed post in use)."""
    db, verdicts = work / "db", work / "verdicts.jsonl"
    shutil.rmtree(db, ignore_errors=True)
    started = time.perf_counter()
    command = [
        sys.executable,
        "-m",
        "streamfilter",
        "replay",
        str(stream),
        "--db",
        str(db),
        "--verdicts",
        str(verdicts),
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    found = {}
    for line in verdicts.read_text(encoding="utf-8").splitlines():
        verdict = json.loads(line)
        found[verdict["id"]] = verdict["verdict"]
    with lmdb.open(str(db), readonly=True, lock=False, max_dbs=4) as env:
        info, stat = env.info(), env.stat()
        posts = env.open_db(b"posts", create=False)
        with env.begin() as txn:
            indexed = txn.stat(posts)["entries"]
    used = (info["last_pgno"] + 1) * stat["psize"]
    return found, seconds, used / max(indexed, 1)


def peers(stream: Path) -> dict[str, dict[str, str]]:
    from datasketch import MinHash, MinHashLSH
    from rensa import RMinHash

    texts = [(s["id_str"], s["text"]) for s in map(json.loads, stream.read_text(encoding="utf-8").splitlines())]
    out: dict[str, dict[str, str]] = {"datasketch, char 3-grams": {}, "rensa, whitespace words": {}}
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    for post_id, text in texts:
        folded = text.lower()
        minhash = MinHash(num_perm=128)
        for at in range(max(1, len(folded) - 2)):
            minhash.update(folded[at : at + 3].encode("utf-8"))
        duplicate = bool(lsh.query(minhash))
        if not duplicate:
            lsh.insert(post_id, minhash)
        out["datasketch, char 3-grams"][post_id] = "duplicate" if duplicate else "novel"
    buckets: dict[tuple[int, ...], list[object]] = defaultdict(list)
    for post_id, text in texts:
        minhash = RMinHash(num_perm=128, seed=42)
        minhash.update(text.lower().split())
        digest = minhash.digest()
        bands = [tuple(digest[b * 8 : b * 8 + 8]) for b in range(16)]
        duplicate = any(
            other.jaccard(minhash) >= 0.5
            for band in bands
            for other in buckets.get(band, ())  # type: ignore[attr-defined]
        )
        if not duplicate:
            for band in bands:
                buckets[band].append(minhash)
        out["rensa, whitespace words"][post_id] = "duplicate" if duplicate else "novel"
    return out


def score(labels: list[dict[str, object]], found: dict[str, str]) -> dict[str, dict[str, object]]:
    by_language: dict[str, dict[str, object]] = {}
    groups: dict[str, list[dict[str, object]]] = defaultdict(list)
    for label in labels:
        groups[str(label["language"])].append(label)
    for language, group in sorted(groups.items()):
        tp = fp = fn = 0
        kinds: Counter[str] = Counter()
        kind_hits: Counter[str] = Counter()
        for label in group:
            flagged = found.get(str(label["id"])) in ("duplicate", "retweet")
            if label["duplicate"]:
                kinds[str(label["kind"])] += 1
                kind_hits[str(label["kind"])] += flagged
                tp += flagged
                fn += not flagged
            else:
                fp += flagged
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        weakest = min(kinds, key=lambda kind: kind_hits[kind] / kinds[kind])
        by_language[language] = {
            "posts": len(group),
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "weakest": f"{weakest} {kind_hits[weakest] / kinds[weakest]:.3f}",
        }
    return by_language


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream")
    parser.add_argument("labels")
    parser.add_argument("--peers", action="store_true")
    args = parser.parse_args()
    stream, work = Path(args.stream), Path(tempfile.mkdtemp(prefix="streamfilter-multilingual-"))
    labels = [json.loads(line) for line in Path(args.labels).read_text(encoding="utf-8").splitlines()]
    language_of = {str(label["id"]): str(label["language"]) for label in labels}
    try:
        found, _, _ = replay(stream, work)
        quality = score(labels, found)
        speed: dict[str, tuple[float, float]] = {}
        for language in quality:
            alone = work / f"{language}.jsonl"
            with open(alone, "w", encoding="utf-8") as out:
                for line in stream.read_text(encoding="utf-8").splitlines():
                    if language_of[json.loads(line)["id_str"]] == language:
                        out.write(line + "\n")
            _, seconds, per_post = replay(alone, work)
            speed[language] = (quality[language]["posts"] / seconds, per_post)  # type: ignore[operator]
        print("| language | posts | precision | recall | F1 | weakest kind | posts/s (alone) | index B/post |")
        print("|---|---|---|---|---|---|---|---|")
        for language, row in quality.items():
            rate, per_post = speed[language]
            print(
                f"| {language} | {row['posts']:,} | {row['precision']:.4f} | {row['recall']:.4f} | {row['f1']:.4f} "
                f"| {row['weakest']} | {rate:,.0f} | {per_post:.0f} |"
            )
        if args.peers:
            print()
            print("| tool | language | precision | recall | F1 |")
            print("|---|---|---|---|---|")
            for tool, verdicts in peers(stream).items():
                for language, row in score(labels, verdicts).items():
                    print(f"| {tool} | {language} | {row['precision']:.4f} | {row['recall']:.4f} | {row['f1']:.4f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
