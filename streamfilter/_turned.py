"""Text written upside down, read the right way up.

"Flip text" generators turn a text upside down: each letter becomes the
letter or sign that looks like it turned half a circle (``ɐ`` for a, ``ǝ``
for e, ``ʇ`` for t; ``d`` and ``p``, ``b`` and ``q``, ``n`` and ``u`` trade
places), and the whole text is written backwards, so that it reads from the
right when the screen is turned. A copy dressed so shares no word with its
original. ``read_turned`` turns such a text back.

A text is read as turned when its words (mentions and links aside, which a
generator's user adds after) hold at least three letters that only a turned
text uses, these are at least a third of their letters (in turned English
most letters are such), and each of their other letters is ASCII or turned
too (a generator turns ASCII). Phonetic transcriptions use some of those
letters (``ɹ``, ``ɐ``) among others of their own (``ə``, ``ʊ``, ``ŋ``); Twi
and Lingala write ``ɔ`` and ``ɛ``, so ``ɔ`` is read in a turned text but
never counts as a sign of one, nor do Spanish's ``¡`` and ``¿`` and
Turkish's dotless ``ı``.
"""

from __future__ import annotations

import re

__all__ = ["read_turned"]

# Letters (and digits) that only a turned text uses, as the letter each stands for.
_TURNED_ONLY = {
    "ɐ": "a",
    "ǝ": "e",
    "ɟ": "f",
    "ƃ": "g",
    "ᵷ": "g",
    "ɥ": "h",
    "ᴉ": "i",
    "ɾ": "j",
    "ʞ": "k",
    "ꞁ": "l",
    "ɯ": "m",
    "ɹ": "r",
    "ʇ": "t",
    "ʌ": "v",
    "ʍ": "w",
    "ʎ": "y",
    "∀": "A",
    "ꓭ": "B",
    "Ɔ": "C",
    "ꓷ": "D",
    "Ǝ": "E",
    "Ⅎ": "F",
    "⅁": "G",
    "ꓘ": "K",
    "˥": "L",
    "Ԁ": "P",
    "ꓤ": "R",
    "⊥": "T",
    "∩": "U",
    "Λ": "V",
    "⅄": "Y",
    "Ɩ": "1",
    "ᄅ": "2",
    "Ɛ": "3",
    "ㄣ": "4",
    "ϛ": "5",
    "ㄥ": "7",
}
# What else a turned text holds, read back: letters that trade places, and signs
# (a bracket written backwards is the other bracket).
_TURNED = str.maketrans(
    {
        **_TURNED_ONLY,
        "d": "p",
        "p": "d",
        "b": "q",
        "q": "b",
        "n": "u",
        "u": "n",
        "ɔ": "c",
        "ı": "i",
        "W": "M",
        "M": "W",
        "9": "6",
        "6": "9",
        "¡": "!",
        "¿": "?",
        "˙": ".",
        "'": ",",
        ",": "'",
        "⅋": "&",
        "‾": "_",
        "(": ")",
        ")": "(",
        "[": "]",
        "]": "[",
        "{": "}",
        "}": "{",
        "<": ">",
        ">": "<",
    }
)
_TURNED_LETTER = re.compile("[" + "".join(_TURNED_ONLY) + "]")
# a mention, a hashtag or a link: what a generator's user writes after the turned text
_ADDRESS = re.compile(r"[@#]\w|https?://|www\.")


def read_turned(text: str) -> str:
    """``text`` the right way up where it was written upside down (see the
    module docstring), its mentions and links after its words; any other
    text as it is."""
    if _TURNED_LETTER.search(text) is None:
        return text
    words: list[str] = []
    addresses: list[str] = []
    for token in text.split():
        (words if _ADDRESS.match(token) is None else addresses).append(token)
    turned = sum(len(_TURNED_LETTER.findall(word)) for word in words)
    letters = [char for word in words for char in word if char.isalpha()]
    if turned < 3 or turned * 3 < len(letters) or any(not c.isascii() and ord(c) not in _TURNED for c in letters):
        return text
    return " ".join([word[::-1].translate(_TURNED) for word in reversed(words)] + addresses)
