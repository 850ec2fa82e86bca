"""Every script: tokens where words are not spaced, folding as search engines fold,
and verdicts that hold in Japanese, Chinese, Thai, Korean and Arabic as in English."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfilter import FilterConfig, MemoryStore, StreamFilter, VerdictKind, normalize
from streamfilter._normalize import _UNSPACED_SPLIT, _tokens, has_retweet_prefix

JAPANESE = "東京は今日も朝から晴れていて気持ちがいいです"  # 22 characters


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("東京は晴れ", "东京 京は は晴 晴れ"),  # 東 read as 东, in Japanese too (_hanzi)
        ("ภาษาไทย", "ภา าษ ษา าไ ไท ทย"),
        ("雨", "雨"),  # a run of one character is one token
        ("I love 北京 2024", "i love 北京 2024"),  # mixed: words stay words, the run is cut
        ("我愛東京", "我爱 爱东 东京"),  # Chinese in traditional characters read as simplified
        ("ﾃｽﾄ", "テス スト"),  # halfwidth katakana folded first
        ("나는 학교에 간다", "나는 는학 학교 교에 에간 간다"),  # Hangul across its spaces
    ],
)
def test_unspaced_scripts_become_character_bigrams(text: str, tokens: str) -> None:
    assert normalize(text) == tokens


@pytest.mark.parametrize(
    "variant",
    [
        "東京は今日も 朝から 晴れていて 気持ちがいいです",  # spaces inserted
        "東京は今日も朝から😀晴れていて気持ちがいいです🎉",  # emoji inside
        "東京は今日も朝から晴れて\u200bいて気持ちが\u200dいいです",  # zero-width characters
        "東京は、今日も朝から晴れていて。気持ちがいいです！",  # punctuation
        "東 京 は 今 日 も 朝 か ら 晴 れ て い て 気 持 ち が い い で す",  # every character spaced out
    ],
)
def test_what_is_inside_an_unspaced_run_changes_no_token(variant: str) -> None:
    assert normalize(variant) == normalize(JAPANESE)


def test_korean_spacing_changes_no_token() -> None:
    assert normalize("나는학교에간다") == normalize("나는 학교에 간다") == normalize("나 는 학 교 에 간 다")


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("كـــبير جـــداً", "كبير جدا"),  # tatweel, tanwin
        ("كَبِيرٌ", "كبير"),  # harakat
        ("أحمد إبراهيم آمن", "احمد ابراهيم امن"),  # alef with hamza and madda
        ("مستشفى مدرسة", "مستشفي مدرسه"),  # alef maqsura, teh marbuta
        ("یک کتاب", "يك كتاب"),  # Persian yeh and keheh
        ("שָׁלוֹם", "שלום"),  # Hebrew niqqud
        ("क़लम", "कलम"),  # Devanagari nukta
        ("ёлка", "елка"),  # Cyrillic ё
        ("Ελλάδα", "Ελλαδα"),  # Greek tonos
        ("ｈｅｌｌｏ　１２３", "hello 123"),  # fullwidth forms
    ],
)
def test_script_aware_folding(variant: str, plain: str) -> None:
    assert normalize(variant) == normalize(plain)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("ばか", "はか"),  # a Japanese voiced mark makes another word
        ("नमस्ते दुनिया", "नमसत दनय"),  # Devanagari vowel signs and virama hold meaning
    ],
)
def test_marks_that_make_another_letter_are_kept(first: str, second: str) -> None:
    assert normalize(first) != normalize(second)


def test_a_word_spelled_out_letter_by_letter_is_the_word() -> None:
    assert normalize("get it f r e e now") == "get it free now"
    assert normalize("п р и в е т всем") == normalize("привет всем")


def test_weibo_repost_chains_are_reposts() -> None:
    assert has_retweet_prefix("//@张三: 今天天气很好")
    assert has_retweet_prefix("//@张三：今天天气很好")
    assert normalize("//@张三: 今天天气很好") == normalize("今天天气很好")


def _judge(texts: list[str]) -> list[VerdictKind]:
    with StreamFilter(FilterConfig(), store=MemoryStore()) as sf:
        return [sf.check({"id": str(at), "text": text}).kind for at, text in enumerate(texts)]


@pytest.mark.parametrize(
    "copy",
    [
        JAPANESE.replace("朝", "昼"),  # one character changed
        JAPANESE[:10] + "、" + JAPANESE[10:],  # punctuation added
        JAPANESE + " #晴れ 😀",  # a hashtag and an emoji
        "RT @someone: " + JAPANESE,
        JAPANESE[:18] + "…",  # cut off
    ],
)
def test_near_copies_of_a_japanese_post_are_duplicates(copy: str) -> None:
    assert _judge([JAPANESE, copy]) == [VerdictKind.NOVEL, VerdictKind.DUPLICATE]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (JAPANESE, "大阪は今日も朝から雨が降っていて寒いです"),  # the same topic, another post
        ("今天北京的天气很好，我们去公园散步吧", "今天上海的天气不好，我们在家看电影吧"),
        ("วันนี้อากาศดีมากเลยไปเที่ยวทะเลกัน", "วันนี้ฝนตกหนักมากอยู่บ้านดูหนังกัน"),
        ("오늘 날씨가 정말 좋아서 공원에 갔어요", "오늘 날씨가 너무 추워서 집에 있었어요"),
    ],
)
def test_two_posts_on_one_topic_are_both_novel(first: str, second: str) -> None:
    assert _judge([first, second]) == [VerdictKind.NOVEL, VerdictKind.NOVEL]


def test_an_index_of_the_previous_tokens_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    import lmdb

    from streamfilter import ConfigMismatchError

    with StreamFilter(path=tmp_path / "index") as sf:
        sf.check({"id": "1", "text": "a post"})
    env = lmdb.open(str(tmp_path / "index"), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        config = json.loads(txn.get(b"config") or b"{}")
        config["normalizer_version"] = (
            config["normalizer_version"] - 1
        )  # as the code before script-aware tokens pinned it
        txn.put(b"config", json.dumps(config, sort_keys=True).encode())
    env.close()
    with pytest.raises(ConfigMismatchError, match="normalizer_version"):
        StreamFilter(path=tmp_path / "index").open()


# N'Ko letters and the modifier-letter apostrophe come before Thai and count
# as unspaced; the rest stand for the scripts before it, and for Han and Hangul after
@settings(max_examples=500)
@given(st.lists(st.text(alphabet=st.sampled_from("aé жאअ߁ߊʼ،́ก東한"), max_size=6)))
def test_words_without_unspaced_characters_are_passed_over_as_the_split_passes_them(words: list[str]) -> None:
    words = [word for word in words if word.strip()]
    assert (_tokens(words) is words) == (len(_UNSPACED_SPLIT.split(" ".join(words))) == 1)
