"""Text normalisation: what is left of a post once the noise that copies vary is gone.

Pure functions, no I/O. ``normalize(text)`` returns lowercase words separated
by single spaces, and is idempotent.

What is removed, and why:
- URLs (``https://…``, ``www.…``, bare ``host.tld/path``): campaigns rotate t.co links.
- @mentions and a leading ``RT @user:`` / ``MT @user:``: campaigns rotate the addressee.
- Emoji, including ZWJ sequences, skin tones, flags, keycaps and tag sequences.
  The character set is read from Unicode's emoji properties (``regex``'s
  ``\\p{Emoji}`` and ``\\p{Extended_Pictographic}``) into the table every
  non-ASCII run is translated with: ``emoji.replace_emoji`` per post is far slower.
- Format characters (zero-width spaces and joiners, bidi controls, soft
  hyphens), so ``he\\u200bllo`` reads as ``hello``; and the combining marks
  of scripts where they are accents a copy may drop or add (Latin, Greek,
  Cyrillic, Arabic harakat, Hebrew niqqud, Thai and Lao vowel and tone marks,
  the Devanagari nukta), so ``h̶e̶l̶l̶o̶`` reads as ``hello``. Marks that make
  another letter elsewhere stay: Japanese voiced marks (``が`` is not ``か``),
  Devanagari vowel signs.
- Punctuation; hashtags keep their word (``#KYDerby`` reads as ``kyderby``),
  but a trailing run of many, which each copy of a campaign may draw anew,
  is left out after a text long enough to judge alone (``_hashtags``).

What is folded: HTML entities (``&amp;``), Unicode compatibility forms (NFKC:
fullwidth and halfwidth forms, mathematical bold/italic/script letters, circled
letters, ligatures), case (casefold), Arabic letter forms as Lucene's Arabic
and Persian normalisers fold them (tatweel deleted; alef, hamza, alef maqsura,
teh marbuta, Persian and Urdu kaf, yeh and heh variants to one letter each),
Latin small capitals, letters dressed as symbols
that NFKC leaves alone (negative circled and squared, parenthesized), and
Cyrillic/Greek letters that look like Latin ones (``Неllо`` spelled with
Cyrillic Н and о; Greek capitals count as the Latin letter they look like).
Joiners, variation selectors and skin tones inside a word are deleted, and
blank letters (the Hangul filler) are spaces. A word that mixes ASCII letters
with look-alikes from Unicode's confusables data (Armenian ``օ``, a Bengali
zero for ``o``) is spelled in ASCII, and text under a bidi override is read
in the order it is displayed (``_confusables``).

Tokens. Scripts written with spaces give words. In scripts written without
them (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar and the others in
``_UNSPACED``, decided by each character's Unicode script, never by a
language), and in Hangul, whose spacing varies from writer to writer, a run
of such characters becomes its overlapping character bigrams, as Lucene's CJK
bigram filter cuts it: spaces, emoji and punctuation inside the run do not
change them. A run of one character is one token. Mixed posts mix both.

Reposts: a leading ``RT @user:``, ``MT @user:`` or Weibo's ``//@user:`` marks
a manual repost.

Truncation: when the text ends in ``…`` glued to a word (or in such a ``…``
and then links, as Twitter cuts a status), that last word was
probably cut by a client, so it is dropped (``is_cut_off`` says so; stores
then also compare such a post with the start of earlier ones). A link or
mention glued to the ``…`` is removed anyway, and the word before it is whole.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Callable

import regex

from ._compiled import chosen, from_kernel, kernel
from ._confusables import (
    LETTER_LOOKALIKES,
    build_tables,
    displayed,
    fold_lookalikes,
    may_hold_leet,
    read_indicators,
    read_leet,
    read_symbols,
    spell_spoofs,
    spoof_spelling,
)
from ._hanzi import simplified_forms
from ._hashtags import before_trailing_tags
from ._spelled import (
    close_up_broken,
    close_up_emoji_joined,
    close_up_marked,
    close_up_spaced,
    close_up_spelled_addresses,
    join_spelled_out,
)
from ._turned import read_turned

__all__ = [
    "NORMALIZER_VERSION",
    "has_retweet_prefix",
    "ends_in_a_cut",
    "is_cut_off",
    "load_tables",
    "normalize",
    "normalize_fallback",
    "normalize_words",
    "same_words_key",
    "words_and_cut",
]

# Bump when normalize() changes its output: indexes pin it, because old band
# keys would silently stop matching new ones (CHANGELOG.md says what each changed).
NORMALIZER_VERSION = 23


def _emoji_code_points() -> frozenset[int]:
    """Every character an emoji is made of, beyond ASCII: those Unicode's emoji
    data (UTS #51) gives the Emoji, Emoji_Modifier or Extended_Pictographic
    property, as the ``regex`` module holds it, read in the blocks emoji live
    in. The ``emoji`` package's sequences hold the same characters (a test
    compares the two), but its data is slow to load, and each process
    would load it before its first post with an emoji."""
    emoji_property = regex.compile(r"[\p{Emoji}\p{Emoji_Modifier}\p{Extended_Pictographic}]")
    code_points: set[int] = set()
    for block_start, block_end in _EMOJI_BLOCKS:
        block = "".join(map(chr, range(block_start, block_end)))
        code_points.update(map(ord, emoji_property.findall(block)))
    code_points.update(range(0x1F1E6, 0x1F200))  # regional indicators (flags)
    return frozenset(code_points - _INVISIBLE_IN_EMOJI)


# Where emoji are: Latin-1's two (© and ®; the ASCII digits, '#' and '*' only
# count inside keycap sequences, handled apart), the symbol blocks from
# General Punctuation to CJK Compatibility, and the pictographs from Mahjong
# Tiles to Symbols and Pictographs Extended-A.
_EMOJI_BLOCKS = ((0x80, 0x100), (0x2000, 0x3300), (0x1F000, 0x1FB00))


# Joiners, variation selectors, skin tones, tag characters and the keycap mark
# only modify the emoji they follow: deleted, not spaced, so one inside a word
# ("wo\u200drld", "o\ufe0f") does not split it.
_INVISIBLE_IN_EMOJI = frozenset([0x200D, 0xFE0E, 0xFE0F, 0x20E3, *range(0x1F3FB, 0x1F400), *range(0xE0020, 0xE0080)])
# Letters dressed as symbols that NFKC leaves alone (or turns into "(a)"):
# negative circled and negative squared capitals, parenthesized small letters.
_DRESSED_LETTERS = {
    start + offset: chr(ord("a") + offset) for start in (0x1F150, 0x1F170, 0x249C) for offset in range(26)
}
# Letters that render as nothing, used as blanks between words.
_BLANKS = (0x115F, 0x1160, 0x3164, 0xFFA0)


@functools.cache
def _run_table() -> dict[int, str | None]:
    """One translation of a non-ASCII run: dressed letters become letters,
    emoji a space, what only modifies an emoji nothing, a Chinese character
    in its traditional form its simplified form (``_hanzi``).

    Built when first needed, not on import: it reads the emoji blocks and
    OpenCC's table, and a process may import this module and never
    meet a non-ASCII post, or meet one only after it has started (``params``,
    an ASCII-only replay, a replay's own process whose worker sketches).
    Workers and live pipelines build it ahead with ``load_tables``."""
    return (
        {cp: " " for cp in _emoji_code_points() if cp not in _DRESSED_LETTERS}
        | dict.fromkeys(_INVISIBLE_IN_EMOJI)
        | dict.fromkeys(_BLANKS, " ")
        | _DRESSED_LETTERS
        | simplified_forms()
    )


def load_tables(*, lookalikes: bool = True) -> None:
    """Build now what the first post with a non-ASCII character would (the
    emoji data), and with ``lookalikes`` what the first with a look-alike
    would, where that time would be idle anyway."""
    _run_table()
    if lookalikes:
        build_tables()


# ASCII fast path, one bytes.translate: letters and digits lowercased, the
# rest a space, and apostrophes deleted.
_ASCII_WORDS = bytes((ord(chr(i).lower()) if chr(i).isalnum() else 32) if i < 128 else i for i in range(256))
_ASCII_DELETED = b"'`"


def _ascii_words(text: str) -> list[str]:
    return text.encode("ascii").translate(_ASCII_WORDS, _ASCII_DELETED).decode("ascii").split()


_RETWEET_PREFIX = regex.compile(r"^(?:\s*(?:(?:RT|MT)\b\s*|//\s*)[@＠]\w+\s*[:：]?)+", regex.IGNORECASE)
_PREFIX_HEADS = ("RT", "MT", "//")
# A bare host starts where no label runs into it (not after "a." nor "a"), and
# its labels are read possessively and its top-level domain checked behind: a
# hostile "a.a.a.…/" is read in one pass, where backtracking over every label
# from every start grows with the square of the text (benchmarks/hostile.py).
_URL = regex.compile(
    r"(?:https?|ftp):/\S*|\bwww\.\S+|(?<![\w-])(?<![\w-]\.)[\w-]++(?:\.[\w-]++)++(?<=\.[a-z]{2,})/\S*",
    regex.IGNORECASE,
)
# "via" spelled out case by case (İ is what IGNORECASE would also match for i):
# the same matches as the pattern with IGNORECASE, at a third of its cost.
_MENTION = regex.compile(r"(?<!\w)@\w+(?:\s+[vV][iI\u0130][aA]\b)?|\b[vV][iI\u0130][aA]\s+@\w+")
_KEYCAP = regex.compile(r"[0-9#*]\ufe0f?\u20e3")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
# Format characters, and the combining marks of the blocks all scripts share
# (accents, overlays such as the strike of "初̶中̶", enclosing marks): no
# letter outside Latin, Greek and Cyrillic is made with them, and the accents
# of those three go anyway (_ACCENTS). They go first, after any character:
# "二́日́" is "二日", "안́녕́" is "안녕", and a vowel sign after one stays ("त̈े" is "ते").
_FORMAT = regex.compile(r"[\p{Cf}\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
# Combining marks that copies drop or add: after a letter of these scripts (or
# a Common one), marks are accents; elsewhere they make another letter.
# A run of marks at the start of a folded run follows an ASCII letter.
_ACCENTS = regex.compile(
    r"(?:^|(?<=[\p{sc=Latin}\p{sc=Greek}\p{sc=Cyrillic}\p{sc=Arabic}\p{sc=Hebrew}\p{sc=Thai}\p{sc=Lao}"
    r"\p{sc=Common}\p{sc=Inherited}]))[\p{Mn}\p{Me}]+|\u093c"
)
# Arabic-script letters folded as Lucene's Arabic and Persian normalisers fold
# them (after NFKD has split hamza and madda off alef, waw and yeh); tatweel is deleted.
_ARABIC_LETTERS = str.maketrans(
    {
        "\u0640": None,  # tatweel
        "\u0649": "\u064a",  # alef maqsura -> yeh
        "\u0629": "\u0647",  # teh marbuta -> heh
        "\u06a9": "\u0643",  # keheh (Persian kaf) -> kaf
        "\u06cc": "\u064a",  # Farsi yeh -> yeh
        "\u06d2": "\u064a",  # yeh barree (Urdu) -> yeh
        "\u06c1": "\u0647",  # heh goal (Urdu) -> heh
        "\u06be": "\u0647",  # heh doachashmee -> heh
        "\u06d5": "\u0647",  # ae -> heh
        "\u0671": "\u0627",  # alef wasla -> alef
    }
)
# Scripts written without spaces between words: their runs are cut into
# character bigrams. Hangul is written with spaces, but writers space it so
# differently that its runs are cut the same way.
_UNSPACED = (
    "Han Hiragana Katakana Thai Lao Khmer Myanmar Tibetan Yi Tai_Le New_Tai_Lue Tai_Tham Tai_Viet "
    "Javanese Balinese Buginese Lisu Vai Hangul Bopomofo Nko"
).split()
_UNSPACED_CHAR = regex.compile("[" + "".join(rf"\p{{scx={name}}}" for name in _UNSPACED) + "]")
_UNSPACED_SPLIT = regex.compile("(" + _UNSPACED_CHAR.pattern + "+)")
_ASCII_LETTER = re.compile("[a-z]")
_APOSTROPHES = regex.compile(r"(?<=\w)['’ʼ`](?=\w)")
# regex's \w, unlike re's, holds combining marks: a Devanagari vowel sign
# stays inside its word. Marks that open a word follow no letter and mark
# nothing: they go with the separator (and a second pass would drop them).
_NON_WORD = regex.compile(r"[\W_]+\p{M}*|^\p{M}+")


def has_retweet_prefix(text: str) -> bool:
    """True when the text is a manual retweet: it starts with ``RT @user``."""
    # Most posts fail on their first two letters, far cheaper than the regex.
    head = text[:32].lstrip()
    if head[:2].upper() not in _PREFIX_HEADS and (head or len(text) <= 32):
        return False
    return _RETWEET_PREFIX.match(text) is not None


# Unicode's stream-safe limit (UAX #15): no real text stacks more than 30
# marks on one letter, and CPython orders the marks of a run in quadratic
# time (benchmarks/hostile.py has a flood of them), so a longer run keeps its first 30.
_MARK_FLOOD = regex.compile(r"(\p{M}{30})\p{M}+")


# A decimal digit of another script (٣, ۳, ३, ๓): what NFKC leaves as it is.
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")


def _ascii_digit(match: re.Match[str]) -> str:
    return str(unicodedata.decimal(match.group()))


def _fold(text: str) -> str:
    if len(text) > 30:
        text = _MARK_FLOOD.sub(r"\1", text)
    text = unicodedata.normalize("NFKD", text)
    text = _ACCENTS.sub("", _FORMAT.sub("", text))
    text = text.casefold().translate(LETTER_LOOKALIKES).translate(_ARABIC_LETTERS)
    text = unicodedata.normalize("NFKC", text)
    # a number reads alike in any script's digits: ٥٠٠٠ and ५००० are 5000
    return _OTHER_DIGIT.sub(_ascii_digit, text)  # the text itself where there is none


def _tokens(words: list[str]) -> list[str]:
    """``words`` with each run of unspaced-script characters, across the
    spaces between words, cut into overlapping character bigrams; ``words``
    itself when it holds none. One split of the words joined finds every
    run (odd parts) and what lies between them (even parts): a run goes on
    across parts that hold only spaces."""
    joined = " ".join(words)
    if _FROM_THAI.search(joined) is None and _low_unspaced().search(joined) is None:
        return words  # no character from Thai's on, nor one of the few before: no run to cut
    parts = _UNSPACED_SPLIT.split(joined)
    if len(parts) == 1:
        return words
    tokens: list[str] = []
    run: list[str] = []
    for at, part in enumerate(parts):
        if at % 2:
            run.append(part)
            continue
        between = part.split()
        if between:
            if run:
                tokens.extend(_bigrams("".join(run)))
                run = []
            tokens.extend(between)
    if run:
        tokens.extend(_bigrams("".join(run)))
    return tokens


# any character from Thai's block on (a search stops at the first)
_FROM_THAI = re.compile("[\u0e00-\U0010ffff]")


@functools.cache
def _low_unspaced() -> re.Pattern[str]:
    """The characters before U+0E00 (Thai) that ``_UNSPACED_CHAR`` matches (N'Ko
    letters, some marks and modifier letters, Arabic punctuation), as a class
    the standard library's ``re`` searches for faster than ``regex`` searches
    the whole class."""
    low = [char for char in map(chr, range(0xE00)) if _UNSPACED_CHAR.match(char)]
    return re.compile("[" + "".join(map(re.escape, low)) + "]" if low else "(?!)")  # (?!) matches nothing


def _bigrams(run: str) -> list[str]:
    """A run of unspaced-script characters as its overlapping character bigrams (one character: itself)."""
    return [run[at : at + 2] for at in range(len(run) - 1)] or [run]


def _fold_run(match: re.Match[str]) -> str:
    run = match.group()
    return _fold_short_run(run) if len(run) <= _CACHED_RUN_CHARS else _fold_long_run(run)


def _fold_any_run(run: str) -> str:
    return _fold(run.translate(_run_table()))


# Short runs repeat across posts (’, …, “”, the same emoji) and folding one costs
# microseconds: 65,536 runs of up to 16 characters are kept, about 10 MB. A longer
# run (a sentence in Japanese) recurs in copies that differ elsewhere (an emoji, a
# mention): the last 2,048 of up to 280 characters are kept, 2 MB (5 MB at most).
_CACHED_RUN_CHARS = 16
_fold_short_run = functools.lru_cache(maxsize=1 << 16)(_fold_any_run)
_RECENT_RUN_CHARS = 280
_fold_recent_run = functools.lru_cache(maxsize=2048)(_fold_any_run)


def _fold_long_run(run: str) -> str:
    return _fold_recent_run(run) if len(run) <= _RECENT_RUN_CHARS else _fold_any_run(run)


def _c_fold_runs(text: str) -> str:
    return str(kernel.fold_runs(text, _fold_short_run, _fold_long_run, _CACHED_RUN_CHARS))


def _py_fold_runs(text: str) -> str:
    """``text`` with each non-ASCII run folded (``_fold_run``); in C without a Python call a run."""
    return _NON_ASCII_RUN.sub(_fold_run, text)


def _py_ascii_words_without_mentions(text: str) -> list[str]:
    """The words of an ASCII text, mentions out; in C in one pass."""
    return _ascii_words(_MENTION.sub(" ", text) if "@" in text else text)


_fold_runs = chosen(_c_fold_runs, _py_fold_runs)
_ascii_words_without_mentions: Callable[[str], list[str]] = chosen(
    from_kernel("ascii_words"), _py_ascii_words_without_mentions
)


def _strip_urls(text: str) -> str:
    return " ".join(_URL.sub(" ", token) if ("/" in token or "www." in token) else token for token in text.split())


def is_cut_off(text: str) -> bool:
    """True when ``text`` ends in ``…`` glued to a word that normalising keeps
    (links after it aside): a client cut the post there, and ``normalize``
    drops that cut word. A link or a mention cut by the ``…``
    (``https://t.…``, ``@unit…``) is removed anyway, so the text before it
    is whole."""
    stripped = _before_the_cut(text)
    if stripped is None or not stripped[-2:-1].isalnum():
        return False
    cut = stripped[:-1].rsplit(None, 1)[-1]
    return not ("@" in cut or "＠" in cut or _URL.search(cut))


def ends_in_a_cut(text: str) -> bool:
    """True when ``text`` ends in ``…`` (links after it aside), glued to a
    word or not: a client cut the post there (``IAD,…``, ``AM?…``), and the
    rest of it is missing (``_rules.under_threshold``)."""
    return _before_the_cut(text) is not None


def _before_the_cut(text: str) -> str | None:
    """``text`` up to and with its final ``…``, without the links after it;
    None when it does not end in one."""
    stripped = text.rstrip()
    if stripped.endswith(";") and "&" in stripped:  # "&hellip;"
        stripped = html.unescape(stripped).rstrip()
    if not stripped.endswith("…"):
        if "…" not in stripped[-64:]:
            return None
        # Twitter's own cut (v1.1 statuses without their extended text): "…
        # cut wor… https://t.co/…", a link to the whole post after the "…".
        while stripped and not stripped.endswith("…"):
            head, _, last = stripped.rpartition(" ")
            if _URL.fullmatch(last) is None:
                return None
            stripped = head.rstrip()
    return stripped


def normalize(text: str) -> str:
    """Lowercase words of ``text`` with URLs, mentions, emoji and punctuation gone."""
    return " ".join(normalize_words(text))


def normalize_words(text: str) -> list[str]:
    """The words of ``normalize(text)``, as a list."""
    return words_and_cut(text)[0]


def words_and_cut(text: str) -> tuple[list[str], bool]:
    """The words of ``normalize(text)``, and whether the text was cut off
    (``ends_in_a_cut``; the word a cut went through, ``is_cut_off``, is
    dropped). A trailing run of hashtags is left out where it is half as
    many words as those before it or more, and they are enough to judge the
    text by (``_hashtags``)."""
    words, cut = _words_and_cut(text)
    if len(words) >= _WORDS_BEFORE_TAGS + _TAGS_LEFT_OUT and ("#" in text or "＃" in text):
        parts = before_trailing_tags(text, _says_something)
        if parts is not None:
            return _without_tags(words, cut, *parts)
    return words, cut


# Enough words to judge a text by, without the hashtags after them (as many as
# the rules ask of two posts a word edit apart, _rules.EDIT_MIN_WORDS), and the
# fewest words of tags that are left out: fewer cannot hide a copy of six words.
_WORDS_BEFORE_TAGS = 6
_TAGS_LEFT_OUT = 4


def _without_tags(words: list[str], cut: bool, body: str, tags: str) -> tuple[list[str], bool]:
    """``words_and_cut`` of a text that is ``body`` and then a trailing run of
    ``tags``, from its ``words`` and ``cut`` as a whole."""
    if tags.isascii() and not _enough_tags(len(_ascii_words(tags)), len(words)):
        return words, cut  # too few even with the words of the tags' addresses counted
    tag_words = _words_and_cut(tags)[0]
    count = len(tag_words)
    if not _enough_tags(count, len(words)) or len(words) - count < _WORDS_BEFORE_TAGS:
        return words, cut
    if words[-count:] == tag_words:  # the tags' words end the text's: the rest are the body's
        return words[:-count], False  # a cut among the tags left the body whole
    # an unspaced script runs on across the space before a tag (its bigrams)
    return _words_and_cut(body)


def _enough_tags(tags: int, words: int) -> bool:
    """Whether ``tags`` words of trailing tags, of a text's ``words`` in
    all, are enough to leave out: ``_TAGS_LEFT_OUT`` or more, and half the
    words before them or more. True of a number, true of any larger one: a
    count that may overstate the tags' words can rule them out, not in."""
    return tags >= _TAGS_LEFT_OUT and 3 * tags >= words


@functools.lru_cache(maxsize=1 << 12)
def _has_words(text: str) -> bool:
    return bool(_words_and_cut(text)[0])


def _says_something(text: str) -> bool:
    """Whether ``text`` (a word of a post, its hashtags, mentions and links
    taken out) has a word of its own, as the normaliser reads it."""
    if text.isascii():
        return any(map(str.isalnum, text))
    return _has_words(text)  # a word of emoji alone after the tags, mostly: these recur


def _words_and_cut(text: str) -> tuple[list[str], bool]:
    """``words_and_cut`` of a text as a whole, in one pass."""
    if not text.isascii():
        # a span under a bidi override as a reader sees it, a text written upside
        # down the right way up, boxed letters as letters; a spoof spelled by its
        # letters' looks; letters joined by an emoji ("f🔥r🔥e🔥e")
        text = close_up_emoji_joined(spell_spoofs(read_indicators(read_turned(displayed(text)))))
    # letters spaced out, words set apart by wider gaps ("F R E E  M O N E Y"),
    # or a letter a line: gaps as written, before anything is taken out
    text = close_up_spelled_addresses(close_up_spaced(text))
    truncated = is_cut_off(text)
    cut = truncated or ends_in_a_cut(text)
    if "&" in text:
        text = html.unescape(text)
    if has_retweet_prefix(text):
        text = _RETWEET_PREFIX.sub(" ", text, count=1)
    if not text.isascii():
        if "\u20e3" in text:
            text = _KEYCAP.sub(" ", text)
        # Only the non-ASCII runs need emoji removal and Unicode folding; ASCII
        # never changes under NFKC, so most of a tweet skips the slow part.
        text = _fold_runs(text)
    if "&" in text:
        # again: folding can make an entity (＆amp;), and some clients escape twice (&amp;amp;)
        text = html.unescape(text)
    text = close_up_marked(text)  # "F.R.E.E M.O.N.E.Y", "c-l-a-i-m": folded, zero-width characters out
    text = read_symbols(text)  # "W!n a fr€€ g!ft", folded: before punctuation and mentions go
    if "/" in text or "www." in text:
        text = _strip_urls(text)
    text = close_up_broken(text)  # "cl.aim yo,ur fr-ee", its links out
    if text.isascii():
        words = _ascii_words_without_mentions(text)
    else:
        if "@" in text:
            text = _MENTION.sub(" ", text)
        if not text.isascii():
            return _words_beyond_ascii(text, truncated), cut
        words = _ascii_words(text)
    if truncated and len(words) > 1:
        words.pop()
    words = join_spelled_out(words)
    if may_hold_leet(text) is not None:
        words = read_leet(words)
    return words, cut


def _words_beyond_ascii(text: str, truncated: bool) -> list[str]:
    """``words_and_cut``'s words of a text that is not all ASCII once its mentions are out."""
    # Folding can make a look-alike of a letter that was none (Ӟ folds to з,
    # which looks like 3): a text of look-alikes and Latin letters alone is
    # spelled again, so that it normalises as its normal form does.
    text = spell_spoofs(text, only_whole=True)
    text = text.lower()
    if "'" in text or "’" in text or "ʼ" in text or "`" in text:  # _APOSTROPHES, where it may match
        text = _APOSTROPHES.sub("", text)
    kept = _NON_WORD.sub(" ", text)
    words = kept.split()
    # a cut word is dropped; in an unspaced script "…" falls between whole characters
    if truncated and len(words) > 1 and _UNSPACED_CHAR.search(words[-1]) is None:
        words.pop()
    words = join_spelled_out(words)
    if _ASCII_LETTER.search(kept) is None:  # only a word with an ASCII letter is folded or read as leetspeak
        return _tokens(words)
    tokens = _tokens(fold_lookalikes(words))  # after the join: a word spelled out is one word to fold
    # Leetspeak is read last: folding can make a word ASCII ("0æa" is "0aea"),
    # and a word cut out of an unspaced run ("kbs1에") is the word "kbs1 에" holds.
    if may_hold_leet(" ".join(tokens)) is None:
        return tokens
    return read_leet(tokens)


# A whole mention or t.co link, with white space (or a mention's colon) on both sides.
# (The literal first, then what is behind it: a search skips to each "@" or "h".)
_WHOLE_MENTION = re.compile(r"@(?<!\S@)[A-Za-z0-9_]{1,15}(?=[\s:]|$)")
_WHOLE_TCO_LINK = re.compile(r"h(?<!\Sh)ttps?://t\.co/[A-Za-z0-9]+(?!\S)")


def same_words_key(text: str) -> str:
    """A key that ``text`` shares only with texts whose ``words_and_cut`` is
    provably its own: ``text`` with each whole mention and t.co link spelled
    alike, where nothing but their being there changes the words (a
    campaign's copies differ in just those); otherwise ``text`` itself.

    Where the length or letters of an address could matter, a text is its
    own key: with a ``…`` (a cut is looked for in the last 64 characters),
    an ``&`` (an entity can make one) or a bidi override. With look-alikes,
    whether most words are capitalised is part of the key (``spoof_spelling``)."""
    mentions, links = "@" in text, "t.co/" in text
    if not (mentions or links) or "…" in text or "&" in text:
        return text
    spelling = "" if text.isascii() else spoof_spelling(text)
    if spelling is None:
        return text
    key = _WHOLE_MENTION.sub("@_", text) if mentions else text
    # a suffix only on a text with look-alikes, which no key without one has
    return (_WHOLE_TCO_LINK.sub("https://t.co/_", key) if links else key) + spelling


def normalize_fallback(text: str) -> str:
    """The exact-text form used when ``normalize`` leaves nothing (emoji- or URL-only posts).

    Only entities, case, Unicode forms and whitespace are folded, so two posts
    made of the same emoji or the same link still match, and different ones don't.
    """
    if "&" in text:
        text = html.unescape(text)
    return " ".join(_fold(displayed(text)).split())
