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
Armenian, Cyrillic, Arabic) and keeps its meaning. A right-to-left letter
between Latin ones is shown where it stands (a single one is never seen
reordered): Arabic ``ه`` and Hebrew ``ס`` inside ``fهllow`` read as ``o``.
Ideographs are left alone, and so are the Greek and basic Cyrillic letters:
the fold of Cyrillic and Greek letters in ``_normalize`` runs before this,
as it always did, and Russian or Greek text is left as that fold leaves it.

Spoofs spelled by look. The fold above runs after case folding, which
loses how a letter looked: Greek small ``η`` looks like ``n`` while its
capital ``Η`` looks like ``H``, and Cherokee capitals fold to small letters
the table may not have. So before any folding, ``spell_spoofs`` spells a
word made of Latin letters and look-alikes alone by how each character
looks, where it mixes the two, or where every letter of the post is Latin
or a look-alike: each character by how it looks in its own case (``joiη
ηow`` reads ``join now``, ``ᏟLᎪIᎷ ᎪᎢ`` reads ``CLAIM AT``), or, in a post
whose words mostly begin with a capital, each by how its capital looks: its
small look-alikes are mostly capitals that a case change made small
(``Sηоuld Ηаvе``, a title-cased ``SΗОULD ΗАVЕ``, reads ``SHould HAvE``).
A capital I's look-alike among small letters spoofs an ``l`` (``pІease``),
and a sign that looks like a letter is one inside a word with a Latin
letter (``pl℮ase``, ``e×tra``; ``2 × 3`` keeps its sign).
A post in Greek, Cyrillic or Cherokee has letters of its script that look
like no Latin letter, and keeps its words.

To take a newer Unicode release, replace ``data/confusables.txt`` with the
file of that release and bump ``NORMALIZER_VERSION``.

Leetspeak. Digits written for the letters they look like, inside a word
(``t0day``, ``n3w``, ``ju5t``, ``w1n``), are read as those letters
(``read_leet``), in a word of ASCII letters and digits that mixes the two:
a word of digits alone is a number. A run of 1s reads as l's (``he11o``), a
1 alone as i; 2, 6, 8 and 9 stand for no one letter and stay.

Symbols for letters. In a word of ASCII letters, digits and apostrophes,
``!`` and ``¡`` are read as i, ``|`` as l, ``$`` as s, ``€`` as e and ``@``
as a (``W!n``, ``fr€€``, ``ca$h``, ``cl@im``, ``b|@st``, ``!t'$``;
``read_symbols``), after the quotes, brackets and marks around the word are
set aside (``tr!p!`` is ``trip!``). A word keeps its symbols where they are
what they are: a sentence run on into the next (``great!Thanks``), a run
of ``!`` (``so!!!good``), an amount (``$30``, ``US$``, ``R$``), a cashtag
(``$AAPL``), a mention, glued to the word before it or not (an ``@``
before a capital or four letters or more: ``thanks@united``), an email
address or a link (a ``.``, a ``/``), and a word with no letter.

Bidi overrides. U+202E RIGHT-TO-LEFT OVERRIDE shows the characters after it,
up to U+202C POP DIRECTIONAL FORMATTING or the end of the line, in reverse: a
copy written backwards after it reads as the original. Such a span is judged
as displayed, reversed. U+202D LEFT-TO-RIGHT OVERRIDE does the same to
right-to-left text.

Regional indicators. ``🇦`` to ``🇿`` are shown in pairs: a pair that names
a region is its flag (``🇫🇷``), and any other one is shown as boxed capital
letters, as is one left alone (``🇼 🇮 🇳``, or apart by zero-width
characters). Those read as the letters they show (``read_indicators``);
flags stay emoji.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata

import regex

from ._compiled import chosen, kernel

__all__ = [
    "CONFUSABLES_VERSION",
    "LETTER_LOOKALIKES",
    "build_tables",
    "displayed",
    "fold_lookalikes",
    "may_hold_leet",
    "read_indicators",
    "read_leet",
    "read_symbols",
    "spell_spoofs",
    "spoof_spelling",
]

CONFUSABLES_VERSION = "13.0.0"  # the release of data/confusables.txt

# The fold of every text after case folding (``_normalize``): Cyrillic and
# Greek letters that render like Latin ones, and Latin small capitals and other
# letters NFKC leaves alone, as the Latin letter.
LETTER_LOOKALIKES = str.maketrans(
    {
        # Cyrillic (lowercase after casefold) that renders like Latin
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "ѕ": "s",
        "һ": "h",
        "ԁ": "d",
        "ԛ": "q",
        "ԝ": "w",
        "ӏ": "l",
        # Greek. Both cases map alike (casefold comes first), so where the
        # capital and the small letter look like different Latin letters (Η/η,
        # Μ/μ, Ν/ν, Υ/υ), the capital's look wins: spoofs are mostly capitals.
        "α": "a",
        "β": "b",
        "ε": "e",
        "η": "h",
        "ι": "i",
        "κ": "k",
        "μ": "m",
        "ν": "n",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "y",
        "χ": "x",
        "ζ": "z",
        "γ": "y",
        "ω": "w",
        # Latin small capitals and other letters that NFKC leaves alone
        "ᴀ": "a",
        "ʙ": "b",
        "ᴄ": "c",
        "ᴅ": "d",
        "ᴇ": "e",
        "ғ": "f",
        "ɢ": "g",
        "ʜ": "h",
        "ɪ": "i",
        "ᴊ": "j",
        "ᴋ": "k",
        "ʟ": "l",
        "ᴍ": "m",
        "ɴ": "n",
        "ᴏ": "o",
        "ᴘ": "p",
        "ʀ": "r",
        "ꜱ": "s",
        "ꜰ": "f",
        "ᴛ": "t",
        "ᴜ": "u",
        "ᴠ": "v",
        "ᴡ": "w",
        "ʏ": "y",
        "ᴢ": "z",
        "ı": "i",
        "ſ": "s",
        "ɡ": "g",
    }
)

_RLO, _LRO = "\u202e", "\u202d"  # the overrides; U+202C (PDF) ends their span
_OVERRIDE_SPAN = regex.compile("([\u202e\u202d])([^\u202c\n]*)\u202c?")
_RIGHT_TO_LEFT_LETTER = regex.compile(r"[\p{Bidi_Class=R}\p{Bidi_Class=AL}]")
# Letters a look-alike is never taken from: ideographs, and the Greek and
# basic Cyrillic letters, which _normalize's own fold already reads (Russian
# and Greek text stays as it was; Cyrillic extensions such as ү, ԝ fold here).
_KEPT = regex.compile(r"[\p{Ideographic}\u0370-\u03ff\u0400-\u045f]")
_ASCII_LETTER = regex.compile(r"[a-z]")
# Letters ``spell_spoofs`` never reads as Latin: right to left, and ideographs.
_FOREIGN = regex.compile(r"[\p{Bidi_Class=R}\p{Bidi_Class=AL}\p{Ideographic}]")


def displayed(text: str) -> str:
    """``text`` with each bidi-overridden span in the order it is displayed
    (see the module docstring); the override characters themselves go."""
    if _RLO not in text and _LRO not in text:
        return text
    return str(_OVERRIDE_SPAN.sub(_as_displayed, text))


def spoof_spelling(text: str) -> str | None:
    """All that the spelling of ``text``'s ASCII words can change in how
    ``spell_spoofs(displayed(text))`` reads it: "" with no look-alike (it
    is ``text``); with some, "C" or "c", whether most of its words begin
    with a capital (which picks a spoof's spelling); None under a bidi
    override, whose span is read backwards."""
    if _RLO in text or _LRO in text:
        return None
    if not _holds_lookalike(text):
        return ""
    return "C" if _mostly_capitalised(text) else "c"


def _mostly_capitalised(text: str) -> bool:
    """A post whose words mostly begin with a capital was written in capitals
    or title case: its small look-alikes are mostly capitals a case change made small."""
    words: list[str] = _LETTER_RUN.findall(text)
    return sum(word[:1].isupper() for word in words) * 2 >= len(words)


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
    for code_point, prototype in _confusables():
        prototype = unicodedata.normalize("NFKC", prototype).casefold()
        if code_point > 0x7F and prototype.isascii() and prototype.isalnum():
            table[code_point] = prototype
    return table


@functools.cache
def _confusables() -> tuple[tuple[int, str], ...]:
    """(code point, its prototype as Unicode gives it) of every single
    character in ``data/confusables.txt``."""
    # Read as bytes, its fields found by one pattern: a line at a time, the
    # 700 kB of names and comments cost each process twice the time.
    with open(os.path.join(os.path.dirname(__file__), "data", "confusables.txt"), "rb") as handle:
        data = handle.read()
    return tuple(
        (int(source, 16), "".join([chr(int(part, 16)) for part in prototype.split()]))
        for source, prototype in _CONFUSABLE_LINE.findall(data)
    )


# A line of confusables.txt that maps one code point: "05AD ;\t0596 ;\tMA\t# ...".
_CONFUSABLE_LINE = re.compile(rb"^[ \t]*([0-9A-Fa-f]+)[ \t]*;[ \t]*([0-9A-Fa-f][0-9A-Fa-f \t]*?)[ \t]*;", re.MULTILINE)


@functools.cache
def _to_ascii() -> dict[int, str]:
    """``ascii_lookalikes`` without the letters of scripts the filter keeps as
    their own (``_KEPT``: Greek, basic Cyrillic, ideographs)."""
    return {code: prototype for code, prototype in ascii_lookalikes().items() if not _KEPT.match(chr(code))}


@functools.cache
def _by_look() -> dict[int, str]:
    """Every non-ASCII character that looks like an ASCII letter or digit in
    its own case -> that letter (Greek ``η`` -> ``n``, ``Η`` -> ``H``),
    from the confusables data with marks dropped from the prototype; a
    character whose other case has no entry of its own looks like its
    letter too (Cherokee small ``ꮯ`` as its capital ``Ꮯ``). Right-to-left
    letters and ideographs are left out, as in ``_to_ascii``."""
    table: dict[int, str] = {}
    for code_point, given in _confusables():
        char = chr(code_point)
        if code_point <= 0x7F or _FOREIGN.match(char):
            continue
        prototype = unicodedata.normalize("NFKD", given)
        if not _LATIN.match(char):  # a Latin letter with a mark is a letter of its own (ł, ø)
            prototype = "".join(mark for mark in prototype if not unicodedata.combining(mark))
        if len(prototype) == 1 and prototype.isascii() and prototype.isalnum():
            # Unicode's prototype of a capital I is "l" (they look alike); a
            # capital that looks like either stands for the capital
            table[code_point] = "I" if prototype == "l" and char.isupper() else prototype
    for code, letter in list(table.items()):
        for other in {chr(code).lower(), chr(code).upper(), chr(code).casefold()}:
            if len(other) == 1 and not other.isascii() and ord(other) not in table:
                table[ord(other)] = letter.lower() if other.islower() else letter.upper()
    return table


@functools.cache
def _by_capital_look() -> dict[int, str]:
    """``_by_look`` with each small letter read as its capital looks (``η``
    as ``H``): for a word written in capitals or title case, whose small
    look-alikes are mostly capitals a case change made small ("SΗОULD",
    title-cased, is "Sηоuld")."""
    table = dict(_by_look())
    for code in list(table):
        capital = chr(code).upper()
        if chr(code).islower() and len(capital) == 1 and ord(capital) in table:
            table[code] = table[ord(capital)].lower()
    return table


def build_tables() -> None:
    """Build now the tables a first text with a look-alike would (parsing
    ``data/confusables.txt`` is most of it), where that time would be idle anyway."""
    _lookalike_bits()
    _by_capital_look()
    _to_ascii()
    _spoof_run()


@functools.cache
def _lookalikes() -> frozenset[str]:
    """The look-alikes ``_by_look`` spells, as characters: whether a text
    holds one is a set's question, which a pattern of a character class of
    all of them answers far slower (docs/benchmarks.md)."""
    return frozenset(map(chr, _by_look()))


@functools.cache
def _lookalike_bits() -> bytes:
    """``_lookalikes()`` as a bitmap of code points (bit c % 8 of byte c // 8), for the kernel."""
    bits = bytearray(0x110000 // 8)
    for char in _lookalikes():
        code = ord(char)
        bits[code >> 3] |= 1 << (code & 7)
    return bytes(bits)


def _c_holds_lookalike(text: str) -> bool:
    """``_py_holds_lookalike``, in C, without a str made for each character (``_kernel_normalize.c``)."""
    return bool(kernel.holds_any(text, _lookalike_bits()))


def _py_holds_lookalike(text: str) -> bool:
    """Whether ``text`` holds a look-alike that ``spell_spoofs`` spells."""
    return not _lookalikes().isdisjoint(text)


_holds_lookalike = chosen(_c_holds_lookalike, _py_holds_lookalike)


# A character's class, asked one character at a time and kept: a text's
# characters are few and recur. The look-alikes are a set's question here
# too: a character class of all of them is slow to compile, in every process.
_DIGIT_LATIN_OR_MARK = regex.compile(r"[0-9\p{Latin}\p{M}]")
# A letter of another script than Latin: where one is no look-alike, the post
# is written in a script of its own (asked of the post's letters in order, so
# that a post in Thai or Japanese answers at its first letter).
_OTHER_SCRIPT_LETTER = regex.compile(r"[^\P{L}\p{Latin}]")


@functools.lru_cache(maxsize=1 << 16)
def _in_spoof_word(char: str) -> bool:
    """Whether ``char`` may be part of a spoofed word: an ASCII digit, a Latin letter, a mark or a look-alike."""
    return char in _lookalikes() or _DIGIT_LATIN_OR_MARK.fullmatch(char) is not None


_LETTER_RUN = regex.compile(r"[\p{L}\p{N}\p{M}]+")
_LATIN = regex.compile(r"\p{Latin}")


@functools.cache
def _signs() -> frozenset[str]:
    """The look-alikes that are signs, not letters, digits or marks (``℮``,
    ``×``, ``∪``), but for currency signs (``US¥``, ``50¢``) and those that
    NFKC folds to letters anyway (``ⓛ``)."""
    return frozenset(char for char in _lookalikes() if _is_sign(char))


def _is_sign(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] not in "LNM" and category != "Sc" and not unicodedata.normalize("NFKC", char).isalnum()


@functools.cache
def _spoof_run() -> regex.Pattern[str]:
    """A run of letters, digits, marks and look-alike signs: a word as ``spell_spoofs`` reads it."""
    signs = "".join(f"\\U{ord(char):08x}" for char in sorted(_signs()))
    return regex.compile(f"[\\p{{L}}\\p{{N}}\\p{{M}}{signs}]+")


def _as_small_l(word: str, spelt: str) -> str:
    """``spelt`` (``word`` spelled by look) with each capital I that a
    look-alike spelled inside a word of small letters read as the ``l`` it
    spoofs: after a letter, with a small one on either side (``pІease``,
    ``FІight``; ``CLAІM`` and a word's first letter stay I). A styled I stays
    one (``𝐜𝐡𝐞𝐜𝐤𝐈𝐧``, ``ｃｈｅｃｋＩｎ`` are ``checkIn``)."""
    chars = list(spelt)
    for at in reversed(range(1, min(len(word), len(chars)))):  # from the right: "FІІow" is "Follow"
        if (
            chars[at] == "I"
            and chars[at - 1].isalpha()
            and (chars[at - 1].islower() or at + 1 < len(chars) and chars[at + 1].islower())
            and unicodedata.normalize("NFKC", word[at]) != "I"
        ):
            chars[at] = "l"
    return "".join(chars)


def spell_spoofs(text: str, *, only_whole: bool = False) -> str:
    """``text`` with its spoofed words spelled by how they look (see the
    module docstring); any other text as it is. ``only_whole``: only a text
    whose every letter is Latin or a look-alike."""
    if not _holds_lookalike(text):
        return text
    lookalikes = _lookalikes()
    # every letter of the post Latin or a look-alike: even its words with no
    # Latin letter are spoofs (a post in a script of its own has letters that
    # look like none); otherwise only its words that mix the two are, and a
    # post with no Latin letter has none (most posts in Cyrillic or Greek)
    every_word = all(letter.group() in lookalikes for letter in _OTHER_SCRIPT_LETTER.finditer(text))
    if not every_word and (only_whole or _LATIN.search(text) is None):
        return text
    tables: list[dict[int, str]] = []  # chosen at the first spoof: most posts with look-alikes have none
    signs = _signs()

    def spelled(run: regex.Match[str]) -> str:
        word = str(run.group())
        if not (
            all(map(_in_spoof_word, word)) and not lookalikes.isdisjoint(word) and (every_word or _LATIN.search(word))
        ):
            return word
        if not signs.isdisjoint(word) and _LATIN.search(word) is None:
            return word  # a sign among digits or on its own is what it is: "2×3"
        if not tables:
            tables.append(_by_capital_look() if _mostly_capitalised(text) else _by_look())
        spelt = word.translate(tables[0])
        return _as_small_l(word, spelt) if "I" in spelt else spelt

    return str(_spoof_run().sub(spelled, text))


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


# Whether a text may hold a word to read as leetspeak: a digit after a letter,
# or before one, where an apostrophe between goes before the text is split
# ("50's" is "50s"). It starts at a digit, so most of a text is passed over at
# one test a character.
may_hold_leet = re.compile(r"[0-9](?:(?<=[A-Za-z'`][0-9])|['`]*[A-Za-z])").search
_LEET = str.maketrans("013457", "oieast")
_ONES = re.compile("11+")


def read_leet(words: list[str]) -> list[str]:
    """``words`` with each ASCII word of letters and digits that mixes the
    two spelled with letters for its digits (see the module docstring)."""
    read = words
    for index, word in enumerate(words):
        # most words are letters alone: one test passes them
        if word.isalpha() or not word.isascii() or not word.isalnum() or word.isdigit():
            continue
        if read is words:
            read = list(words)
        read[index] = (_ONES.sub(_ells, word) if "11" in word else word).translate(_LEET)
    return read


def _ells(ones: re.Match[str]) -> str:
    return "l" * len(ones.group())


# Symbols that stand for letters inside a word (see the module docstring).
_SYMBOL_LETTERS = str.maketrans({"!": "i", "¡": "i", "|": "l", "$": "s", "€": "e", "@": "a"})
# A word with a symbol in it: possessive, so that a long word without one is passed in one step.
_WORD_WITH_SYMBOL = re.compile(r"(?<!\S)(?!@)[^\s!¡|$€@]*+[!¡|$€@]\S*")  # a mention is not one
_OPENING_MARKS = "\"'“‘«([{#¡¿"
_CLOSING_MARKS = "\"'”’»)]}.,;:?!…"
# a word that may be read: ASCII letters and digits, apostrophes, hyphens and the symbols
_READABLE = re.compile(r"[A-Za-z0-9'’\-!¡|$€@]+")
# ... but not where a symbol is what it is: a sentence run on into the next
# ("great!Thanks"), a run of "!" ("so!!!good"), an amount ("$30", "US$",
# "R$"), a cashtag ("$AAPL"), or a mention, glued on ("thanks@united") or not
_PUNCTUATION_AFTER_ALL = re.compile(
    r"[a-z][!¡][A-Z]|[!¡]{2}|\$[0-9.,]|^[A-Z]{1,3}\$$|^\$[A-Z]|^@|@(?:[A-Z]|[A-Za-z0-9_]{4})"
)
# where to look for such a word: a symbol after a letter or an apostrophe (a
# "!" after a letter, with more of the word after it), or one opening a word
# of small letters. It starts at a symbol, so most of a text is passed over at
# one test a character.
_MAY_READ = re.compile(
    r"[!¡|$€@](?:(?<=[A-Za-z'’][|$€@])|(?<=[A-Za-z][!¡])(?=[A-Za-z0-9'’|$€@])|(?<=[!|$€])(?<!\S.)(?=[a-z]))"
)


def read_symbols(text: str) -> str:
    """``text`` with each symbol that stands for a letter inside a word read
    as that letter (see the module docstring)."""
    if _MAY_READ.search(text) is None:
        return text  # nearly every text: its "@" and "!" open mentions and close sentences
    return _WORD_WITH_SYMBOL.sub(_read_word, text)


def _read_word(match: re.Match[str]) -> str:
    word = match.group()
    if _MAY_READ.search(word) is None:  # only where the check finds it, so that it passes over no other
        return word
    core = word.lstrip(_OPENING_MARKS).rstrip(_CLOSING_MARKS)
    if core.startswith("!!"):  # opened by a run of them: punctuation
        core = core.lstrip("!")
    if not core or _READABLE.fullmatch(core) is None or _PUNCTUATION_AFTER_ALL.search(core) is not None:
        return word
    if not any("a" <= char <= "z" or "A" <= char <= "Z" for char in core) or core.isalnum():
        return word
    start = word.index(core)
    return word[:start] + core.translate(_SYMBOL_LETTERS) + word[start + len(core) :]


# Regional indicators, paired from the left as a reader's screen pairs them.
_INDICATORS = re.compile("[\U0001f1e6-\U0001f1ff]{1,2}")
_FIRST_INDICATOR = 0x1F1E6


def read_indicators(text: str) -> str:
    """``text`` with each regional indicator that is shown as a boxed letter
    read as that capital; a pair that is a flag stays (see the module docstring)."""
    if _INDICATORS.search(text) is None:
        return text
    return _INDICATORS.sub(_read_indicator_pair, text)


def _read_indicator_pair(pair: re.Match[str]) -> str:
    shown = pair.group()
    if shown in _flags():
        return shown
    return "".join(chr(ord(indicator) - _FIRST_INDICATOR + ord("A")) for indicator in shown)


@functools.cache
def _flags() -> frozenset[str]:
    """The pairs of regional indicators that are flags, as the emoji data lists them."""
    import emoji  # its data is slow to load: only once a text holds a regional indicator

    return frozenset(
        sequence for sequence in emoji.EMOJI_DATA if len(sequence) == 2 and _INDICATORS.fullmatch(sequence)
    )
