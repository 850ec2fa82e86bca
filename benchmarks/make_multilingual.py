"""Build a labelled near-duplicate stream in eight languages from real posts.

Reads ../shared/data/multilingual/ (read in place, never copied: several sets
are share-alike or non-commercial; see its SOURCES.md). Per language it keeps
up to --bases posts of at least 10 letters that are no near-duplicates of each
other (character 3-gram Jaccard under 0.5 with every kept one, measured here,
not by streamfilter), and injects variants of them later in the stream, made
the ways people, clients and spammers make them in that language:

- ``exact``: the same text from another account, with a new @mention and t.co link;
- ``char_edit``: one character changed (unspaced scripts) or one word (spaced ones);
- ``emoji_inside``: emoji dropped into the middle of the text (between words
  where words are spaced);
- ``spaced_out``: spaces inserted between characters (a common evasion; where
  words are spaced, a word or two spelled out letter by letter);
- ``zero_width``: zero-width spaces and joiners inside words;
- ``truncate``: cut to 80-92% of its characters, ending in "…";
- ``hashtag``: hashtags and an emoji appended;
- ``width``: fullwidth Latin letters and digits, halfwidth katakana;
- ``script``: what the script invites: Arabic tatweel and harakat, Thai tone
  marks dropped, Korean spacing removed or doubled, Russian ё written е,
  Portuguese accents dropped, Hindi nukta dropped, Chinese converted to
  traditional characters (as a converter does, character for character);
- ``repost``: ``RT @user:`` before the text, or Weibo's ``//@user:`` in Chinese;
- ``combo``: two of the above.

Writes STREAM (Twitter v1.1-shaped statuses) and LABELS ({"id", "cluster",
"kind", "language", "duplicate"}), in arrival order:

    python benchmarks/make_multilingual.py --out benchmarks/out/multi.jsonl --labels benchmarks/out/multi_labels.jsonl
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import unicodedata
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import regex

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "multilingual"
LANGUAGES = {
    "th": ["th/wisesight.txt"],
    "zh": ["zh/cold.txt"],
    "ja": ["ja/tweets_311.txt", "ja/open2ch.txt"],
    "ko": ["ko/nsmc.txt"],
    "ar": ["ar/arsarcasm_v2.txt"],
    "hi": ["hi/trac1_devanagari.txt", "hi/trac1_romanized.txt"],
    "ru": ["ru/rusentiment_vk.txt"],
    "pt": ["pt/told_br.txt"],
}
KINDS = [
    "exact", "char_edit", "emoji_inside", "spaced_out", "zero_width", "truncate",
    "hashtag", "width", "script", "repost",
]  # fmt: skip
UNSPACED = regex.compile(r"[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Thai}\p{scx=Hangul}]")
LETTER = regex.compile(r"\p{L}")
EMOJI = ["😀", "😂", "🔥", "👍", "🙏", "💯", "❤️", "🇧🇷", "😭", "✨"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060"]


URL_OR_MENTION = regex.compile(r"https?://\S*|@\w+|\bRT\b")


def letters(text: str) -> str:
    """The letters of a text, links and mentions left out (they are what campaigns vary)."""
    return "".join(LETTER.findall(unicodedata.normalize("NFKC", URL_OR_MENTION.sub(" ", text)).casefold()))


def trigrams(text: str) -> set[str]:
    folded = letters(text)
    return {folded[at : at + 3] for at in range(len(folded) - 2)} or {folded}


def thin(texts: list[str], wanted: int, rng: random.Random) -> list[str]:
    """Up to ``wanted`` texts, none with a 3-gram Jaccard of 0.5 or more to another kept one."""
    order = list(range(len(texts)))
    rng.shuffle(order)
    kept: list[set[str]] = []
    kept_texts: list[str] = []
    index: dict[str, list[int]] = defaultdict(list)
    for at in order:
        text = texts[at]
        if len(letters(text)) < 10 or "@" in text[:1]:
            continue
        # as the English stream: six words at least where words are spaced
        if UNSPACED.search(text) is None and sum(1 for word in text.split() if LETTER.search(word)) < 6:
            continue
        grams = trigrams(text)
        shared: dict[int, int] = defaultdict(int)
        for gram in grams:
            for other in index.get(gram, ())[:300]:
                shared[other] += 1
        if any(count / (len(grams) + len(kept[other]) - count) >= 0.5 for other, count in shared.items()):
            continue
        for gram in grams:
            index[gram].append(len(kept))
        kept.append(grams)
        kept_texts.append(text)
        if len(kept_texts) == wanted:
            break
    return kept_texts


def vocabulary_of(texts: list[str], rng: random.Random) -> list[str]:
    """Words to insert: whitespace words, or in unspaced scripts 2 to 4 letters cut from a text."""
    words = []
    for text in texts:
        for word in text.split():
            if not LETTER.search(word):
                continue
            if UNSPACED.search(word) and len(word) > 4:
                start = rng.randrange(len(word) - 3)
                word = word[start : start + rng.randint(2, 4)]
            words.append(word.strip("#@.,!?"))
    return [word for word in words if word][:5000]


def positions(text: str, rng: random.Random, count: int) -> list[int]:
    inner = list(range(1, max(2, len(text) - 1)))
    return sorted(rng.sample(inner, min(count, len(inner))), reverse=True)


def mutate(kind: str, text: str, language: str, vocabulary: list[str], rng: random.Random) -> str:
    unspaced = UNSPACED.search(text) is not None
    if kind == "exact":
        return text
    if kind == "char_edit":
        if unspaced:
            chars = [c for c in text if LETTER.match(c)]
            at = rng.choice(positions(text, rng, 1) or [0])
            return text[:at] + rng.choice(chars) + text[at + 1 :]
        words = text.split()
        at = rng.randrange(len(words))
        words[at] = rng.choice(vocabulary)
        return " ".join(words)
    if kind == "emoji_inside":
        if not unspaced:  # between words, where people put them
            words = text.split()
            for at in sorted(rng.sample(range(1, len(words)), min(2, len(words) - 1)), reverse=True):
                words.insert(at, rng.choice(EMOJI))
            return " ".join(words)
        for at in positions(text, rng, 2):
            text = text[:at] + rng.choice(EMOJI) + text[at:]
        return text
    if kind == "spaced_out":
        if not unspaced:  # a word or two spelled out letter by letter
            words = text.split()
            for at in rng.sample(range(len(words)), min(2, len(words))):
                words[at] = " ".join(words[at])
            return " ".join(words)
        start = rng.randrange(max(1, len(text) // 2))
        span = text[start : start + 12]
        return text[:start] + " ".join(span) + text[start + 12 :]
    if kind == "zero_width":
        for at in positions(text, rng, 3):
            text = text[:at] + rng.choice(ZERO_WIDTH) + text[at:]
        return text
    if kind == "truncate":
        keep = int(len(text) * rng.uniform(0.8, 0.92))
        return text[: max(keep, 1)].rstrip() + "…"
    if kind == "hashtag":
        return f"{text} #{rng.choice(vocabulary)} #{rng.choice(vocabulary)} {rng.choice(EMOJI)}"
    if kind == "width":
        fullwidth = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
        halfwidth_kana = {
            unicodedata.normalize("NFKC", chr(c)): chr(c) for c in range(0xFF66, 0xFF9E)
        }  # ｦ..ﾝ, what NFKC makes of them back
        return "".join(halfwidth_kana.get(c, fullwidth.get(c, c)) for c in text)
    if kind == "script":
        return script_mutation(text, language, rng)
    if kind == "repost":
        return f"//@{rng.choice(vocabulary)}: {text}" if language == "zh" else f"RT @user{rng.randrange(999)}: {text}"
    raise ValueError(kind)


def script_mutation(text: str, language: str, rng: random.Random) -> str:
    if language == "ar":
        out = []
        for char in text:
            out.append(char)
            if "\u0628" <= char <= "\u064a" and rng.random() < 0.15:
                out.append(rng.choice(["\u0640\u0640", "\u064e", "\u0650", "\u064f"]))  # tatweel, harakat
        return "".join(out)
    if language == "th":
        return regex.sub(r"[\u0e48-\u0e4b\u0e47\u0e4c]", "", text)  # tone marks and mai taikhu dropped
    if language == "ko":
        return text.replace(" ", "") if " " in text else " ".join(text)
    if language == "ru":
        return text.replace("ё", "е").replace("Ё", "Е") if "ё" in text.lower() else text.upper()
    if language == "pt":
        return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    if language == "hi":
        return text.replace("\u093c", "") if "\u093c" in text else text.lower()
    if language == "ja":
        return text.replace("。", "").replace("、", " ") + "！！"
    if language == "zh":
        traditional = text.translate(_traditional_forms())
        return traditional if traditional != text else text.replace("，", ",").replace("。", ".") + "！！"
    return text


@functools.cache
def _traditional_forms() -> dict[int, str]:
    """Simplified Chinese characters as a traditional form of each: the
    table streamfilter reads traditional characters by (``_hanzi``, OpenCC's),
    read backwards (the first traditional form of each simplified one)."""
    from streamfilter._hanzi import simplified_forms

    forms: dict[int, str] = {}
    for traditional, simplified in simplified_forms().items():
        if len(simplified) == 1 and ord(simplified) != traditional:
            forms.setdefault(ord(simplified), chr(traditional))
    return forms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--bases", type=int, default=1000, help="bases per language at most")
    parser.add_argument("--variants", type=float, default=1.0, help="variants per base on average")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    start = datetime(2024, 3, 1, tzinfo=UTC)
    events: list[tuple[float, dict[str, object], dict[str, object]]] = []
    serial = 10**17
    for language in args.languages.split(","):
        texts = [
            line.strip()
            for name in LANGUAGES[language]
            for line in (DATA / name).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        bases = thin(texts, args.bases, rng)
        vocabulary = vocabulary_of(texts[:2000], rng)
        for cluster, base in enumerate(bases):
            at = rng.uniform(0, 86400)
            serial += 1
            base_id = str(serial)
            events.append((at, {"id_str": base_id, "text": base}, {"cluster": f"{language}{cluster}", "kind": "base"}))
            count = int(args.variants) + (rng.random() < args.variants % 1)
            for _ in range(count):
                kind = rng.choice([*KINDS, "combo"])
                if kind == "combo":
                    first, second = rng.sample([k for k in KINDS if k not in ("exact", "repost")], 2)
                    text = mutate(second, mutate(first, base, language, vocabulary, rng), language, vocabulary, rng)
                else:
                    text = mutate(kind, base, language, vocabulary, rng)
                if kind in ("exact", "hashtag", "combo") and rng.random() < 0.5:
                    text = f"@acct{rng.randrange(10**6)} {text} https://t.co/{rng.randrange(36**8):x}"
                serial += 1
                later = at + rng.uniform(1, 7200)
                label = {"cluster": f"{language}{cluster}", "kind": kind}
                events.append((later, {"id_str": str(serial), "text": text}, label))
            for event in events[-1 - count :]:
                event[2]["language"] = language
    events.sort(key=lambda event: event[0])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as out, open(args.labels, "w", encoding="utf-8") as labels:
        for at, status, label in events:
            created = start + timedelta(seconds=at)
            status["created_at"] = created.strftime("%a %b %d %H:%M:%S +0000 %Y")
            status["user"] = {"screen_name": f"user{rng.randrange(10**6)}"}
            out.write(json.dumps(status, ensure_ascii=False) + "\n")
            duplicate = label["kind"] != "base"
            labels.write(
                json.dumps({"id": status["id_str"], **label, "duplicate": duplicate}, ensure_ascii=False) + "\n"
            )
    print(f"{len(events)} posts in {len(args.languages.split(','))} languages; wrote {args.out} and {args.labels}")


if __name__ == "__main__":
    main()
