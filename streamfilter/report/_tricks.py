"""The evasion tricks a copy is dressed up with, as the report flags them."""

from __future__ import annotations

from .._confusables import ascii_lookalikes

__all__ = ["tricks"]

_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_LOOKALIKES = frozenset(ascii_lookalikes())


def tricks(text: str) -> list[str]:
    """The evasion tricks in a text: letters that look like Latin ones, zero-width
    characters, full-width forms."""
    if text.isascii():
        return []
    found = []
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
    return found
