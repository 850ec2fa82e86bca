"""Words spelled out letter by letter, which a reader reads as the words.

Pure functions over a post's text or words, for ``_normalize``.

- Letters one space apart, words set apart by wider gaps (``F R E E  M O N E Y``):
  each run is closed up before anything else is taken out (``close_up_spaced``).
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
- A run of three or more one-letter words left after punctuation is taken
  out (``f r e e``) is one word (``join_spelled_out``).
"""

from __future__ import annotations

import re

import regex

__all__ = ["close_up_broken", "close_up_marked", "close_up_spaced", "join_spelled_out"]

# A run of three or more characters, one space apart, with white space or the
# text's ends around it: a word spelled out, its digits and punctuation too
# ("y o u ' v e", "7 5 7"), which ends where a wider gap begins; and two
# characters one space apart between wider gaps ("t o", "m y").
# (``join_spelled_out`` joins the runs of letters whose gaps are all alike.)
_SPELLED_OUT_RUN = regex.compile(r"(?<!\S)\S(?: \S){2,}(?!\S)|(?<=^|\s\s)\S \S(?=\s\s|$)")

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


def close_up_spaced(text: str) -> str:
    """``text`` with each run of characters one space apart closed up (see the module docstring)."""
    return str(_SPELLED_OUT_RUN.sub(_closed_up, text))


def _closed_up(run: regex.Match[str]) -> str:
    return str(run.group()).replace(" ", "")


def close_up_marked(text: str) -> str:
    """``text`` with each word spelled with a mark between its letters closed up (see the module docstring)."""
    if _MAY_BE_MARKED.search(text) is None:
        return text
    if len(_MARKED_WORD.findall(text)) < 2:
        return _MARKED_WORD.sub(_unmarked, text)
    return _MARKED_SHORT_WORD.sub(_unmarked, text)  # a text so written: its short words too


def _unmarked(word: re.Match[str]) -> str:
    return word.group().replace(word.group(1), "")


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
