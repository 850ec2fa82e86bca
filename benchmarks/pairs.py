"""streamfilter and its peers on human-labelled tweet pairs.

    python benchmarks/pairs.py
    python benchmarks/pairs.py --thresholds 0.4,0.5,0.6 --tools streamfilter,rensa

Reads two non-commercial sets in place (../shared/data, never copied here):

- the Twitter URL Corpus test set: 10,120 pairs of tweets that link the same
  news article (its 10,370 lines include 250 blank ones), each with how many
  of 6 raters called it a paraphrase;
- SemEval-2015 PIT test set: 972 pairs of tweets on one trending topic, with
  expert labels (paraphrase, not, or debatable).

Each pair goes through an index of its own, in memory: the first tweet, then
the second, whose verdict is read. The peers run as in peers.py, at their
own settings; ``--thresholds`` applies to streamfilter. Raters were asked about paraphrase, which
is wider than near-duplicate ("explosive dossier" / "sensational dossier" is a
paraphrase; a reworded headline is not a copy), so recall against it is low
for any lexical filter. What the table shows is how often each group of pairs
is called a duplicate, and precision: of the pairs called duplicates, the
share the raters called paraphrases (URL corpus: 4 or more of 6; PIT: true).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

from streamfilter import FilterConfig, StreamFilter, VerdictKind  # noqa: E402
from streamfilter.stores.memory import MemoryStore  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
# (first tweet, second tweet, the pair's group in the table, paraphrase or not; None when debatable)
Pair = tuple[str, str, str, bool | None]


def url_corpus(path: Path) -> Iterator[Pair]:
    """(first, second, group, paraphrase): the group is the raters' votes."""
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) < 3:
            continue
        votes = int(fields[2].strip().strip("()").split(",")[0])
        paraphrase = True if votes >= 4 else False if votes <= 1 else None
        yield fields[0], fields[1], f"{votes} of 6", paraphrase


def pit(data: Path, labels: Path) -> Iterator[Pair]:
    for line, label in zip(data.read_text(encoding="utf-8").splitlines(), labels.read_text().splitlines(), strict=True):
        fields = line.split("\t")
        verdict = label.split("\t")[0]
        paraphrase = {"true": True, "false": False}.get(verdict)
        yield fields[2], fields[3], {"true": "paraphrase", "false": "not", "----": "debatable"}[verdict], paraphrase


def judge(pairs: list[Pair], threshold: float) -> list[bool]:
    """streamfilter's verdict on each pair's second tweet, after its first."""
    config = FilterConfig(jaccard_threshold=threshold)
    called = []
    for first, second, _, _ in pairs:
        with StreamFilter(config, store=MemoryStore()) as sf:
            sf.check({"id": "1", "text": first})
            called.append(sf.check({"id": "2", "text": second}).kind is VerdictKind.DUPLICATE)
    return called


def judge_peer(run: Callable[[list[tuple[str, str]], io.StringIO], int]) -> Callable[[list[Pair], float], list[bool]]:
    """A peer from peers.py (an index of its own per pair, at its own settings), as ``judge``."""

    def judged(pairs: list[Pair], threshold: float) -> list[bool]:
        called = []
        for first, second, _, _ in pairs:
            out = io.StringIO()
            run([("1", first), ("2", second)], out)
            called.append(json.loads(out.getvalue().splitlines()[1])["verdict"] == "duplicate")
        return called

    return judged


TOOLS: dict[str, Callable[[list[Pair], float], list[bool]]] = {
    "streamfilter": judge,
    "rensa": judge_peer(peers.run_rensa),
    "datasketch-tuned": judge_peer(lambda posts, out: peers.run_datasketch(posts, out, seed_config=False)),
    "datasketch-seed": judge_peer(lambda posts, out: peers.run_datasketch(posts, out, seed_config=True)),
}


def report(name: str, pairs: list[Pair], thresholds: list[float], tools: list[str]) -> None:
    groups = sorted({group for _, _, group, _ in pairs})
    print(f"\n{name}: {len(pairs)} pairs")
    header = " | ".join(f"{group} ({sum(g == group for _, _, g, _ in pairs)})" for group in groups)
    print(f"| tool | called duplicate, by group: {header} | precision | recall |")
    print("|---" * (3 + len(groups)) + "|")
    runs = [(f"streamfilter, threshold {t}", judge, t) for t in thresholds if "streamfilter" in tools]
    runs += [(tool, TOOLS[tool], 0.0) for tool in tools if tool != "streamfilter"]
    for label, run, threshold in runs:
        called = run(pairs, threshold)
        shares = []
        for group in groups:
            in_group = [c for c, (_, _, g, _) in zip(called, pairs, strict=True) if g == group]
            shares.append(f"{sum(in_group)} ({sum(in_group) / len(in_group):.1%})")
        labelled = [(c, p) for c, (_, _, _, p) in zip(called, pairs, strict=True) if p is not None]
        true_positive = sum(c and p for c, p in labelled)
        flagged = sum(c for c, _ in labelled)
        positive = sum(p for _, p in labelled)
        precision = f"{true_positive / flagged:.3f}" if flagged else "n/a"
        print(f"| {label} | {' | '.join(shares)} | {precision} | {true_positive / positive:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--thresholds", default="0.5", help="streamfilter's, comma-separated")
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    tools = args.tools.split(",")
    thresholds = [float(value) for value in args.thresholds.split(",")]
    data = Path(args.data)
    report(
        "Twitter URL Corpus (test)",
        list(url_corpus(data / "twitter_url_corpus" / "Twitter_URL_Corpus_test.txt")),
        thresholds,
        tools,
    )
    report(
        "SemEval-2015 PIT (test)",
        list(pit(data / "pit2015" / "test.data", data / "pit2015" / "test.label")),
        thresholds,
        tools,
    )


if __name__ == "__main__":
    main()
