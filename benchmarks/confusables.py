"""Which of Unicode's look-alikes of ASCII letters the normaliser reads as their letter.

    python benchmarks/confusables.py

For each single character that Unicode's confusables data (UTS #39, as the
package holds it) gives as a look-alike of one ASCII letter, put it in place
of that letter in a word of a plain sentence ("we say please to all of
you", a capital word for a capital letter) and normalise the sentence, its
words then read as the filter hashes them (an l as an i, an m as rn). Prints how many
characters were tried, how many left their word misread, and each of those
with what it was read as. Nothing is judged: this is the normaliser alone,
one character at a time.
"""

from __future__ import annotations

import sys
import unicodedata

from streamfilter import normalize
from streamfilter._confusables import _confusables
from streamfilter._shingle import hashed_form

# a word for each letter of the alphabet, the first of these that holds it
WORDS = "please follow this account and claim your free prize today winning money bonus join now quickly vote zebra jackpot extra"


def look_alikes() -> dict[str, list[str]]:
    """Each ASCII letter -> the single characters the confusables data gives for it."""
    table: dict[str, list[str]] = {}
    for code_point, prototype in _confusables():
        if len(prototype) == 1 and prototype.isascii() and prototype.isalpha():
            table.setdefault(prototype, []).append(chr(code_point))
    return table


def main() -> int:
    word_of: dict[str, str] = {}
    for word in WORDS.split():
        for letter in word:
            word_of.setdefault(letter, word)
    tried, misread = 0, []
    for letter, characters in sorted(look_alikes().items()):
        word = word_of[letter.lower()]
        word = word.upper() if letter.isupper() else word
        for character in characters:
            tried += 1
            read = normalize(f"we say {word.replace(letter, character, 1)} to all of you")
            if hashed_form(read) != hashed_form(f"we say {word.lower()} to all of you"):
                misread.append((letter, character, read))
    print(f"{tried:,} look-alikes of ASCII letters, {len(misread)} leave their word misread")
    for letter, character, read in misread:
        name = unicodedata.name(character, "?")
        print(f"  {letter}  U+{ord(character):04X} {name}: {read!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
