"""Where a replay's time goes, beside rensa's loop over the same stream.

    pip install -e '.[bench]'
    python benchmarks/stages.py benchmarks/out/stream.jsonl --rounds 5

``bench.py`` times whole processes. This splits them into the parts that set
a replay's wall time. A replay runs two sides at once, on two cores: a sketch
worker process (decode, adapt, normalise, shingle, MinHash, band keys) and the
replay's own process (the store stage: the LMDB transaction, verification,
the verdict and output lines). Beside one worker, the replay's process
sketches batches too, in the time its store stage leaves, so the two sides
share the sketching: on two cores its wall time is about the start-up plus
the posts times half the two sides together (the store side alone, were it
the slower). Measured here, in one process, on the same batches of 1,024 raw
lines a replay cuts, in alternating order:

- worker side: what a worker does per batch: unpickle the lines,
  ``Sketcher.prepare_wire``, pickle the answer;
- store side: what the replay's process does per batch: pickle the lines for
  the worker, unpickle its answer, ``PreparedBatch.from_wire``,
  ``Engine.commit`` into a new LMDB index, and the verdict and output lines
  (reading the input and writing files are left out of both sides);
- rensa: the loop ``peers.py`` runs (JSON, streamfilter's normaliser, word
  pairs, ``RMinHash``, ``RMinHashDeduplicator``);
- JSON and normaliser: the part of that loop that is streamfilter's own
  code too (``json.loads`` and ``words_and_cut``).

The store side is also given by sixth of the stream: it grows with the index,
as posts find more candidates, more of them beyond the recent posts kept in
memory. Start-up is timed as whole processes: an empty replay (its worker process
included), and a process that imports rensa and the normaliser and
normalises one post, as peers.py's does. Each figure is the median of the
rounds, in microseconds a post (start-up in seconds).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from bench import CHILD_ENVIRONMENT  # noqa: E402
from peers import run_rensa, texts  # noqa: E402

from streamfilter import FilterConfig, LMDBStore  # noqa: E402
from streamfilter._engine import Engine, PreparedBatch  # noqa: E402
from streamfilter._launch import pace_collector_for_batches  # noqa: E402
from streamfilter._normalize import load_tables, words_and_cut  # noqa: E402
from streamfilter._post import VerdictKind  # noqa: E402
from streamfilter._protocol import FRAME_HEADER, frame, from_frame  # noqa: E402
from streamfilter.adapters import record_adapter  # noqa: E402

BATCH = 1024  # the replay's default --batch-size
NOVEL = VerdictKind.NOVEL


def batches(stream: str) -> list[list[tuple[int, bytes]]]:
    """The stream's raw lines, numbered, in the replay's batches."""
    with open(stream, "rb") as handle:
        lines = [(number, line.rstrip(b"\n")) for number, line in enumerate(handle, 1)]
    return [lines[start : start + BATCH] for start in range(0, len(lines), BATCH)]


def worker_side(engine: Engine, sent: list[bytes]) -> tuple[float, list[bytes]]:
    """Seconds a worker process spends on the batches as sent, and its answers."""
    sketcher = engine.sketcher
    answers = []
    started = time.perf_counter()
    for whole in sent:
        answers.append(frame(("ok", sketcher.prepare_wire(from_frame(whole[FRAME_HEADER.size :])))))
    return time.perf_counter() - started, answers


def store_side(directory: Path, cut: list[list[tuple[int, bytes]]], answers: list[bytes]) -> list[float]:
    """Seconds the replay's process spends judging each of the worker's answers into a new index."""
    engine = Engine(FilterConfig(), LMDBStore(directory), record_adapter("auto"))
    verdict_lines = io.BytesIO()
    output = io.BytesIO()
    seconds = []
    try:
        for records, answer in zip(cut, answers, strict=True):
            started = time.perf_counter()
            frame(records)  # sending the batch to the worker
            _, wire = from_frame(answer[FRAME_HEADER.size :])
            verdicts = engine.commit(PreparedBatch.from_wire(wire, records))
            # the lines from the verdict columns, as the command writes them (cli/_outputs)
            verdict_lines.write(verdicts.json_lines())
            novel = [raw for kind, raw in zip(verdicts.kinds, verdicts.raws, strict=True) if kind is NOVEL]
            output.write(b"\n".join(raw for raw in novel if isinstance(raw, bytes)) + b"\n")
            seconds.append(time.perf_counter() - started)
        return seconds
    finally:
        engine.close()


def rensa_loop(stream: str) -> float:
    started = time.perf_counter()
    run_rensa(texts(stream), io.StringIO())
    return time.perf_counter() - started


def json_and_normaliser(stream: str) -> float:
    started = time.perf_counter()
    for _, text in texts(stream):
        words_and_cut(text)
    return time.perf_counter() - started


def process_seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env=CHILD_ENVIRONMENT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stream")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cut = batches(args.stream)
    sent = [frame(records) for records in cut]
    posts = sum(len(records) for records in cut)
    load_tables()
    pace_collector_for_batches()
    sketching = Engine(FilterConfig(), LMDBStore(tempfile.mkdtemp()), record_adapter("auto"))
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        empty = Path(directory) / "empty"
        empty.write_bytes(b"")

        def replay_start_up(round_: int) -> float:
            db = str(Path(directory) / f"empty-{round_}")
            return process_seconds([sys.executable, "-m", "streamfilter", "replay", str(empty), "--db", db])

        def rensa_start_up(round_: int) -> float:
            load = "import rensa; from streamfilter import normalize; normalize('x')"
            return process_seconds([sys.executable, "-c", load])

        def sides(round_: int) -> dict[str, float]:
            worker, answers = worker_side(sketching, sent)
            store = store_side(Path(directory) / f"store-{round_}", cut, answers)
            sixths = {
                f"store {at + 1}/6": sum(store[at * len(store) // 6 : (at + 1) * len(store) // 6]) for at in range(6)
            }
            return {"worker": worker, "store": sum(store), **sixths}

        parts: list[Callable[[int], dict[str, float]]] = [
            sides,
            lambda round_: {"rensa": rensa_loop(args.stream)},
            lambda round_: {"json+normaliser": json_and_normaliser(args.stream)},
            lambda round_: {"replay start-up": replay_start_up(round_)},
            lambda round_: {"rensa start-up": rensa_start_up(round_)},
        ]
        for part in parts:  # untimed: caches, bytecode, the word-hash memo
            part(-1)
        for round_ in range(args.rounds):
            for part in parts if round_ % 2 == 0 else reversed(parts):
                for name, seconds in part(round_).items():
                    times.setdefault(name, []).append(seconds)
    sketching.close()
    median = {name: statistics.median(values) for name, values in times.items()}
    per_post = {name: median[name] / posts * 1e6 for name in ("worker", "store", "rensa", "json+normaliser")}
    print(f"{posts} posts in batches of {BATCH}, {args.rounds} alternating rounds, medians; {os.cpu_count()} cores")
    print("| part | µs a post |")
    print("|---|---|")
    print(
        f"| streamfilter, worker side (decode, adapt, normalise, shingle, MinHash, pickling) | {per_post['worker']:.1f} |"
    )
    print(f"| streamfilter, store side (LMDB transaction, verification, verdicts) | {per_post['store']:.1f} |")
    print(f"| rensa's loop (JSON, normaliser, pairs, RMinHash, LSH) | {per_post['rensa']:.1f} |")
    print(f"| of which JSON and streamfilter's normaliser | {per_post['json+normaliser']:.1f} |")
    # the store side grows with the index: more candidates, and more of them read from LMDB
    sixth_posts = [
        sum(len(records) for records in cut[at * len(cut) // 6 : (at + 1) * len(cut) // 6]) for at in range(6)
    ]
    by_sixth = [median[f"store {at + 1}/6"] / sixth_posts[at] * 1e6 for at in range(6) if sixth_posts[at]]
    print("store side by sixth of the stream, µs a post: " + ", ".join(f"{value:.1f}" for value in by_sixth))
    shared = max(per_post["store"], (per_post["worker"] + per_post["store"]) / 2)
    ours = median["replay start-up"] + shared * posts / 1e6
    theirs = median["rensa start-up"] + median["rensa"]
    print(
        f"start-up, whole processes: empty replay {median['replay start-up']:.3f} s, "
        f"rensa and the normaliser {median['rensa start-up']:.3f} s"
    )
    print(
        f"bound on two cores: replay ≈ start-up + posts × the sides' mean = {ours:.2f} s; "
        f"rensa ≈ start-up + loop = {theirs:.2f} s; ratio {theirs / ours:.2f}×"
    )


if __name__ == "__main__":
    main()
