"""What a batch costs the filter, by stage, at a given batch size.

    python benchmarks/batch_cost.py --batch-size 12
    valgrind --tool=callgrind "$(python -c 'import sys; print(sys.executable)')" benchmarks/batch_cost.py --posts 3000 --batch-size 12

Runs ``latency.py``'s posts through ``Engine.prepare`` (sketching) and
``Engine.commit`` (the store's transaction) in batches of ``--batch-size``,
in this thread, against an LMDB index in a temporary directory, and prints
the CPU time of each stage per batch and per post. At 5,000 posts/s a live
stream's batches hold about a dozen posts, so what a batch costs whatever
its size decides its latency. CPU time on a shared host moves by 10-20%
between runs; for small changes, count instructions instead (the second
command; ``--no-commit`` gives sketching's share, the rest is the
transaction's, and ``--posts 12`` the start-up's).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from latency import texts  # noqa: E402

from streamfilter import FilterConfig, LMDBStore, StreamFilter  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--posts", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument(
        "--fsync", action="store_true", help="LMDBStore(durable=True); the fsync's wait is not CPU time"
    )
    parser.add_argument("--no-commit", action="store_true", help="sketch only")
    args = parser.parse_args()
    posts = [{"id": str(i), "text": text} for i, text in enumerate(itertools.islice(texts(), args.posts))]
    size = args.batch_size
    with tempfile.TemporaryDirectory() as directory:
        with StreamFilter(FilterConfig(), store=LMDBStore(directory, durable=args.fsync)) as sf:
            engine = sf._require_engine()
            batches = 0
            sketching = judging = 0.0
            for start in range(0, len(posts), size):
                records = list(enumerate(posts[start : start + size], start + 1))
                began = time.process_time()
                prepared = engine.prepare(records)
                sketched = time.process_time()
                if not args.no_commit:
                    engine.commit(prepared)
                sketching += sketched - began
                judging += time.process_time() - sketched
                batches += 1
    per_batch = 1e6 / max(batches, 1)
    print(
        f"{len(posts)} posts in batches of {size}: per batch, sketching {sketching * per_batch:.0f} us, "
        f"the transaction {judging * per_batch:.0f} us; per post {(sketching + judging) / max(len(posts), 1) * 1e6:.1f} us"
    )


if __name__ == "__main__":
    main()
