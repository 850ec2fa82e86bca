"""Chinese characters in their traditional forms read as their simplified forms.

One text is often posted in both scripts: a post from the mainland copied
for readers in Taiwan or Hong Kong, or a campaign's copy converted to look
new (``关注并转发`` and ``關注並轉發``). Converters map character for
character, so reading each traditional character as its simplified form
makes the two copies one text.

``data/TSCharacters.txt`` is OpenCC's table of traditional characters and
their simplified forms (Apache License 2.0, ``data/LICENSE-OpenCC.txt``).
Where it gives several forms, the first is taken, as OpenCC takes it; where
a form is itself in the table (9 of its 4,113 lines), it is followed to the
end, so that reading a text twice reads it as once.

Every text is read so, Japanese too, which writes many of these characters
(``東京`` normalises to ``东京``): a Japanese text written in kanji alone
cannot be told from Chinese, and reading some texts one way and the rest
the other would part a copy from its original (``帰宅開始`` and
``さぁ帰宅開始``). Like case and look-alike letters, the characters a
normal form shows are what posts are matched on, not what a reader sees.

The table runs before NFKD, with the rest of a non-ASCII run's translation
(``_normalize._run_table``), so a CJK compatibility ideograph (U+F900 to
U+FAFF, U+2F800 to U+2FA1F), which NFKD makes a unified one, is read here as
its unified ideograph reads.
"""

from __future__ import annotations

import os
import re
import unicodedata

__all__ = ["simplified_forms"]

# a line of the table: a traditional character, a tab, then its forms, first one first
_FIRST_FORM = re.compile(r"^([^#\n])\t(\S)", re.MULTILINE)
_COMPATIBILITY_IDEOGRAPHS = (*range(0xF900, 0xFB00), *range(0x2F800, 0x2FA20))


def simplified_forms() -> dict[int, str]:
    """A ``str.translate`` table: each traditional character as its
    simplified form, and each compatibility ideograph of one as that form."""
    path = os.path.join(os.path.dirname(__file__), "data", "TSCharacters.txt")
    with open(path, encoding="utf-8") as handle:
        table = dict(_FIRST_FORM.findall(handle.read()))
    for traditional, simplified in [(t, s) for t, s in table.items() if s in table]:
        seen = {traditional}
        while simplified in table and simplified not in seen:  # a form that is itself read as another
            seen.add(simplified)
            simplified = table[simplified]
        table[traditional] = simplified
    forms_of = {ord(traditional): simplified for traditional, simplified in table.items()}
    for code_point in _COMPATIBILITY_IDEOGRAPHS:  # the rest NFKD makes unified ideographs later
        unified = unicodedata.normalize("NFKD", chr(code_point))
        if unified in table:
            forms_of[code_point] = table[unified]
    return forms_of
