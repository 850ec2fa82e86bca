"""Words spelled out letter by letter, which a reader reads as the words.

Pure functions over a post's text or words, for ``_normalize``.

- Letters one space apart, words set apart by wider gaps (``F R E E  M O N E Y``),
  or a letter a line, words set apart by blank lines: each run is closed up
  before anything else is taken out (``close_up_spaced``).
- The letters of each word joined by one mark, the same one throughout
  (``F.R.E.E M.O.N.E.Y``, ``c-l-a-i-m``, ``О-т-л-и-ч-н-о``, ``U.S.A.``): each
  word is closed up (``close_up_marked``), where taking the marks out as
  punctuation would leave one-letter words that ran on into the next word's.
  The marks are ``. - * _ · •``; an apostrophe is a letter (``y.o.u.'.v.e``).
  A word needs three letters or digits, as ``join_spelled_out`` does: a
  copy with the marks taken out (``u s a``) reads alike, while ``т.д.`` and
  ``a.m.`` stay two words, as ``т д`` does. In a text with two such words
  or more, written so throughout, words of two are closed up too
  (``t.o m.y``). A word that goes on past its letters (``v1.2.3``,
  ``www.a.b.c.com``, ``e-mail``) is no such word. It runs after zero-width
  characters are taken out, which would otherwise end a word early.
- Words broken by a mark inside them (``cl.aim yo,ur fr-ee pr.i.ze``): in a
  text with three such words or more, each is closed up
  (``close_up_broken``). A word is runs of letters joined by single marks,
  any of ``. , ; : - * _ · • /``, with no digit, no other mark and no part
  of an address or a mention on either side. One or two such words are
  what honest text has (``front-end``, ``and/or``, ``help.She``) and keep
  their words; three or more are closed up alike in every copy, so such a
  text still matches itself.
- The letters of a word joined by one emoji, the same throughout
  (``f🔥r🔥e🔥e m🔥o🔥n🔥e🔥y``): each word is closed up before the emoji are
  taken out (``close_up_emoji_joined``), which would leave one-letter words
  that ran on into the next word's. An emoji between words (``free 👏
  money``) or inside a word of more letters (``I❤️NY``) is left to be taken
  out as any other.
- A run of three or more one-letter words left after punctuation is taken
  out (``f r e e``) is one word (``join_spelled_out``).
- A link or a mention spelled out with the rest (``h t t p s : / / t . c o
  / x Y 1``, ``@ u s e r``) is closed up (``close_up_spelled_addresses``),
  so that it is taken out as a link or a mention is, where its characters
  would otherwise stay as words of their own.
"""

from __future__ import annotations

import re
from typing import TypeAlias

import regex

# A pattern of words whose letters one joiner joins (its first group): a mark, or an emoji.
Joined: TypeAlias = "re.Pattern[str] | regex.Pattern[str]"

__all__ = [
    "close_up_broken",
    "close_up_emoji_joined",
    "close_up_marked",
    "close_up_spaced",
    "close_up_spelled_addresses",
    "join_spelled_out",
    "marked_words",
]

# White space other than a space, a tab or a line feed: a text with any may hold a run to close up.
_OTHER_SPACE = re.compile("[\v\f\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_GAPS = re.compile(r"(\s+)")


_MARK = r"[.\-*·•_]"
_LETTER = r"(?:[^\W_]|['’])"  # a letter or digit, or an apostrophe
# A mark, a letter or digit, a mark and a letter or digit: where a word of
# three spelled with marks may be (a test that starts at a mark, so that most
# of a text is passed over at one test a character).
_MAY_BE_MARKED = re.compile(rf"{_MARK}[^\W_]{_MARK}[^\W_]")
# A word of three or more letters, digits or apostrophes (the first a letter
# or digit), one mark between each two, the same mark throughout (and once
# more after the last), with no letter, digit or other part of a word or an
# address on either side; and such a word of two or more.
_ALONE = r"(?<![\w.\-*·•/@#])"
_MARKED_WORD = re.compile(rf"{_ALONE}[^\W_]({_MARK}){_LETTER}(?:\1{_LETTER})+\1?(?![^\W_])")
_MARKED_SHORT_WORD = re.compile(rf"{_ALONE}[^\W_]({_MARK}){_LETTER}(?:\1{_LETTER})*\1?(?![^\W_])")


# A link's scheme or "www." spelled out one space apart, then its characters
# one space apart, each a single character (the run ends at a longer word, a
# wider gap or the end); and an "@" with two or more letters, digits or
# underscores so (the last may have a reply's colon after it), a mention spelled out.
_SPELLED_LINK = re.compile(r"(?<!\S)(?:h t t p(?: s)? : / /|w w w \.)(?: \S(?!\S))+", re.IGNORECASE)
_SPELLED_MENTION = re.compile(r"(?<!\S)[@＠](?: \w(?![^\s:：])){2,}")


def close_up_spelled_addresses(text: str) -> str:
    """``text`` with each link or mention spelled out one character a space
    (``h t t p s : / / t . c o / x``, ``@ u s e r``) closed up, to be taken
    out as any link or mention is. A mention's run may take in a word spelled
    out after it (``@ u s e r f r e e``): one space apart, nothing tells
    where the one ends and the other begins."""
    if " / / " in text or "w ." in text or "W ." in text:  # "w w w ." in any case ends so
        text = _SPELLED_LINK.sub(_without_spaces, text)
    if "@ " in text or "＠ " in text:
        text = _SPELLED_MENTION.sub(_without_spaces, text)
    return text


def _without_spaces(run: re.Match[str]) -> str:
    return run.group().replace(" ", "")


def close_up_spaced(text: str) -> str:
    """``text`` with each run of characters one gap apart closed up: a word
    spelled out, its digits and punctuation too (``y o u ' v e``, ``7 5 7``,
    a letter a line). A run's gaps are all of one kind, one space (a tab or
    any other white space too) or one line break, and it ends where another
    gap begins, wider (``F R E E  M O N E Y``) or of the other kind (a line
    break after letters a space apart); a character between two runs goes to
    the longer.
    A run of two is closed up only between such other gaps (``t o``, ``m y``)."""
    if not _may_be_spaced(text):
        return text
    parts = _GAPS.split(text)  # words at even places, the gaps between them at odd ones
    words, gaps = parts[0::2], parts[1::2]
    runs = _runs(words, gaps)
    if not runs:
        return text
    for first, last in reversed(runs):
        parts[2 * first : 2 * last + 1] = ["".join(words[first : last + 1])]
    return "".join(parts)


def _may_be_spaced(text: str) -> bool:
    """Whether ``text`` may hold a run to close up: a gap wider than one
    space, a line break, or a gap of another white space (substring tests and
    one class of characters, which cost far less than the split into words)."""
    return "  " in text or "\n" in text or "\t" in text or _OTHER_SPACE.search(text) is not None


def _runs(words: list[str], gaps: list[str]) -> list[tuple[int, int]]:
    """The runs to close up, as (first, last) indexes of ``words``, in order."""
    linked = [  # the kind of gap that links word i to word i + 1 in a run, or None
        _kind(gap) if len(word) == 1 and len(after) == 1 else None
        for word, gap, after in zip(words, gaps, words[1:], strict=False)
    ]
    spans = []  # the longest stretches of links alike, as (first, last) words
    at = 0
    while at < len(linked):
        if linked[at] is None:
            at += 1
            continue
        end = at
        while end + 1 < len(linked) and linked[end + 1] == linked[at]:
            end += 1
        spans.append((at, end + 1))
        at = end + 1
    taken: set[int] = set()
    kept = []
    for first, last in sorted(spans, key=lambda span: span[0] - span[1]):  # the longest first
        first += first in taken
        last -= last in taken
        if last - first >= 2 or last - first == 1 and _apart(gaps, first, last):
            kept.append((first, last))
            taken.update(range(first, last + 1))
    return sorted(kept)


def _apart(gaps: list[str], first: int, last: int) -> bool:
    """Whether the two words ``first`` and ``last`` have other gaps than theirs around them."""
    own = _kind(gaps[first])
    return (first == 0 or _kind(gaps[first - 1]) != own) and (last >= len(gaps) or _kind(gaps[last]) != own)


_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


def _kind(gap: str) -> str | None:
    """A gap of one: a line break ("line") or any one space ("space", a tab
    or a Unicode space as well, which a text may mix); a wider gap: None."""
    if gap == "\r\n" or len(gap) == 1 and gap in _LINE_BREAKS:
        return "line"
    return "space" if len(gap) == 1 else None


def close_up_marked(text: str) -> str:
    """``text`` with each word spelled with a mark between its letters closed up (see the module docstring)."""
    if _MAY_BE_MARKED.search(text) is None:
        return text
    return _closed_up(text, _MARKED_WORD, _MARKED_SHORT_WORD)


def _closed_up(text: str, word: Joined, short_word: Joined) -> str:
    """``text`` with each ``word`` (its joiner its first group) closed up; in
    a text with two such words or more, written so throughout, each
    ``short_word`` too (a word of two letters)."""
    return str((word if len(word.findall(text)) < 2 else short_word).sub(_unmarked, text))


def _unmarked(word: re.Match[str] | regex.Match[str]) -> str:
    return str(word.group()).replace(word.group(1), "")


def marked_words(text: str) -> list[str]:
    """The words of three or more that ``text`` spells with a mark between
    their letters, closed up (``F.R.E.E`` is ``FREE``)."""
    if _MAY_BE_MARKED.search(text) is None:
        return []
    return [_unmarked(word) for word in _MARKED_WORD.finditer(text)]


_BREAK = r"[.,;:\-*·•_/]"
_RUN = r"\p{L}[\p{L}\p{M}'’]*"  # letters, the marks on them and apostrophes
# A mark with a letter or digit before it and a letter after it: where a
# broken word may be (a test that starts at a mark, as _MAY_BE_MARKED's does).
_MAY_BE_BROKEN = re.compile(rf"{_BREAK}(?<=[^\W_].)(?=[^\W\d_])")
# Runs of letters joined by single marks, nothing of a word, a number, an
# address or a mention on either side (a mark that ends a sentence may follow).
_BROKEN_WORD = regex.compile(
    rf"(?<![\p{{L}}\p{{M}}\p{{N}}_@#'’.,;:\-*·•/]){_RUN}(?:{_BREAK}{_RUN})+"
    rf"(?![\p{{L}}\p{{M}}\p{{N}}_@'’]|{_BREAK}[\p{{L}}\p{{M}}\p{{N}}])"
)
_BROKEN_WORDS_TO_CLOSE = 3
_BREAKS = regex.compile(_BREAK)


def close_up_broken(text: str) -> str:
    """``text`` with its words broken by marks closed up, where it has three
    or more (see the module docstring)."""
    if _MAY_BE_BROKEN.search(text) is None:
        return text
    broken = _BROKEN_WORD.findall(text)
    if len(broken) < _BROKEN_WORDS_TO_CLOSE:
        return text
    return str(_BROKEN_WORD.sub(_unbroken, text))


def _unbroken(word: regex.Match[str]) -> str:
    return str(_BREAKS.sub("", word.group()))


_EMOJI = r"\p{Extended_Pictographic}\uFE0F?"
# A letter, a character that may be an emoji, and a letter: where letters joined by an emoji may
# be. The class holds every Extended_Pictographic character and some others: the standard
# library's re finds such a class faster than regex finds the property (a test every non-ASCII
# text takes).
_MAY_BE_EMOJI_JOINED = re.compile(
    "[\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001ffff](?<=[^\\W_].)\ufe0f?[^\\W_]"
)
# Three letters or more (two, in a text so written), each alone, joined by one emoji, the same throughout.
_EMOJI_JOINED_WORD = regex.compile(rf"(?<![^\W_])[^\W_]({_EMOJI})[^\W_](?:\1[^\W_])+(?![^\W_])")
_EMOJI_JOINED_SHORT_WORD = regex.compile(rf"(?<![^\W_])[^\W_]({_EMOJI})[^\W_](?:\1[^\W_])*(?![^\W_])")


def close_up_emoji_joined(text: str) -> str:
    """``text`` with each word spelled with one emoji between its letters
    closed up (see the module docstring); in a text with two such words or
    more, its words of two letters too (``m🔥y``), as ``close_up_marked`` does."""
    if _MAY_BE_EMOJI_JOINED.search(text) is None:
        return text
    return _closed_up(text, _EMOJI_JOINED_WORD, _EMOJI_JOINED_SHORT_WORD)


def join_spelled_out(words: list[str]) -> list[str]:
    """Runs of three or more one-letter words joined into one word: a word
    spelled out letter by letter ("f r e e") is the word; ``words`` itself
    where there is none, as in nearly every text."""
    if not _spelled_out(words):
        return words
    joined: list[str] = []
    run: list[str] = []
    for word in [*words, ""]:
        if len(word) == 1 and word.isalpha():
            run.append(word)
            continue
        if len(run) >= 3:
            joined.append("".join(run))
        else:
            joined.extend(run)
        run = []
        if word:
            joined.append(word)
    return joined


def _spelled_out(words: list[str]) -> bool:
    """Whether three one-character words follow each other (a plain loop:
    a regular expression over the text cost as much as the rest of normalising)."""
    run = 0
    for word in words:
        if len(word) == 1:
            run += 1
            if run == 3:
                return True
        else:
            run = 0
    return False
