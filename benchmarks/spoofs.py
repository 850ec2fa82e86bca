"""Copies a reader cannot tell apart: recall on spoofs, precision on everything else.

    python benchmarks/spoofs.py                       # this checkout
    PYTHONPATH=../old-checkout python benchmarks/spoofs.py   # another version, for a before/after

Takes 4,000 distinct airline tweets (../shared/data/airline, read in place: its
licence keeps it out of the repo) and, for every other one, adds one copy a
reader cannot tell from it: letters swapped for look-alikes from Armenian,
Latin extensions, Cyrillic extensions, Cherokee or mathematical letters,
small Greek letters, right-to-left letters (Arabic heh for "o"), signs
("pl℮ase", "e×tra"), a Cyrillic capital I for "l", "rn" for every "m", the Cherokee small
letters, Greek, Cyrillic or Cherokee capitals in a text written in capitals,
digits of other scripts standing in for "o", the text written backwards
after a right-to-left override (it displays as the original), ASCII digits
for the letters they look like (leetspeak: "t0day", "w1n"), symbols for the
letters they stand for ("w!n", "fr€€", "ca$h", "cl@im", "l|nk"), every word
spelled out letter by letter, the words three spaces apart, a letter a line
with a blank line between words, the letters of
each word joined by one mark ("F.R.E.E", "c-l-a-i-m"), each word of letters
broken by one mark ("cl.aim yo,ur"), a letter of most words drawn out
("freeeee"), the letters of each word joined by one emoji ("f🔥r🔥e🔥e"), or every letter
as a regional indicator, each set apart by a zero-width space (shown as
boxed capitals, where two side by side could make a flag), or a share of
its letters each swapped for any of its look-alikes in Unicode's
confusables data, as a homoglyph generator picks them. Mentions and
links are left as they were, as a campaign keeps its links working. The stream goes
through ``streamfilter replay``; a copy flagged duplicate is a hit, and any
other post flagged is a false positive. Prints recall per kind of spoof, the
share of copies whose words the filter reads as its original's very words
(normalised, and hashed with l as i and m as rn: a copy can be caught with a few words
misread; this says none was), and precision over all.
"""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Hashable
from pathlib import Path

from confusables import look_alikes

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "airline" / "Tweets.csv"

# look-alikes a folding of Cyrillic and Greek alone does not cover
SWAPS = {
    "armenian": {"o": "\u0585", "n": "\u0578", "u": "\u057d", "h": "\u0570", "q": "\u0566", "g": "\u0581"},
    "latin_extensions": {"a": "\u0251", "g": "\u0261", "i": "\u0269", "o": "\u03bf", "d": "\u0501", "l": "\u01c0"},
    "cyrillic_extensions": {"e": "\u0435", "s": "\u0455", "h": "\u04bb", "w": "\u051d", "q": "\u051b", "y": "\u04af"},
    "cherokee_math": {"a": "\U0001d41a", "e": "\U0001d41e", "o": "\U0001d428", "s": "\U0001d42c", "t": "\U0001d42d"},
    "digits_for_o": {"o": "\u09e6"},
    "digits_for_o_thai": {"o": "\u0e50"},
    # small Greek letters by their own look (η is n, not the h of its capital Η)
    "greek_small": {"n": "\u03b7", "v": "\u03bd", "u": "\u03c5", "o": "\u03bf", "a": "\u03b1", "k": "\u03ba"},
    # a right-to-left letter alone among Latin ones is shown where it stands
    # (Arabic heh for o, Hebrew vav for l and tet for v)
    "rtl_letters": {"o": "\u0647", "l": "\u05d5", "v": "\u05d8"},
    # signs that look like letters: estimated, APL iota and rho, multiplication, logical or, divides
    "signs": {"e": "\u212e", "i": "\u2373", "p": "\u2374", "x": "\u00d7", "v": "\u2228", "l": "\u2223"},
    # a capital I's look-alike (Cyrillic) for a small l among small letters
    "capital_i_for_l": {"l": "\u0406"},
    # the ASCII capital I for a small l ("PayPaI", "pIease"), which case folding makes an i
    "ascii_capital_i_for_l": {"l": "I"},
    # two letters for one, as Unicode's confusables data has it: "rn" for "m" ("arnazon")
    "rn_for_m": {"m": "rn"},
}
# look-alike capitals, swapped into the text written in capitals
CAPITALS = {
    "greek_capitals": dict(
        zip(
            "ABEHIKMNOPTXYZ",
            "\u0391\u0392\u0395\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a7\u03a5\u0396",
            strict=False,
        )
    ),
    "cyrillic_capitals": dict(
        zip("ABCEHKMOPTXY", "\u0410\u0412\u0421\u0415\u041d\u041a\u041c\u041e\u0420\u0422\u0425\u0423", strict=False)
    ),
    "cherokee_capitals": dict(
        zip(
            "ABCDEGHJKLMOPRSTVWZ",
            "\u13aa\u13f4\u13df\u13a0\u13ac\u13c0\u13bb\u13ab\u13e6\u13de\u13b7\u13be\u13e2\u13a1\u13da\u13a2\u13d9\u13b3\u13c3",
            strict=False,
        )
    ),
}
# kinds that swap every letter they can: a share would leave enough words whole to match
EVERY_LETTER = {"greek_small", "cherokee_small", "rn_for_m", *CAPITALS}
# Cherokee small letters (what case folding makes of the capitals), swapped into lowercase text
SWAPS["cherokee_small"] = {latin.lower(): cherokee.lower() for latin, cherokee in CAPITALS["cherokee_capitals"].items()}


# a letter, digit or sign turned half a circle, as "flip text" generators turn it
TURNED = {
    **dict(zip("abcdefghijklmnopqrstuvwxyz0123456789", "ɐqɔpǝɟƃɥᴉɾʞlɯuodbɹsʇnʌʍxʎz0ƖᄅƐㄣϛ9ㄥ86", strict=True)),
    **dict(zip("!?.',&_()[]{}<>", "¡¿˙,'⅋‾)(][}{><", strict=True)),
}
# leetspeak: the digits read as these letters, swapped into a share of the letters they stand for
LEET = {"o": "0", "i": "1", "e": "3", "a": "4", "s": "5", "t": "7"}
# and the symbols
SYMBOLS = {"i": "!", "e": "€", "s": "$", "a": "@", "l": "|"}


def _words_alone(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` made to each word that is not a mention or a link."""
    return " ".join(word if word.startswith(("@", "http")) else change(word) for word in text.split(" "))


def _flag_letter(char: str) -> str:
    """An ASCII letter as its regional indicator and a zero-width space; anything else as it is."""
    if char.isascii() and char.isalpha():
        return chr(0x1F1E6 + ord(char.lower()) - ord("a")) + "\u200b"
    return char


def spoof(text: str, kind: str, rng: random.Random) -> str:
    if kind == "rtl_override":  # a line break ends an override's span: each line is written backwards
        return "\n".join("\u202e" + line[::-1] for line in text.split("\n"))
    if kind in ("leetspeak", "symbols"):
        swap = LEET if kind == "leetspeak" else SYMBOLS
        return _words_alone(
            text, lambda word: "".join(swap[c] if c in swap and rng.random() < 0.6 else c for c in word)
        )
    if kind == "spaced_out":
        return "   ".join(word if word.startswith(("@", "http")) else " ".join(word) for word in text.split(" "))
    if kind == "vertical":  # a letter a line, a blank line between words
        return "\n\n".join(word if word.startswith(("@", "http")) else "\n".join(word) for word in text.split(" "))
    if kind == "marked":  # one mark between the letters of each word: "F.R.E.E", "c-l-a-i-m"
        mark = rng.choice(".-*·")
        return " ".join(word if word.startswith(("@", "http")) else mark.join(word) for word in text.split(" "))
    if kind == "broken":  # each word broken by one mark: "cl.aim yo,ur fr-ee"

        def broken(word: str) -> str:
            if len(word) < 2 or not word.isalpha():
                return word
            cut = rng.randrange(1, len(word))
            return word[:cut] + rng.choice(".,-;/") + word[cut:]

        return _words_alone(text, broken)
    if kind == "elongated":  # a letter of most words drawn out, as a reader stresses it: "freeeee", "sooo"

        def drawn_out(word: str) -> str:
            letters = [at for at, char in enumerate(word) if char.isalpha()]
            if len(letters) < 2 or rng.random() < 0.3:
                return word
            at = rng.choice(letters)
            return word[: at + 1] + word[at] * rng.randint(2, 5) + word[at + 1 :]

        return _words_alone(text, drawn_out)
    if kind == "emoji_joined":  # the letters of each word joined by one emoji: "f🔥r🔥e🔥e"
        emoji = rng.choice(["🔥", "❤️", "👉", "💰", "✨"])
        return _words_alone(text, lambda word: emoji.join(word) if word.isalpha() else word)
    if kind == "upside_down":  # as a "flip text" generator writes it; the mentions and links it leaves
        flipped = [word for word in text.split() if not word.startswith(("@", "http"))]
        kept = [word for word in text.split() if word.startswith(("@", "http"))]
        return " ".join(kept + ["".join(TURNED.get(c, c) for c in " ".join(flipped).lower())[::-1]])
    if kind == "flag_letters":
        return _words_alone(text, lambda word: "".join(_flag_letter(c) for c in word))
    if kind == "any_confusable":  # as a homoglyph generator picks them
        table = look_alikes()
        return _words_alone(
            text, lambda word: "".join(rng.choice(table[c]) if c in table and rng.random() < 0.3 else c for c in word)
        )
    if kind in CAPITALS:
        swaps, text = CAPITALS[kind], text.upper()
    else:
        swaps = SWAPS[kind]
    share = 1.0 if kind in EVERY_LETTER else 0.6
    return "".join(swaps[c] if c in swaps and rng.random() < share else c for c in text)


def replayed(records: list[dict[str, str]]) -> dict[str, bool]:
    """Whether ``streamfilter replay`` flags each record duplicate, by id."""
    with tempfile.TemporaryDirectory() as work:
        stream, verdicts = Path(work) / "stream.jsonl", Path(work) / "verdicts.jsonl"
        stream.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        command = [sys.executable, "-m", "streamfilter", "replay", str(stream), "--verdicts", str(verdicts)]
        # one seed for every run, so that the bands that find a copy are the same each time; and run
        # from the work directory: from this checkout's, ``-m`` would import it ahead of PYTHONPATH
        options = ["--seed", "1", "--out", "/dev/null"]
        subprocess.run([*command, *options], check=True, stderr=subprocess.DEVNULL, cwd=work)
        return {v["id"]: v["verdict"] == "duplicate" for v in map(json.loads, verdicts.read_text().splitlines())}


def tallied(labels: dict[str, Hashable], flagged: dict[str, bool]) -> tuple[Counter[Hashable], Counter[Hashable], int]:
    """(copies flagged, copies, originals flagged), the copies by label; an original's label is None."""
    hits: Counter[Hashable] = Counter()
    totals: Counter[Hashable] = Counter()
    false_positives = 0
    for post_id, label in labels.items():
        if label is None:
            false_positives += flagged[post_id]
        else:
            totals[label] += 1
            hits[label] += flagged[post_id]
    return hits, totals, false_positives


def with_copies(
    texts: list[str], copy: Callable[[int, str], tuple[str, Hashable]]
) -> tuple[list[dict[str, str]], dict[str, Hashable]]:
    """Each text as an original (id ``o{n}``, label None), and after every
    other one its copy (id ``c{n}``), whose text and label ``copy(n, text)`` gives."""
    records: list[dict[str, str]] = []
    labels: dict[str, Hashable] = {}
    for n, text in enumerate(texts):
        records.append({"id": f"o{n}", "text": text})
        labels[f"o{n}"] = None
        if n % 2 == 0:
            copied, labels[f"c{n}"] = copy(n, text)
            records.append({"id": f"c{n}", "text": copied})
    return records, labels


def caught(
    texts: list[str], copy: Callable[[int, str], tuple[str, Hashable]]
) -> tuple[int, Counter[Hashable], Counter[Hashable], float, float]:
    """Replay ``with_copies(texts, copy)``: (posts, copies flagged and copies
    by label, precision, recall)."""
    records, labels = with_copies(texts, copy)
    hits, totals, false_positives = tallied(labels, replayed(records))
    return len(records), hits, totals, *scores(hits, totals, false_positives)


def scores(hits: Counter[Hashable], totals: Counter[Hashable], false_positives: int) -> tuple[float, float]:
    """Precision and recall over every copy (``tallied``'s counts)."""
    true_positives = sum(hits.values())
    return true_positives / max(true_positives + false_positives, 1), true_positives / sum(totals.values())


def main() -> int:
    rng = random.Random(39)
    with DATA.open(encoding="utf-8") as handle:
        texts = list(dict.fromkeys(row["text"] for row in csv.DictReader(handle) if len(row["text"].split()) >= 6))
    texts = texts[:4000]
    kinds = [
        *SWAPS,
        *CAPITALS,
        "rtl_override",
        "leetspeak",
        "symbols",
        "spaced_out",
        "vertical",
        "marked",
        "broken",
        "elongated",
        "emoji_joined",
        "flag_letters",
        "upside_down",
        "any_confusable",
    ]

    def spoofed(n: int, text: str) -> tuple[str, str]:
        kind = kinds[(n // 2) % len(kinds)]
        return spoof(text, kind, rng), kind

    records, labels = with_copies(texts, spoofed)
    flagged = replayed(records)
    from streamfilter import normalize
    from streamfilter._shingle import hashed_form

    def compared(text: str) -> str:  # the words as the filter hashes them
        return hashed_form(normalize(text))

    originals = {record["id"][1:]: record["text"] for record in records if record["id"].startswith("o")}
    exact = Counter(
        labels[record["id"]]
        for record in records
        if record["id"].startswith("c") and compared(record["text"]) == compared(originals[record["id"][1:]])
    )
    hits, totals, false_positives = tallied(labels, flagged)
    precision, recall = scores(hits, totals, false_positives)
    print(f"{len(records):,} posts, {sum(totals.values()):,} spoofed copies")
    print("| spoof | copies | recall | read as the original's very words |\n|---|---|---|---|")
    for kind in kinds:
        print(f"| {kind} | {totals[kind]} | {hits[kind] / totals[kind]:.3f} | {exact[kind] / totals[kind]:.3f} |")
    print(f"precision {precision:.4f}  recall {recall:.4f}  ({false_positives} originals flagged)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
