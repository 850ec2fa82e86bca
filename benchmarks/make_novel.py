"""Build a large labelled stream with a realistic share of novel posts (60% by default).

``make_stream.py --repeat`` reaches 300,000 posts by replaying its bases with
a number appended, so most of such a stream is copies, which flatters a
filter that is fastest on copies. This stream's novel posts are novel:

- every real post of ../shared/data (the airline tweets and the eight
  languages of multilingual/, read in place, never copied) that is not a
  near-duplicate of another (word-set Jaccard under 0.5 in its language) is a
  base once;
- past them, each further base is spliced from thirds of three real posts of
  one language (by words where words are spaced, by characters where they are
  not): it shares about a third of its text with each, under every threshold;
- after each base come its copies, ``--variants`` of them on average (0.67:
  60% of the stream novel), made as ``make_stream.mutate`` makes them
  (mentions and links, emoji and hashtags, case, truncation, word edits, RT
  prefixes, Unicode tricks), and with --campaigns, bursts of ``--copies``
  copies of one text.

Writes STREAM (Twitter v1.1-shaped statuses) and LABELS (make_stream's form),
in arrival order:

    python benchmarks/make_novel.py --posts 300000 --out benchmarks/out/novel.jsonl --labels benchmarks/out/novel-labels.jsonl
    python benchmarks/make_novel.py --posts 300000 --campaigns 40 --copies 3750 \\
        --out benchmarks/out/campaigns.jsonl --labels benchmarks/out/campaigns-labels.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_multilingual import DATA, LANGUAGES, UNSPACED  # noqa: E402
from make_stream import DEFAULT_CSV, KINDS, _user, campaign_copy, mutate, thin  # noqa: E402

# the copies a base gets: make_stream's kinds, less the API retweets (their
# originals are other posts) and the manual retweet's prefix kept
COPY_KINDS = tuple(kind for kind in KINDS if kind != "retweet_api")


def real_posts() -> dict[str, list[str]]:
    """Each language's real posts, near-duplicates thinned out."""
    if not DEFAULT_CSV.is_file():
        raise SystemExit(f"{DEFAULT_CSV} is not there: this benchmark reads ../shared/data beside the clone")
    with DEFAULT_CSV.open(newline="", encoding="utf-8") as handle:
        airline = [row["text"] for row in csv.DictReader(handle)]
    posts = {"en": [airline[i] for i in thin(airline, 6, 0.5)]}
    for language, names in LANGUAGES.items():
        texts = [line for name in names for line in (DATA / name).read_text(encoding="utf-8").splitlines()]
        texts = [text for text in texts if len(text) >= 20]
        posts[language] = [texts[i] for i in thin(texts, 4, 0.5)]
    return posts


def splice(texts: list[str], rng: random.Random) -> str:
    """A new text from thirds of three of ``texts``: by words, or by characters in unspaced scripts."""
    parts = []
    for third, text in enumerate(rng.sample(texts, 3)):
        unspaced = bool(UNSPACED.search(text)) and text.count(" ") < len(text) // 8
        pieces = list(text) if unspaced else text.split()
        size = max(1, len(pieces) // 3)
        chosen = pieces[third * size : (third + 1) * size] or pieces[:size]
        parts.append(("" if unspaced else " ").join(chosen))
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--posts", type=int, default=300_000)
    parser.add_argument("--variants", type=float, default=0.67, help="copies per base on average")
    parser.add_argument("--campaigns", type=int, default=0, help="this many bases get a burst of --copies copies")
    parser.add_argument("--copies", type=int, default=500)
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    posts = real_posts()
    languages = sorted(posts)
    real = [(language, text) for language in languages for text in posts[language]]
    rng.shuffle(real)
    bases_wanted = int((args.posts - args.campaigns * args.copies) / (1 + args.variants))
    campaign_at = set(rng.sample(range(bases_wanted), min(args.campaigns, bases_wanted)))
    start = datetime(2015, 2, 16, tzinfo=UTC)
    events: list[tuple[float, str, dict[str, object]]] = []
    for order in range(bases_wanted):
        if order < len(real):
            language, text = real[order]
        else:
            language = rng.choice(languages)
            text = splice(posts[language], rng)
        cluster = f"b{order}"
        events.append((order, text, {"cluster": cluster, "kind": "base", "duplicate": False}))
        copies = int(args.variants) + (1 if rng.random() < args.variants % 1 else 0)
        for _ in range(copies):
            kind = rng.choice(COPY_KINDS)
            copy = mutate(kind, text, rng)
            events.append((order + rng.uniform(0.5, 600), copy, {"cluster": cluster, "kind": kind, "duplicate": True}))
        if order in campaign_at:
            for _ in range(args.copies):
                copy = campaign_copy(text, rng)
                events.append(
                    (order + rng.uniform(0.01, 30), copy, {"cluster": cluster, "kind": "campaign", "duplicate": True})
                )
    events.sort(key=lambda event: event[0])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as out, open(args.labels, "w", encoding="utf-8") as labels:
        for serial, (position, text, label) in enumerate(events, 10**17):
            status = {
                "id_str": str(serial),
                "text": text,
                "created_at": (start + timedelta(seconds=position)).strftime("%a %b %d %H:%M:%S +0000 %Y"),
                "user": {"screen_name": _user(rng)[1:]},
            }
            out.write(json.dumps(status, ensure_ascii=False) + "\n")
            labels.write(json.dumps({"id": status["id_str"], **label}) + "\n")
    novel = sum(1 for _, _, label in events if not label["duplicate"])
    print(
        f"{len(events)} posts, {novel} novel ({novel / len(events):.0%}): {min(len(real), bases_wanted)} real "
        f"bases of {len(real)}, {max(0, bases_wanted - len(real))} spliced; wrote {args.out} and {args.labels}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
