"""The evasion tricks a copy is dressed up with, as the report flags them."""

from __future__ import annotations

import re

from .._confusables import ascii_lookalikes, read_indicators, read_symbols
from .._spelled import close_up_broken, marked_words
from .._turned import read_turned

__all__ = ["tricks"]

_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_LOOKALIKES = frozenset(ascii_lookalikes())
# a digit the normaliser reads as a letter, between two letters of a word ("t0day", "fo11ow"),
# not a number at a word's end or start ("mp3", "3rd", "covid19")
_DIGITS_FOR_LETTERS = re.compile(r"[A-Za-z][013457]+[A-Za-z]")
# four or more letters one gap apart, the same gap throughout: a word spelled
# out ("F R E E", a letter a line)
_SPACED_OUT = re.compile(r"(?<!\S)[^\W\d_](\s)[^\W\d_](?:\1[^\W\d_]){2,}(?!\S)")
_OVERRIDES = ("\u202d", "\u202e")  # bidi overrides: text shown in the other direction
# a letter three times or more in a row ("freeee", "sooo"), which the filter reads once; not a
# Roman numeral's III
_DRAWN_OUT = re.compile(r"((?!I)[^\W\d_])\1{2,}")
_ADDRESSES = ("http", "www.", "@")  # a link's www, a handle's letters: no trick


def tricks(text: str) -> list[str]:
    """The evasion tricks in a text: letters that look like Latin ones, zero-width
    characters, full-width forms, regional indicators for letters, text shown
    reversed, text upside down, digits for letters, symbols for letters,
    letters spaced out, letters joined by marks, words broken by marks,
    letters drawn out."""
    found = []
    if not text.isascii():
        # a look-alike among Latin letters (a Cyrillic а in an English text), not Russian among Russian
        latin = sum(char.isascii() and char.isalpha() for char in text)
        lookalike = sum(ord(char) in _LOOKALIKES for char in text)
        others = sum(char.isalpha() and not char.isascii() for char in text) - lookalike
        if lookalike and latin > others:
            found.append("homoglyphs")
        if any(char in _ZERO_WIDTH for char in text):
            found.append("zero-width characters")
        if any("\uff01" <= char <= "\uff5e" or char == "\u3000" for char in text):
            found.append("full-width forms")
        if read_indicators(text) != text:  # 🇼 🇮 🇳: boxed capitals, not flags
            found.append("flag letters")
        if any(override in text for override in _OVERRIDES):
            found.append("reversed text")
        if read_turned(text) != text:  # "ʇɥƃᴉuoʇ spuǝ"
            found.append("text upside down")
    if _DIGITS_FOR_LETTERS.search(text):
        found.append("digits for letters")
    if read_symbols(text) != text:  # "W!n", "ca$h"; not "$30" nor "great!Thanks"
        found.append("symbols for letters")
    if _SPACED_OUT.search(text):
        found.append("letters spaced out")
    if any(len(word) >= 4 for word in marked_words(text)):  # "F.R.E.E"; not an abbreviation, "U.S.A."
        found.append("letters joined by marks")
    if close_up_broken(text) != text:  # "cl.aim yo,ur fr-ee"
        found.append("words broken by marks")
    if any(_DRAWN_OUT.search(word) for word in text.split() if not word.lower().startswith(_ADDRESSES)):
        found.append("letters drawn out")
    return found
