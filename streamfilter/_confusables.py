"""Copies a reader cannot tell from their original: look-alike letters and bidi overrides.

Pure functions, no I/O but reading the package's own data once.

Look-alikes. ``data/confusables.txt`` is Unicode's own confusables data (UTS
#39, Unicode Security Mechanisms), as Unicode publishes it. From it, at first
use, a table is generated of every character that imitates ASCII letters or
digits: its prototype, casefolded (Armenian ``օ`` and the Bengali, Thai and
Devanagari zeros read as ``o``, Armenian ``ո`` as ``n``, Latin ``ɑ`` as ``a``,
mathematical and Cherokee letters, ...). It is applied only to a word made
of ASCII letters and such characters alone, the shape of a spoof: a word
with any other letter, or none in ASCII, is text of its own script (Greek,
Armenian, Cyrillic) and keeps its meaning. Characters of
right-to-left scripts are left alone (they cannot sit inside a Latin word
unseen), and so are ideographs, and the Greek and basic Cyrillic letters:
the fold of Cyrillic and Greek letters in ``_normalize`` runs before this,
as it always did, and Russian or Greek text is left as that fold leaves it.

To take a newer Unicode release, replace ``data/confusables.txt`` with the
file of that release and bump ``NORMALIZER_VERSION``.

Bidi overrides. U+202E RIGHT-TO-LEFT OVERRIDE shows the characters after it,
up to U+202C POP DIRECTIONAL FORMATTING or the end of the line, in reverse: a
copy written backwards after it reads as the original. Such a span is judged
as displayed, reversed. U+202D LEFT-TO-RIGHT OVERRIDE does the same to
right-to-left text.
"""

from __future__ import annotations

import functools
import unicodedata
from importlib import resources

import regex

__all__ = ["CONFUSABLES_VERSION", "displayed", "fold_lookalikes"]

CONFUSABLES_VERSION = "13.0.0"  # the release of data/confusables.txt

_RLO, _LRO = "\u202e", "\u202d"  # the overrides; U+202C (PDF) ends their span
_OVERRIDE_SPAN = regex.compile("([\u202e\u202d])([^\u202c\n]*)\u202c?")
_RIGHT_TO_LEFT_LETTER = regex.compile(r"[\p{Bidi_Class=R}\p{Bidi_Class=AL}]")
# Letters a look-alike is never taken from: right to left, ideographs, and the
# Greek and basic Cyrillic letters, which _normalize's own fold already reads
# (Russian and Greek text stays as it was; Cyrillic extensions such as ү, ԝ fold here).
_KEPT = regex.compile(r"[\p{Bidi_Class=R}\p{Bidi_Class=AL}\p{Ideographic}\u0370-\u03ff\u0400-\u045f]")
_ASCII_LETTER = regex.compile(r"[a-z]")


def displayed(text: str) -> str:
    """``text`` with each bidi-overridden span in the order it is displayed
    (see the module docstring); the override characters themselves go."""
    if _RLO not in text and _LRO not in text:
        return text
    return str(_OVERRIDE_SPAN.sub(_as_displayed, text))


def _as_displayed(span: regex.Match[str]) -> str:
    override, inside = str(span.group(1)), str(span.group(2))
    if override == _RLO or _RIGHT_TO_LEFT_LETTER.search(inside):
        return inside[::-1]
    return inside


@functools.cache
def ascii_lookalikes() -> dict[int, str]:
    """Every non-ASCII character that Unicode's confusables data says imitates
    ASCII letters or digits -> those, in every script (the report flags them)."""
    table: dict[int, str] = {}
    data = resources.files("streamfilter").joinpath("data/confusables.txt").read_text(encoding="utf-8-sig")
    for line in data.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2:
            continue
        source = fields[0].split()
        if len(source) != 1:
            continue
        code_point = int(source[0], 16)
        prototype = unicodedata.normalize("NFKC", "".join(chr(int(part, 16)) for part in fields[1].split())).casefold()
        if code_point > 0x7F and prototype.isascii() and prototype.isalnum():
            table[code_point] = prototype
    return table


@functools.cache
def _to_ascii() -> dict[int, str]:
    """``ascii_lookalikes`` without the letters of scripts the filter keeps as
    their own (``_KEPT``: Greek, basic Cyrillic, right-to-left scripts, ideographs)."""
    return {code: prototype for code, prototype in ascii_lookalikes().items() if not _KEPT.match(chr(code))}


def fold_lookalikes(words: list[str]) -> list[str]:
    """``words`` (lowercase, folded) with each one made of ASCII letters and
    look-alikes of them spelled in ASCII; others as they are. A word with any
    other letter is text of its own script (a Russian word the Cyrillic fold
    half-spelled in Latin keeps its ``и`` and ``л``), and stays."""
    table = None
    for index, word in enumerate(words):
        if word.isascii() or _ASCII_LETTER.search(word) is None:
            continue
        if table is None:
            table = _to_ascii()
        folded = word.translate(table)
        if folded.isascii():
            words[index] = folded
    return words
