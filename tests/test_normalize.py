from __future__ import annotations

from typing import Any

import pytest
import regex
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from streamfilter import _confusables, _normalize, normalize
from streamfilter._compiled import compiled_kernel
from streamfilter._confusables import may_hold_leet, read_leet
from streamfilter._hanzi import simplified_forms
from streamfilter._normalize import (
    _MENTION,
    _UNSPACED_CHAR,
    has_retweet_prefix,
    is_cut_off,
    normalize_fallback,
    words_and_cut,
)

KYDERBY = "Want to bet on the #KYDerby freely, legally, and securely? Visit TwinSpires!"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "@amandakclayton " + KYDERBY + " http://t.co/Qz1BkmCb",
            "want to bet on the kyderby freely legally and securely visit twinspires",
        ),
        ("RT @foo: Hello WORLD", "hello world"),
        ("RT @a: RT @b: nested retweet", "nested retweet"),
        ("Fish &amp; chips &lt;3", "fish chips 3"),
        # an entity made by folding, and one escaped twice, are no words either
        ("Fish ＆amp; chips", "fish chips"),
        ("Fish &amp;amp; chips", "fish chips"),
        ("see https://t.co/abc and www.example.com/page and bit.ly/xyz now", "see and and now"),
        ("#KYDerby #win", "kyderby win"),
        (
            "thumbs 👍🏽 family 👨‍👩‍👧 flag 🇺🇸 keycap 1️⃣ #️⃣ scotland 🏴󠁧󠁢󠁳󠁣󠁴󠁿 end",
            "thumbs family flag keycap scotland end",
        ),
        ("Неllо wоrld", "hello world"),  # Cyrillic Н, е, о
        ("𝐇𝐞𝐥𝐥𝐨 𝒘𝒐𝒓𝒍𝒅", "hello world"),  # mathematical bold / bold italic
        ("ＨＥＬＬＯ ＠user ｗｏｒｌｄ", "hello world"),  # fullwidth, fullwidth @mention
        ("he\u200bllo wo\u00adrld\u200d!", "hello world"),  # zero-width space, soft hyphen, ZWJ
        ("h̶e̶l̶l̶o̶ café", "hello cafe"),  # combining strike-through, accents
        ("ʜᴇʟʟᴏ Ⓦⓞⓡⓛⓓ", "hello world"),  # small capitals, circled letters
        ("🅷🅴🅻🅻🅾 🆆🅾🆁🅻🅳", "hello world"),  # negative squared capitals (🅾 is an emoji too)
        ("🅗🅔🅛🅛🅞 ⒲⒪⒭⒧⒟", "hello world"),  # negative circled, parenthesized
        ("ΗΕLLO ΜΥ ΝΑΜΕ", "hello my name"),  # Greek capitals Eta, Mu, Upsilon, Nu
        ("wo\u200drld he\ufe0fllo th\U0001f3fdis", "world hello this"),  # joiner, selector, skin tone inside words
        ("hello\u3164world\u00a0again\u3000now", "hello world again now"),  # Hangul filler, no-break, ideographic
        ("don't stop", "dont stop"),
        # attributions go with their mention, in any case; a word that only ends in "via" stays
        ("great read via @nytimes", "great read"),
        ("Great read VIA @nytimes and @a Via more", "great read and more"),
        ("trivia @quiz night", "trivia night"),
        ("I love flying with you guys, the serv…", "i love flying with you guys the"),
        # a link or mention cut by the "…" goes anyway: the word before it stays
        ("Focuses on Bill Clinton https://t.…", "focuses on bill clinton"),
        ("What You Missed https://t.co/h95…", "what you missed"),
        ("great flight thanks to @Unit…", "great flight thanks to"),
        ("cut at the scheme https…", "cut at the scheme"),
        # Twitter's own cut: the link to the whole status follows the "…"
        ("Signals He Will Make Bill… https://t.co/DLfVYe8aVF", "signals he will make"),
        ("東京タワー 最高", "东京 京タ タワ ワー ー最 最高"),  # bigrams, across the space
        # accents and overlays over letters of any script go, and no letter's own mark goes with them
        ("東́京̶タ̈ワ⃝ー 最高", "东京 京タ タワ ワー ー最 最高"),
        ("안́녕̶하̈세요", "안녕 녕하 하세 세요"),
        ("न̈म̈स्̈त̈े̈", "नमस्ते"),  # the vowel sign after the diaeresis stays
        ("がガﾊﾟ", "がガ ガパ"),  # voiced marks make another letter: they stay
    ],
)
def test_normalize_cases(text: str, expected: str, words_path: str) -> None:
    assert normalize(text) == expected


@pytest.fixture(params=["compiled", "regex"])
def words_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each reading of an ASCII text's words, and each folding of the non-ASCII
    runs: the kernel's, and the regex's of a build without it."""
    if request.param == "regex":
        monkeypatch.setattr(_normalize, "_ascii_words_without_mentions", _normalize._py_ascii_words_without_mentions)
        monkeypatch.setattr(_normalize, "_fold_runs", _normalize._py_fold_runs)
    elif compiled_kernel() is None:
        pytest.skip("the kernel is not built")
    return str(request.param)


def test_emoji_only_and_url_only_posts_normalise_to_nothing() -> None:
    assert normalize("😂😂🔥") == ""
    assert normalize("https://t.co/abc") == ""
    assert normalize_fallback("😂😂🔥") == "😂😂🔥"
    assert normalize_fallback("https://t.co/ABC") != normalize_fallback("https://t.co/xyz")


def test_retweet_prefix_detection() -> None:
    assert has_retweet_prefix("RT @user: text")
    assert has_retweet_prefix("  rt @user text")
    assert not has_retweet_prefix("ART @user: text")
    assert not has_retweet_prefix("I RT @user often")


def test_emoji_regex_is_not_the_per_post_emoji_call() -> None:
    # The normaliser must not fall back to emoji.replace_emoji per post.
    import emoji

    calls = []
    original = emoji.replace_emoji

    def counted(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        return original(*args, **kwargs)

    emoji.replace_emoji = counted
    try:
        assert normalize("fire 🔥 and 🧑🏿‍🚀") == "fire and"
    finally:
        emoji.replace_emoji = original
    assert calls == []


@settings(max_examples=400)
@given(st.text())
@example("0ÆA")  # Æ folds to "ae": the word is ASCII, and read as leetspeak, only then
def test_normalize_is_idempotent(text: str) -> None:
    # in scripts written without spaces normalize gives character bigrams,
    # which are tokens, not text to normalise again
    assume(_UNSPACED_CHAR.search(text) is None)
    once = normalize(text)
    assert normalize(once) == once


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("aZ1 \u200b\u00e9\u0430\U0001f1e6\U0001f1eb\U0001f1f7\U0001f1fa\U0001f1f8")))
def test_regional_indicators_normalise_once_for_all(text: str) -> None:
    # letters read from boxed capitals are read again as the same letters, and flags stay gone
    once = normalize(text)
    assert normalize(once) == once
    assert not any("\U0001f1e6" <= char <= "\U0001f1ff" for char in once)


@pytest.mark.parametrize("text", ["Ӟ", "ё", "ӞӞ hello", "ё hello", "Ӟдравствуйте"])
def test_a_letter_that_folds_into_a_look_alike_normalises_as_its_normal_form_does(text: str) -> None:
    # Ӟ folds to з, which looks like 3; ё to е, which looks like e: a text
    # of look-alikes and Latin letters is spelled after folding too
    once = normalize(text)
    assert normalize(once) == once


@settings(max_examples=200)
@given(st.text())
def test_normal_form_is_lowercase_words(text: str) -> None:
    result = normalize(text)
    assert result == result.strip()
    assert "  " not in result
    assert "@" not in result
    assert result == result.lower()


@settings(max_examples=500)
@given(st.text(alphabet="RTMrtmx @＠:：\u3000\t\n", max_size=50))
def test_retweet_prefix_check_agrees_with_its_pattern(text: str) -> None:
    from streamfilter._normalize import _RETWEET_PREFIX, has_retweet_prefix

    assert has_retweet_prefix(text) == (_RETWEET_PREFIX.match(text) is not None)


MENTION_PARTS = list("@avViIA \t") + ["\u0130", "x", "é", "via @x", "VIA @x", "v\u0130a @x", "@x V\u0130A"]


@settings(max_examples=2000)
@given(st.lists(st.sampled_from(MENTION_PARTS)))
def test_mention_pattern_matches_as_ignorecase_would(parts: list[str]) -> None:
    ignorecase = regex.compile(r"(?<!\w)@\w+(?:\s+via\b)?|\bvia\s+@\w+", regex.IGNORECASE)
    text = "".join(parts)
    assert _MENTION.sub(" ", text) == ignorecase.sub(" ", text)


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("I love flying with you guys, the serv…", True),
        ("the serv&hellip;", True),
        ("the serv…  \n", True),
        ("I just don't know…", True),  # a word glued to "…" may be cut: it is dropped all the same
        ("I just don't know …", False),
        ("I just don't know...", False),
        ("Bill Clinton https://t.…", False),
        ("thanks to @Unit…", False),
        ("Signals He Will Make Bill… https://t.co/DLfVYe8aVF", True),
        ("all of this… https://t.co/W5 www.example.com/x ", True),
        ("all of this… and then some", False),
        ("no ellipsis at all", False),
    ],
)
def test_is_cut_off(text: str, cut: bool) -> None:
    assert is_cut_off(text) is cut


@pytest.mark.parametrize(
    ("spoof", "original"),
    [
        ("h\u0435llo w\u0585rld fri\u0435nds", "hello world friends"),  # Armenian oh
        ("g\u09e6\u09e6d m\u0585rning", "good morning"),  # a Bengali zero for o
        ("g\u0e50\u0e50d luck", "good luck"),  # a Thai zero
        ("\u0251pple \u0261ood", "apple good"),  # Latin extensions
        ("\U0001d41a\U0001d41e\U0001d428 tests", "aeo tests"),  # mathematical letters
        ("\u202ewon enohpi eerf a niw", "win a free iphone now"),  # written backwards under an RLO
        ("win a \u202eeerf\u202c iphone now", "win a free iphone now"),  # an RLO span, ended by PDF
        # digits written for letters inside a word; a run of 1s is l's, a 1 alone an i
        ("T0day 0NLY: w1n a fr33 1ph0ne, ju5t f0ll0w", "today only win a free iphone just follow"),
        ("he11o fo11owers, 7h4nk y0u", "hello followers thank you"),
        ("今日だけ w1n фото", "今日だけ win фото"),  # among Japanese and Russian words
        # regional indicators shown as boxed capitals, set apart or in pairs that are no flag
        ("\U0001f1eb \U0001f1f7 \U0001f1ea \U0001f1ea money", "free money"),
        ("\U0001f1fc\u200b\U0001f1ee\u200b\U0001f1f3 a prize", "win a prize"),
        ("\U0001f1fc\U0001f1ee\U0001f1f3 a prize", "win a prize"),  # WI is no region: W I, then N
        ("\ua730ree \ua731tu\ua730\ua730", "free stuff"),  # small capitals F and S
    ],
)
def test_copies_a_reader_cannot_tell_apart_read_as_the_original(spoof: str, original: str) -> None:
    assert normalize(spoof) == normalize(original)


def test_a_link_or_mention_spelled_out_is_taken_out_as_any_link_or_mention() -> None:
    # a copy that spells out its words one character a space may spell out its
    # link or its mention too: read as such, not as words of single characters
    original = "RT @user: ficou marcado na historia da copa https://t.co/xxge7qklbt"
    link, mention = "h t t p s : / / t . c o / x x g e 7 q k l b t", "@ u s e r"
    assert normalize(original) == "ficou marcado na historia da copa"
    assert normalize(f"RT {mention}: ficou marcado na historia da copa {link}") == normalize(original)
    assert normalize(f"mira {link.upper()} and w w w . e x a m p l e . c o m / o f e r t a ya") == "mira and ya"
    assert normalize("W w w . e x a m p l e . c o m / o f e r t a ya") == "ya"  # a sentence's capital
    assert normalize(f"{mention} f r e e stuff") == "stuff"  # one space apart, the mention's run takes the next word
    # an "@" before a word, or before one letter, is no mention spelled out; nor is a gap in a fraction
    assert normalize("see you @ the gym, @ 5") == "see you the gym 5"
    assert normalize("1 / / 2 of it") == "1 2 of it"


def test_a_text_spelled_out_letter_by_letter_keeps_its_words_where_wider_gaps_part_them() -> None:
    plain = "win a brand new phone today"
    assert normalize("   ".join(" ".join(word) for word in plain.split())) == plain
    assert normalize("F R E E  M O N E Y for you") == "free money for you"
    # two-letter words, and a word's apostrophe and digits, spaced out as well
    assert normalize("y o u ' v e   g o t   t o   s e e   g a t e   7 3") == "youve got to see gate 73"
    # with every gap alike, a run is one word, as before
    assert normalize("get f r e e stuff") == "get free stuff"
    # a letter a line, words set apart by blank lines; letters a space apart, a word a line
    assert normalize("\n\n".join("\n".join(word) for word in plain.split())) == plain
    assert normalize("\r\n\r\n".join("\r\n".join(word) for word in plain.split())) == plain
    assert normalize("\n".join(" ".join(word) for word in plain.split())) == plain
    assert normalize("w\ti\tn\u3000\u3000t\u2003o\u2003d\u2003a\u2003y") == "win today"
    # with any white space there is, a gap of two parts the words
    spaces = [chr(code) for code in range(0x110000) if chr(code).isspace()]
    for space in spaces:
        assert normalize(f"{space.join('claim')}{space * 2}{space.join('now')}") == "claim now", hex(ord(space))
    # a gap made by what normalising takes out (tatweel, emoji) is no wider gap
    assert normalize("ا ل س خ ر ي ـ ـ ـ ه") == normalize("السخريه")
    assert normalize("f 🔥 r 🔥 e 🔥 e") == "free"


@pytest.mark.parametrize("mark", [".", "-", "*", "_", "·", "•"])
def test_words_whose_letters_one_mark_joins_keep_their_words(mark: str) -> None:
    plain = "claim your free prize now at our store you've seen it"
    assert normalize(" ".join(mark.join(word) for word in plain.split())) == normalize(plain)
    assert normalize(f"c{mark}\u200bl{mark}a{mark}i{mark}m y{mark}o{mark}u{mark}r") == "claim your"
    assert normalize(f"О{mark}т{mark}л{mark}и{mark}ч{mark}н{mark}о") == normalize("Отлично")


def test_marks_between_letters_that_are_no_spelled_word_stay_punctuation() -> None:
    # mixed marks, a version, a host name, words with more after their letters
    # (two broken words a text at most: three are closed up, as the next test holds)
    assert normalize("x.y-z v2.0.1 dl.a.b.c.net") == "xyz v2 0 1 dl abc net"
    assert normalize("well-known e-mail") == "well known e mail"
    # a word of two letters so spelled stays two, as it reads with the marks taken out
    assert normalize("call me a.s.a.p at 9 a.m. и т.д.") == normalize("call me a s a p at 9 a m и т д")


def test_words_broken_by_a_mark_inside_are_closed_up_in_a_text_with_three() -> None:
    plain = "claim your free prize now at our store"
    assert normalize("cl.aim yo,ur fr-ee pr;iz:e no/w at o_ur st·ore") == normalize(plain)
    assert normalize("c.la.im YO.UR fr.ee. Pri.ze!") == "claim your free prize"
    # one or two, as honest text has them, keep their words
    assert normalize("a front-end and/or design") == "a front end and or design"
    # numbers, times and mentions are no broken words, and a link goes first
    text = "v1.2 and 3.14 at 10:30 by @a_b https://x.com/y.z fr.ee gi.ft no.w"
    assert normalize(text) == "vi 2 and 3 14 at 10 30 by free gift now"


def test_flags_stay_emoji_where_their_letters_would_make_a_word() -> None:
    # FR and EE are flags, shown as flags: no letters a reader sees
    assert normalize("\U0001f1eb\U0001f1f7\U0001f1ea\U0001f1ea money") == "money"
    assert normalize("I love \U0001f1fa\U0001f1f8 and \U0001f1eb\U0001f1f7") == "i love and"
    # an odd one out after a flag is shown as its letter
    assert normalize("\U0001f1fa\U0001f1f8\U0001f1f8 team") == "s team"


def test_a_trailing_run_of_many_hashtags_is_left_out_after_enough_words() -> None:
    text = "Join our giveaway today and win a new phone"
    body = "join our giveaway today and win a new phone"
    assert normalize(f"{text} #win #giveaway #iphone #free #contest") == body
    # glued tags, emoji, a mention and a link among and after them; tags in dressed letters
    assert normalize(f"{text} #win#giveaway 🔥 #iphone #free #deal @fan1 https://t.co/x") == body
    assert normalize(f"{text} #\u24e6\u24d8\u24dd #free #deal #iphone #sale") == body
    # a "…" among the tags cut them, not the text: its last word stays, and it is not cut off
    assert words_and_cut(f"{text} #win #giveaway #iphone #free #deal #fre\u2026")[0] == body.split()
    assert words_and_cut(f"{text} #win #giveaway #iphone #free #deal #fre\u2026")[1] is False
    # in a script written without spaces, the tags' bigrams are left out too
    thai = (
        "\u0e23\u0e48\u0e27\u0e21\u0e2a\u0e19\u0e38\u0e01\u0e01\u0e31\u0e1a\u0e01\u0e34\u0e08\u0e01\u0e23\u0e23\u0e21"
    )
    assert normalize(f"{thai} #win #giveaway #iphone #free #deal #sale #promo") == normalize(thai)


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("Great game tonight #Lakers #NBA #win #ball", "nba"),  # a short text: its tags are most of what it says
        ("Join our giveaway today and win a new phone #free #deal", "deal"),  # two tags are words of the text
        ("Join our giveaway today and win a new phone #free #deal #iphone #sale", "deal"),  # four, after nine words
        ("Join our giveaway today and win a new phone #free #deal #iphone #sale #hot now", "deal"),  # not last
    ],
)
def test_hashtags_stay_words_of_the_text_where_they_are_no_trailing_run_of_many(text: str, tag: str) -> None:
    assert tag in normalize(text).split()


def test_numbers_keep_their_digits_and_a_word_reads_alike_beside_unspaced_script() -> None:
    assert normalize("flight 1234 at 10 am, gate 5") == "flight 1234 at 10 am gate 5"
    assert normalize("0 of 1 won, 50's song") == "0 of 1 won sos song"  # "50's" is a word that mixes them
    # an ASCII word is read once it is cut out of a run of Korean, with or without the space
    assert normalize("하필이면 KBS1에 결방") == normalize("하필이면 KBS1 에 결방")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("W!n a fr€€ g!ft, cl!ck the |ink !n b!o", "win a free gift click the link in bio"),
        ('it\'$ re@lly aggre$$!v€ to b|@st "€nt€rta!nm€nt" $ave', "its really aggressive to blast entertainment save"),
        ("Ｗ！ｎ ａ ｆｒ€€ ｇ！ｆｔ", "win a free gift"),  # folded first
        # symbols that are what they are
        ("great!Thanks so!!!good !!!wow yes!", "great thanks so good wow yes"),
        ("$AAPL up $30 to US$ 50 R$ 20", "aapl up 30 to us 50 r 20"),
        ("mail me@example.com thanks@united @fan", "mail me example com thanks united"),
        ("¡hola! !https://t.co/x a | b", "hola a b"),
    ],
)
def test_symbols_inside_a_word_read_as_the_letters_they_stand_for(text: str, expected: str) -> None:
    assert normalize(text) == expected


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("aZ09'’ !¡|$€@.#/\n")))
def test_a_text_the_symbol_check_passes_over_holds_no_symbol_to_read(text: str) -> None:
    # the check only spares the reading where the reading would change nothing
    if _confusables._MAY_READ.search(text) is None:
        assert _confusables._WORD_WITH_SYMBOL.sub(_confusables._read_word, text) == text


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("aZ09'` _-.\u3042\u0e01")))
def test_a_text_the_leet_check_passes_over_holds_no_word_to_read(text: str) -> None:
    # the check only spares the reading where the reading would change nothing
    if may_hold_leet(text) is None:
        words = _normalize.words_and_cut(text)[0]
        assert read_leet(words) == words


@pytest.mark.parametrize(
    "text",
    ["բարեւ աշխարհ", "օրինակ", "გამარჯობა", "مرحبا بالعالم", "東京〇〇駅", "łódź żółć"],
)
def test_words_in_one_script_keep_their_letters(text: str) -> None:
    """Look-alikes are folded only inside a word that mixes them with ASCII letters (Cyrillic and
    Greek letters that look Latin are folded everywhere, as before)."""
    words = normalize(text).split()
    assert all(not word.isascii() for word in words)


def _spelled_by_whole_patterns(text: str) -> str:
    """spell_spoofs as the patterns over whole texts and words give it: the
    reference for its character-at-a-time tests."""
    from streamfilter import _confusables as c

    members = "".join(regex.escape(chr(code)) for code in sorted(c._by_look()))
    spoof_word = regex.compile(f"(?:[0-9\\p{{Latin}}\\p{{M}}]|[{members}])+")
    other_letter = regex.compile(f"[^\\P{{L}}\\p{{Latin}}{members}]")
    lookalike = regex.compile(f"[{members}]")
    if lookalike.search(text) is None:
        return text
    every_word = other_letter.search(text) is None
    words = c._LETTER_RUN.findall(text)
    capitalised = sum(word[:1].isupper() for word in words) * 2 >= len(words)
    table = c._by_capital_look() if capitalised else c._by_look()

    def spelled(run: regex.Match[str]) -> str:
        word = str(run.group())
        if spoof_word.fullmatch(word) and lookalike.search(word) and (every_word or c._LATIN.search(word)):
            return word.translate(table)
        return word

    return str(c._LETTER_RUN.sub(spelled, text))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aeoHPcx09 \u0301ηοΗΟаеоАЕОꮯᏟ日本ج\u00e9ǝ.!", max_size=30))
def test_spoofs_are_spelled_as_the_whole_text_patterns_spell_them(text: str) -> None:
    from streamfilter._confusables import spell_spoofs

    assert spell_spoofs(text) == _spelled_by_whole_patterns(text)


# A campaign's copies: one text, its mentions and t.co links spelled anew. The
# pieces around them are those where an address's length or letters could
# count: a cut ("…" looks back 64 characters), entities, retweet prefixes,
# "via", colons, look-alikes (their spelling counts capitalised words), bidi
# overrides, scripts without spaces, emoji.
_PIECES = [
    " ", "  ", "\n", "\u3000", ":", "RT ", "via ", "Via ", "@", "#", "…", "&amp;", "&hellip;", "\u202e",
    "\u202c", "hello", "World", "a", "I", "b c d", "日本語", "ภาษาไทย", "العربية", "Неllо", "οk", "1", ".",
    "/", "https://", "👍", "x@y", "é", "win a new phone by joining our giveaway", " #win #deal", " #free #sale",
]  # fmt: skip
_HANDLE = st.text(alphabet="abcXYZ019_", min_size=1, max_size=16).map(lambda name: "@" + name)
_LINK = st.text(alphabet="aZ09", min_size=1, max_size=12).map(lambda code: "https://t.co/" + code)
_SLOT = object()


_LONG_LINKS = [("https://t.co/AAAAAAAAAAAA", "https://t.co/A")] * 14
_CASED_HANDLES = [("@abc", "@ABC"), ("@def", "@DEF")] * 7


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(_PIECES), st.just(_SLOT)), max_size=14),
    st.lists(st.tuples(st.one_of(_HANDLE, _LINK), st.one_of(_HANDLE, _LINK)), min_size=14, max_size=14),
)
# a cut is looked for in the last 64 characters, whose start the links' length moves
@example(["hello word…", " ", _SLOT, " ", _SLOT, " ", _SLOT, " ", _SLOT], _LONG_LINKS)
# most words capitalised or not picks how a look-alike is spelled ("ƽ" as s or 5)
@example(["xƽx", " ", _SLOT, " ", _SLOT], _CASED_HANDLES)
# the words among trailing hashtags decide whether they are left out; an address is none
@example(["win a new phone by joining our giveaway", " #win #deal", " ", _SLOT, " #free #sale"], _LONG_LINKS)
def test_texts_that_share_a_words_key_have_the_same_words(template: list[Any], addresses: list[Any]) -> None:
    # The sketcher normalises a text once per key (Sketcher.words): a key two
    # texts share must never hide a difference in their words.
    slots = iter(addresses)
    filled = [piece if piece is not _SLOT else next(slots) for piece in template]
    first = "".join(piece if isinstance(piece, str) else piece[0] for piece in filled)
    second = "".join(piece if isinstance(piece, str) else piece[1] for piece in filled)
    assume(_normalize.same_words_key(first) == _normalize.same_words_key(second))
    assert _normalize.words_and_cut(first) == _normalize.words_and_cut(second)


def test_a_campaigns_copies_share_a_words_key_and_other_texts_do_not() -> None:
    key = _normalize.same_words_key
    copy = "@alice Win a trip to Tokyo! https://t.co/AbC123xyz0 #sweeps"
    assert key(copy) == key("@bob_77 Win a trip to Tokyo! https://t.co/Zz9 #sweeps")
    assert key("RT @alice: 東京旅行が当たる https://t.co/a1") == key("RT @b: 東京旅行が当たる https://t.co/b2")
    assert key(copy) != key("@alice Win a trip to Paris! https://t.co/AbC123xyz0 #sweeps")
    # where an address's spelling could count, a text is its own key
    for text in ("@alice Win a trip to Tok… https://t.co/a1", "@alice Win &amp; go", "@alice \u202eolleh\u202c"):
        assert key(text) == text
    # a spoof is spelled by whether most words are capitalised: so is the key
    assert key("@alice @bob xƽx") == key("@carol @dave xƽx") != key("@Alice @Bob xƽx")


@pytest.mark.parametrize(
    ("text", "ascii"),
    [
        ("اربح ٥٠٠٠ ريال", "اربح 5000 ريال"),  # Arabic-Indic
        ("جایزه ۵۰۰۰ تومان", "جایزه 5000 تومان"),  # Persian
        ("इनाम ५००० रुपये", "इनाम 5000 रुपये"),  # Devanagari
        ("ราคา๑๐๐บาท", "ราคา100บาท"),  # Thai, inside a run of Thai letters
        ("১২৩ টাকা", "123 টাকা"),  # Bengali
    ],
)
def test_a_number_reads_alike_in_the_digits_of_any_script(text: str, ascii: str) -> None:
    assert normalize(text) == normalize(ascii)
    assert not any(char.isdecimal() and not char.isascii() for char in normalize(text))


def test_simplified_forms_are_read_once_for_all() -> None:
    # a form the table holds is itself read as a form (OpenCC's 9 such lines):
    # followed to its end, so that reading a text again changes nothing
    forms = simplified_forms()
    assert len(forms) > 4000
    assert all(forms.get(ord(form), form) == form for form in forms.values())
    assert "國會".translate(forms) == "国会"
    # Japanese is read so too: in kanji alone it cannot be told from Chinese
    assert normalize("帰宅開始") == normalize("さぁ帰宅開始")[6:] == "帰宅 宅开 开始"


def test_emoji_set_holds_every_character_of_the_emoji_packages_sequences() -> None:
    # read from Unicode's properties rather than the emoji package's data,
    # which is slow to load: the same characters
    import emoji

    from_package = {ord(char) for sequence in emoji.EMOJI_DATA for char in sequence if ord(char) >= 0x80}
    pictographs = {
        code_point
        for start, end in ((0x2000, 0x3300), (0x1F000, 0x1FB00))
        for code_point in range(start, end)
        if regex.fullmatch(r"[\p{Extended_Pictographic}\p{Emoji_Modifier}]", chr(code_point))
    }
    in_table = _normalize._emoji_code_points()
    assert in_table == (from_package | pictographs | set(range(0x1F1E6, 0x1F200))) - _normalize._INVISIBLE_IN_EMOJI
    assert {0xA9, 0x1F600, 0x1F1FA, 0x2764} <= in_table and not {0x00E9, 0x3042, 0xFE0F} & in_table


def test_load_tables_builds_what_a_first_spoof_would() -> None:
    # a live pipeline builds these before its first record: the first post
    # with a look-alike then finds them built; a worker builds the emoji
    # tables alone, and its first look-alike the rest
    built = (
        _normalize._run_table,
        _confusables._lookalikes,
        _confusables._lookalike_bits,
        _confusables._by_capital_look,
        _confusables._to_ascii,
    )
    for lookalikes, expected in ((False, [1, 0, 0, 0, 0]), (True, [1, 1, 1, 1, 1])):
        for table in built:
            table.cache_clear()
        _normalize.load_tables(lookalikes=lookalikes)
        assert [table.cache_info().currsize for table in built] == expected
