"""A post's trailing hashtags: the tags each copy of a campaign may change.

A campaign's copies often end in a run of hashtags drawn afresh for each copy
(``… win a new phone #win #giveaway #iphone``, then ``#free #contest #deal``).
Their words and word pairs count in the Jaccard as much as the text's own,
so eight such tags after a text of nine words put a copy under the threshold.
``before_trailing_tags`` finds where that run begins: after the last word
that says something outside a hashtag, a mention or a link (which the
normaliser decides: ``⒡⒜⒤⒧`` is a word, an emoji or a ``…`` is none). The
normaliser judges a text by what comes before it when that is enough to
judge alone (``_normalize.words_and_cut``); a short text keeps its tags, for
there they are most of what it says (``Great game #Lakers``).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

import regex

__all__ = ["before_trailing_tags"]

# What a word of a trailing run may be made of besides emoji and punctuation:
# hashtags in any letters, also glued together ("#a#b", "#⒡⒜⒤⒧"), mentions and links.
_TAGS_AND_ADDRESSES = regex.compile(r"[#＃][^\s#＃]+|[@＠]\w+|https?://\S+|www\.\S+")
_ADDRESS_MARK = regex.compile(r"[@＠]|https?:|www\.")


def before_trailing_tags(text: str, says_something: Callable[[str], bool]) -> tuple[str, str] | None:
    """``text`` up to its trailing run of hashtags (with the emoji,
    punctuation, mentions and links among and after them, in which
    ``says_something`` finds no word), and that run; None when it ends in no
    hashtag, or when a "…" ends the text before them (a cut is judged on the
    whole text, as ``_normalize.is_cut_off`` reads it). A "…" among the tags
    cut the tags: the text before them is whole."""
    head, tagged = text.rstrip(), False
    while head:  # a word at a time from the end (most runs are a few words)
        parts = head.rsplit(None, 1)
        word = parts[-1]
        tag = "#" in word or "＃" in word
        rest = _TAGS_AND_ADDRESSES.sub(" ", word) if tag or _ADDRESS_MARK.search(word) else word
        if not rest.isspace() and says_something(rest):
            break
        tagged = tagged or tag
        head = parts[0].rstrip() if len(parts) == 2 else ""
    if not tagged or head.endswith("…"):
        return None
    return head, text[len(head) :]
