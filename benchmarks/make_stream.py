"""Build a labelled near-duplicate stream from real airline tweets.

Reads ../shared/data/airline/Tweets.csv (CC BY-NC-SA: read in place, never
copied into the repo), keeps bases that are not near-duplicates of each
other, and injects variants of them later in the stream, the way campaigns,
retweeters and clients produce them (and, with --campaigns, bursts of hundreds
of copies of one text). Writes two JSON Lines files:

- STREAM: Twitter v1.1-shaped statuses (id_str, text, created_at, user, and
  retweeted_status for API retweets), in arrival order;
- LABELS: {"id", "cluster", "kind", "duplicate"} per status, same order.

    python benchmarks/make_stream.py --out benchmarks/out/stream.jsonl --labels benchmarks/out/labels.jsonl

The statuses carry only the fields above (about 330 bytes a line). With
--template, each is a copy of a real v1.1 status instead (its user object,
entities, source and counts; about 2.5 KB a line with the default
../shared/data/payloads/twitter_v1/get_status.json), with the fields above
set and the template's own text fields (extended_tweet, full_text, quoted and
retweeted statuses) removed. The same seed gives the same posts and labels:

    python benchmarks/make_stream.py --template --out benchmarks/out/stream_full.jsonl --labels benchmarks/out/labels_full.jsonl
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from streamfilter import normalize  # noqa: E402

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
DEFAULT_CSV = SHARED / "airline" / "Tweets.csv"
DEFAULT_TEMPLATE = SHARED / "payloads" / "twitter_v1" / "get_status.json"
# A template's fields that would give a status another text than the one set
TEMPLATE_TEXT_FIELDS = (
    "extended_tweet",
    "full_text",
    "display_text_range",
    "retweeted_status",
    "quoted_status",
    "quoted_status_id",
    "quoted_status_id_str",
    "is_quote_status",
)
KINDS = (
    "exact",
    "mention_link",
    "hashtag_emoji",
    "case_punct",
    "truncate",
    "word_edit",
    "retweet_manual",
    "retweet_api",
    "unicode",
    "combo",
)
EMOJI = ["😂", "🔥", "👍🏽", "❤️", "🇺🇸", "✈️", "😡", "🙏", "👨‍👩‍👧", "1️⃣", "💯", "😭"]
HASHTAGS = ["#travel", "#fail", "#customerservice", "#win", "#giveaway", "#ad", "#avgeek", "#delay"]
FILLER = ["really", "just", "so", "very", "totally", "again", "today", "now", "please", "seriously"]
HOMOGLYPHS = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "i": "і", "y": "у"}
# Greek and Cyrillic capitals that look like Latin ones
CAPITAL_HOMOGLYPHS = {
    "A": "ΑА", "B": "ΒВ", "C": "С", "E": "ΕЕ", "H": "ΗН", "I": "ΙІ", "K": "ΚК", "M": "ΜМ",
    "N": "Ν", "O": "ΟО", "P": "ΡР", "T": "ΤТ", "X": "ΧХ", "Y": "ΥУ",
}  # fmt: skip
FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
# invisible characters spammers put inside words: zero-width space, non-joiner,
# joiner, word joiner, soft hyphen, variation selector 16
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufe0f"]
# blanks that are not ASCII spaces: no-break, ideographic, em, Hangul filler
BLANKS = ["\u00a0", "\u3000", "\u2003", "\u3164"]
COMBINING = ["\u0336", "\u0332", "\u0301", "\u0308"]  # strike-through, underline, accents
# letters dressed as symbols: circled, negative circled, negative squared, parenthesized
DRESSED = [(0x24B6, 0x24D0), (0x1F150, 0x1F150), (0x1F170, 0x1F170), (0x249C, 0x249C)]


def _bold(char: str) -> str:
    if "a" <= char <= "z":
        return chr(0x1D41A + ord(char) - ord("a"))
    if "A" <= char <= "Z":
        return chr(0x1D400 + ord(char) - ord("A"))
    return char


def _dressed(char: str, upper: int, lower: int) -> str:
    if "a" <= char <= "z":
        return chr(lower + ord(char) - ord("a"))
    if "A" <= char <= "Z":
        return chr(upper + ord(char) - ord("A"))
    return char


def _user(rng: random.Random) -> str:
    return "@" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(rng.randint(5, 12)))


def _link(rng: random.Random) -> str:
    return "https://t.co/" + "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(10)
    )


def mutate(kind: str, text: str, rng: random.Random, cut: tuple[float, float] = (0.8, 0.92)) -> str:
    """``text`` changed the way ``kind`` says; ``cut`` is the share of its
    characters a truncated copy keeps (drawn uniformly)."""
    words = text.split()
    if kind == "exact":
        return text
    if kind == "mention_link":
        out = [(_user(rng) if w.startswith("@") else _link(rng) if w.startswith("http") else w) for w in words]
        if not any(w.startswith("@") for w in words):
            out.insert(0, _user(rng))
        if not any(w.startswith("http") for w in words):
            out.append(_link(rng))
        return " ".join(out)
    if kind == "hashtag_emoji":
        out = list(words)
        for _ in range(rng.randint(1, 3)):
            out.insert(rng.randint(0, len(out)), rng.choice(EMOJI))
        out.extend(rng.sample(HASHTAGS, rng.randint(1, 2)))
        return " ".join(out)
    if kind == "case_punct":
        choice = rng.random()
        text = text.upper() if choice < 0.3 else text.lower() if choice < 0.6 else text.title()
        return text.replace(".", "!!").replace(",", "") + rng.choice(["!!!", "?!", "...", " :)", ""])
    if kind == "truncate":
        return text[: int(len(text) * rng.uniform(*cut))].rstrip() + "…"
    if kind == "word_edit":
        out = list(words)
        for _ in range(rng.randint(1, 2)):
            plain = [i for i, w in enumerate(out) if not w.startswith(("@", "http", "#"))]
            if not plain:
                break
            i = rng.choice(plain)
            op = rng.random()
            if op < 0.4:
                out[i] = rng.choice(FILLER)
            elif op < 0.7 and len(plain) > 3:
                del out[i]
            else:
                out.insert(i, rng.choice(FILLER))
        return " ".join(out)
    if kind == "retweet_manual":
        return f"RT {_user(rng)}: {text}"
    if kind == "unicode":
        trick = rng.choice(
            ("homoglyph", "capitals", "fullwidth", "invisible", "bold", "blanks", "combining", "dressed")
        )
        if trick == "homoglyph":
            return "".join(HOMOGLYPHS.get(c, c) if rng.random() < 0.5 else c for c in text)
        if trick == "capitals":
            shouted = text.upper() if rng.random() < 0.5 else text
            return "".join(rng.choice(CAPITAL_HOMOGLYPHS.get(c, c)) for c in shouted)
        if trick == "fullwidth":
            return "".join(FULLWIDTH.get(c, c) for c in text)
        if trick == "invisible":
            return "".join(c + (rng.choice(INVISIBLE) if c.isalpha() and rng.random() < 0.3 else "") for c in text)
        if trick == "blanks":
            return "".join(rng.choice(BLANKS) if c == " " else c for c in text)
        if trick == "combining":
            mark = rng.choice(COMBINING)
            return "".join(c + mark if c.isalpha() else c for c in text)
        if trick == "dressed":
            upper, lower = rng.choice(DRESSED)
            return "".join(_dressed(c, upper, lower) for c in text)
        return "".join(_bold(c) for c in text)
    if kind == "combo":
        steps = rng.sample(["mention_link", "hashtag_emoji", "case_punct", "unicode", "word_edit"], 2)
        if rng.random() < 0.3:
            steps.append("truncate")
        for step in steps:
            text = mutate(step, text, rng, cut)
        return text
    raise ValueError(kind)


def campaign_copy(text: str, rng: random.Random) -> str:
    """``text`` as a campaign's account posts it: its own mention and link, and
    three times in ten dressed with hashtags and emoji."""
    copy = mutate("mention_link", text, rng)
    return mutate("hashtag_emoji", copy, rng) if rng.random() < 0.3 else copy


def thin(texts: list[str], min_words: int, max_jaccard: float) -> list[int]:
    """Indices of bases with at least min_words words, no two with word-set Jaccard >= max_jaccard."""
    kept: list[int] = []
    seen_word_sets: list[set[str]] = []
    index: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        words = set(normalize(text).split())
        if len(words) < min_words:
            continue
        candidates: set[int] = set()
        for w in words:
            candidates.update(index.get(w, ()))
        if any(len(words & seen_word_sets[c]) / len(words | seen_word_sets[c]) >= max_jaccard for c in candidates):
            continue
        for w in words:
            index.setdefault(w, []).append(len(kept))
        kept.append(i)
        seen_word_sets.append(words)
    return kept


def load_template(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        status = json.load(handle)
    if isinstance(status, list):
        status = status[0]
    if not isinstance(status, dict) or "text" not in status:
        raise SystemExit(f"{path}: not a Twitter v1.1 status")
    return {key: value for key, value in status.items() if key not in TEMPLATE_TEXT_FIELDS}


def dressed(template: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as a copy of the real status ``template``: every field of
    the template, with the record's own set over it (its retweeted status too)."""
    status = copy.deepcopy(template)
    for key, value in record.items():
        if key == "user":
            status["user"] = {**status.get("user", {}), **value}
        elif key == "retweeted_status":
            status[key] = {**copy.deepcopy(template), **value}
        else:
            status[key] = value
    if record["id_str"].isdigit():
        status["id"] = int(record["id_str"])
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--csv",
        default=str(DEFAULT_CSV),
        help="the airline tweets (default: ../shared/data/airline/Tweets.csv, beside the clone: the Kaggle "
        "'Twitter US Airline Sentiment' set, CC BY-NC-SA, which the repository does not copy)",
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--variants", type=float, default=1.0, help="variants per base on average")
    parser.add_argument("--min-words", type=int, default=6)
    parser.add_argument(
        "--thin-jaccard",
        type=float,
        default=0.5,
        help="drop a base sharing this share of its words with a kept one",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="replay the base set this many times with fresh ids (for scale runs)",
    )
    parser.add_argument(
        "--campaigns",
        type=int,
        default=0,
        help="this many bases become campaigns: --copies copies each, from many accounts within seconds",
    )
    parser.add_argument("--copies", type=int, default=300, help="copies of each campaign (kind 'campaign')")
    parser.add_argument(
        "--cut",
        type=float,
        nargs=2,
        default=(0.8, 0.92),
        metavar=("LOW", "HIGH"),
        help="a truncated copy keeps between these shares of its base's characters",
    )
    parser.add_argument(
        "--template",
        nargs="?",
        const=str(DEFAULT_TEMPLATE),
        help="write each status as a copy of this real v1.1 status (a JSON object, or a list: its first one)",
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    template = load_template(args.template) if args.template else None
    rng = random.Random(args.seed)
    if not Path(args.csv).is_file():
        parser.error(
            f"{args.csv} is not there: this benchmark reads the airline tweets of ../shared/data beside the "
            "clone (the Kaggle 'Twitter US Airline Sentiment' Tweets.csv); give its path with --csv"
        )
    with open(args.csv, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    texts = [r["text"] for r in rows]
    thinned = thin(texts, args.min_words, args.thin_jaccard)
    # Every tenth thinned tweet is kept back as the original of "retweets of
    # originals never seen": it is no near-duplicate of any base.
    bases = [i for n, i in enumerate(thinned) if n % 10]
    unseen = [i for n, i in enumerate(thinned) if n % 10 == 0]
    campaigns = set(rng.sample(range(len(bases)), min(args.campaigns, len(bases))))
    start = datetime(2015, 2, 16, tzinfo=UTC)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.labels).parent.mkdir(parents=True, exist_ok=True)
    serial = 10**17
    with open(args.out, "w", encoding="utf-8") as out, open(args.labels, "w", encoding="utf-8") as labels:
        for round_ in range(args.repeat):
            # pending: (position, record, label) inserted after their base
            events: list[tuple[float, dict, dict]] = []
            for order, base_index in enumerate(bases):
                cluster = f"{round_}-{base_index}"
                text = texts[base_index]
                if round_:
                    text = f"{text} {rng.randint(0, 10**9)}"
                events.append((order, {"text": text}, {"cluster": cluster, "kind": "base", "duplicate": False}))
                if order in campaigns:
                    # one text from many accounts, each with its own mention and
                    # link, some dressed with hashtags and emoji, within seconds
                    for _ in range(args.copies):
                        copy = campaign_copy(text, rng)
                        events.append(
                            (
                                order + rng.uniform(0.01, 0.5),
                                {"text": copy},
                                {"cluster": cluster, "kind": "campaign", "duplicate": True},
                            )
                        )
                count = int(args.variants) + (1 if rng.random() < args.variants % 1 else 0)
                for _ in range(count):
                    kind = rng.choice(KINDS + ("retweet_unseen",))
                    delay = order + rng.uniform(0.5, 60)
                    if kind == "retweet_unseen":
                        # a retweet of an original that never appears; its first copy is novel
                        original = {
                            "id_str": str(rng.randint(10**17, 10**18)),
                            "text": texts[unseen.pop()]
                            if unseen
                            else f"never seen original {rng.random()} {rng.random()}",
                        }
                        unseen_cluster = cluster + "-unseen"
                        events.append(
                            (
                                delay,
                                {"text": "RT x", "retweeted_status": original},
                                {"cluster": unseen_cluster, "kind": kind, "duplicate": False},
                            )
                        )
                        events.append(
                            (
                                delay + rng.uniform(0.1, 20),
                                {"text": "RT x", "retweeted_status": original},
                                {"cluster": unseen_cluster, "kind": kind, "duplicate": True},
                            )
                        )
                        continue
                    if kind == "retweet_api":
                        record = {
                            "text": f"RT {_user(rng)}: {text[:110]}…",
                            "retweeted_status": {"id_str": "orig-" + cluster, "text": text},
                        }
                    else:
                        record = {"text": mutate(kind, text, rng, tuple(args.cut))}
                    events.append((delay, record, {"cluster": cluster, "kind": kind, "duplicate": True}))
            events.sort(key=lambda e: e[0])
            for position, record, label in events:
                serial += 1
                record["id_str"] = str(serial)
                record["created_at"] = (start + timedelta(seconds=round_ * 86400 * 3 + position * 10)).strftime(
                    "%a %b %d %H:%M:%S +0000 %Y"
                )
                record["user"] = {"screen_name": _user(rng)[1:]}
                if template is not None:
                    record = dressed(template, record)
                label = {"id": record["id_str"], **label}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                labels.write(json.dumps(label) + "\n")
    print(
        f"{len(bases)} bases ({len(unseen)} unseen originals left) from {len(texts)} tweets; wrote {args.out} and {args.labels}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
