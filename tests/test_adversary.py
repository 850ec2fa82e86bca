"""Inputs crafted against the filter by the people it exists to catch.

Chaff that shares every band key with an original, chaff words around a
copy, floods of low-entropy
posts, deletes that name another platform's post, look-alike letters
(the event clock's own tests are in tests/test_clock.py and tests/test_cli.py).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from streamfilter import FilterConfig, MemoryStore, StreamFilter, normalize
from streamfilter._engine import Sketcher
from streamfilter._rules import MAX_VERIFIED, CachedPost
from streamfilter._turned import read_turned
from streamfilter.adapters import record_adapter

from .conftest import FIXTURES, replay_command

SEED = 1
ORIGINAL = "win a free caribbean cruise for two today just click the link in our bio and claim your prize now"


def _band_keys(sketcher: Sketcher, words: list[str]) -> tuple[int, ...]:
    _, keys = sketcher._sketcher.sketch(*sketcher._sketcher.words([words]))
    return tuple(keys[0].tolist())


def chaff(count: int, extra_words: int = 45, seed: int = SEED) -> list[str]:
    """Posts of the original's text and ``extra_words`` random words each,
    chosen so that every band key stays the original's: what an adversary
    crafts where the seed is known, each novel (similarity about 0.3)."""
    sketcher = Sketcher(FilterConfig(seed=seed), record_adapter("auto"))
    base = normalize(ORIGINAL).split()
    target = _band_keys(sketcher, base)
    rng = random.Random(59)
    posts: list[str] = []
    while len(posts) < count:
        words = list(base)
        while len(words) < len(base) + extra_words:
            word = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6))
            if _band_keys(sketcher, [*words, word]) == target:
                words.append(word)
        posts.append(" ".join(words))
    return posts


def _record(post_id: str, text: str, second: int) -> dict[str, str]:
    return {"id": post_id, "text": text, "created_at": f"2024-03-01T10:{second // 60:02d}:{second % 60:02d}Z"}


@pytest.fixture(scope="module")
def eight_chaff() -> list[str]:
    return chaff(8)


def test_an_exact_copy_is_never_novel_whatever_chaff_came_between(eight_chaff: list[str]) -> None:
    with StreamFilter(FilterConfig(seed=SEED)) as sf:
        assert sf.check(_record("orig", ORIGINAL, 0)).kind.value == "novel"
        kinds = [sf.check(_record(f"chaff{n}", text, 1 + n)).kind.value for n, text in enumerate(eight_chaff)]
        assert kinds == ["novel"] * 8  # each shares every band key with the original, and is novel
        copy = sf.check(
            _record(
                "copy",
                "RT @someone: WIN a free Caribbean cruise for two today!! just click the "
                "link in our bio and claim your prize now 🚢 https://t.co/x",
                20,
            )
        )
    assert (copy.kind.value, copy.duplicate_of) == ("duplicate", "orig")


def test_chaff_crafted_for_one_seed_shares_no_band_keys_under_the_index_s_own(eight_chaff: list[str]) -> None:
    # a new index draws a secret seed: the crafted posts are unrelated to the original there
    with StreamFilter() as sf:
        drawn = sf.config.seed
    crafted_for = Sketcher(FilterConfig(seed=SEED), record_adapter("auto"))
    secret = Sketcher(FilterConfig(seed=drawn), record_adapter("auto"))
    assert drawn != SEED or pytest.skip("the draw hit the public seed")
    base = normalize(ORIGINAL).split()
    shared = [len(set(_band_keys(secret, text.split())) & set(_band_keys(secret, base))) for text in eight_chaff]
    assert all(_band_keys(crafted_for, text.split()) == _band_keys(crafted_for, base) for text in eight_chaff)
    assert sum(shared) < 8 * 16 / 2  # under the secret seed, most of their band keys differ


def test_an_index_keeps_the_seed_it_drew_and_an_explicit_one_is_kept_too(tmp_path: Path) -> None:
    seeds = []
    for _ in range(2):
        with StreamFilter(path=tmp_path / "drawn") as sf:
            sf.check(_record("a", ORIGINAL, 0))
            seeds.append(sf.config.seed)
    assert seeds[0] == seeds[1] and isinstance(seeds[0], int)
    with StreamFilter(path=tmp_path / "other") as sf:
        other = sf.config.seed
    assert other != seeds[0]  # odds of a repeat: one in 2**32
    with StreamFilter(FilterConfig(seed=7), path=tmp_path / "explicit") as sf:
        assert sf.config.seed == 7


def test_two_runs_with_one_seed_give_the_same_verdicts_and_the_cli_takes_seed(tmp_path: Path) -> None:
    import subprocess

    outputs = []
    for run in range(2):
        verdicts = tmp_path / f"v{run}"
        done = subprocess.run(
            replay_command(str(FIXTURES / "campaign.jsonl"), "--seed", "12345", "--verdicts", str(verdicts), "-q"),
            capture_output=True,
            check=True,
        )
        assert done.returncode == 0
        outputs.append(verdicts.read_bytes())
    assert outputs[0] == outputs[1]
    refused = subprocess.run(replay_command(str(FIXTURES / "campaign.jsonl"), "--seed", "-1"), capture_output=True)
    assert refused.returncode == 2 and b"--seed: must be an integer from 0 to 4294967295" in refused.stderr


class _CountingStore(MemoryStore):
    """A memory store that counts the stored posts each batch's judge reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    def begin(self):  # type: ignore[no-untyped-def]
        txn = super().begin()
        counted = txn.post
        self.reads.append(0)

        def post(serial: int) -> CachedPost | None:
            self.reads[-1] += 1
            return counted(serial)

        txn.post = post  # type: ignore[method-assign]
        return txn


def _flood(count: int, seed: int = 3) -> list[dict[str, str]]:
    rng = random.Random(seed)
    vocabulary = [letter * 3 + "x" for letter in "abcdefghijklmnopqrstuvwxyz"]
    return [_record(str(n), " ".join(rng.choice(vocabulary) for _ in range(12)), n % 3000) for n in range(count)]


def test_a_flood_of_look_alike_posts_costs_each_post_a_bounded_number_of_verifications() -> None:
    # 12 words from 26: unrelated posts share band keys far more than real text does
    store = _CountingStore()
    posts = _flood(1500)
    with StreamFilter(FilterConfig(seed=SEED, batch_size=1), store=store) as sf:
        verdicts = [sf.check(post) for post in posts]
        stats = sf.stats()
    assert max(store.reads) <= MAX_VERIFIED
    assert stats.signals["verification_capped"] > 100 and stats.signals["full_buckets"] > 0
    assert sum(v.kind.value == "novel" for v in verdicts) > 1400  # unrelated posts stay novel


def test_a_campaign_dated_more_than_a_ttl_back_is_caught_among_itself(tmp_path: Path) -> None:
    # Copies dated a month before the stream's posts, with a TTL of a day,
    # would arrive expired: none could match another, each would pass as novel.
    rng = random.Random(3)
    words = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6)) for _ in range(400)]
    stream = [_record(f"p{n}", " ".join(rng.sample(words, 12)), n) for n in range(40)]
    copies = [
        {"id": f"c{n}", "text": f"@user{n} {ORIGINAL} https://t.co/{n}", "created_at": f"2024-02-01T10:00:0{n}Z"}
        for n in range(5)
    ]
    with StreamFilter(FilterConfig(ttl_seconds=86400, seed=SEED), path=tmp_path / "index") as sf:
        assert all(v.is_novel for v in sf.check_many(stream))
        verdicts = sf.check_many(copies)
        assert [(v.kind.value, v.duplicate_of) for v in verdicts] == [("novel", None)] + [("duplicate", "c0")] * 4
        assert sf.stats().signals["dated_behind"] == 5
        # and later posts of the stream's own time match them too
        later = sf.check({"id": "late", "text": ORIGINAL, "created_at": "2024-03-01T10:01:00Z"})
        assert (later.kind.value, later.duplicate_of) == ("duplicate", "c0")


def test_a_delete_forgets_only_a_post_of_its_own_platform(tmp_path: Path) -> None:
    import subprocess

    lines = [
        {
            "id_str": "123",
            "created_at": "Fri May 04 14:07:00 +0000 2012",
            "text": ORIGINAL,
            "user": {"screen_name": "a"},
        },
        {"event": "delete", "payload": "123"},  # Mastodon's: its status 123 is not Twitter's
        {
            "id_str": "124",
            "created_at": "Fri May 04 14:08:00 +0000 2012",
            "text": ORIGINAL,
            "user": {"screen_name": "b"},
        },
        {"id": "g1", "text": "a generic record about the harbour bridge plan", "created_at": "2012-05-04T14:09:00Z"},
        {"delete": {"status": {"id_str": "g1"}}},  # Twitter's: not the generic post g1
        {"id": "g2", "text": "a generic record about the harbour bridge plan", "created_at": "2012-05-04T14:10:00Z"},
        {"delete": {"status": {"id_str": "123"}}},  # Twitter's own: forgets it
        {
            "id_str": "125",
            "created_at": "Fri May 04 14:11:00 +0000 2012",
            "text": ORIGINAL,
            "user": {"screen_name": "c"},
        },
    ]
    stream = tmp_path / "deletes.jsonl"
    stream.write_text("".join(json.dumps(line) + "\n" for line in lines))
    verdicts = tmp_path / "v"
    subprocess.run(replay_command(str(stream), "--verdicts", str(verdicts), "-q"), check=True)
    judged = {v["id"]: (v["verdict"], v["duplicate_of"]) for v in map(json.loads, verdicts.read_text().splitlines())}
    assert judged["124"] == ("duplicate", "123")
    assert judged["g2"] == ("duplicate", "g1")
    assert judged["125"] == ("novel", None)


def test_forget_names_the_platform_where_ids_are_ambiguous() -> None:
    with StreamFilter(FilterConfig(seed=SEED), format="generic") as sf:
        sf.check(_record("123", ORIGINAL, 0))
        assert sf.forget("123", platform="twitter") == 0
        assert sf.forget("123", platform="generic") == 1
        sf.check(_record("7", "another post about the harbour bridge plan for everyone", 1))
        assert sf.forget(7) == 1  # None: every platform's post with the id
        with pytest.raises(TypeError):
            sf.forget(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            sf.forget(b"7")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="platform must be one of"):
            sf.forget("7", platform="myspace")


def test_a_cross_platform_delete_is_counted() -> None:
    with StreamFilter(FilterConfig(seed=SEED)) as sf:
        verdicts = sf.check_many(
            [
                {"id_str": "123", "created_at": "Fri May 04 14:07:00 +0000 2012", "text": ORIGINAL},
                {"event": "delete", "payload": "123"},
                {"id_str": "124", "created_at": "Fri May 04 14:08:00 +0000 2012", "text": ORIGINAL},
            ]
        )
        stats = sf.stats()
    assert [v.kind.value for v in verdicts] == ["novel", "skipped", "duplicate"]
    assert stats.signals["cross_platform_deletes"] == 1
    assert "1 cross platform deletes" in stats.line()


SPOOFS = {
    "greek small eta for n": (
        "join now and win a new phone tonight in our fun online contest",
        "joi\u03b7 \u03b7ow a\u03b7d wi\u03b7 a \u03b7ew pho\u03b7e to\u03b7ight i\u03b7 our fu\u03b7 o\u03b7li\u03b7e co\u03b7test",
    ),
    "cherokee capitals": (
        "CLAIM YOUR FREE PRIZE NOW AT OUR OFFICIAL STORE BEFORE MIDNIGHT TONIGHT",
        "\u13dfL\u13aaI\u13b7 Y\u13beU\u13a1 F\u13a1\u13ac\u13ac P\u13a1I\u13c3\u13ac N\u13beW \u13aa\u13a2 \u13beU\u13a1 "
        "\u13beFFI\u13dfI\u13aaL \u13da\u13a2\u13be\u13a1\u13ac B\u13acF\u13be\u13a1\u13ac \u13b7IDNIG\u13bb\u13a2 "
        "\u13a2\u13beNIG\u13bb\u13a2",
    ),
    "greek capitals": ("HOME TEAM WINS", "\u0397\u039f\u039c\u0395 \u03a4\u0395\u0391\u039c WINS"),
    # one right-to-left letter between Latin ones is shown where it stands: Arabic heh and
    # Hebrew samekh as o, Arabic alef and Hebrew vav as l
    "arabic and hebrew letters": (
        "follow our official account to win a gold prize",
        "f\u0647llow \u05e1ur \u05e1fficia\u05d5 acc\u0647unt to win a g\u0647\u0627d prize",
    ),
    # signs that look like letters, inside a word: estimated for e, multiplication for x,
    # union for u, logical or for v, down tack for T, power on for l
    "signs": (
        "please vote for the extra union TODAY",
        "p\u23fdease \u2228ote for the e\u00d7tra \u222anion \u22a4ODAY",
    ),
    # a capital I's look-alike among small letters spoofs an l (Cyrillic, Greek, Cyrillic palochka)
    "capital i for small l": ("please Follow all", "p\u0406ease Fo\u0406\u0399ow a\u04c0l"),
}
# a capital's small letter can look like another Latin letter (Η is H, η is n): only the cases as typed
AS_TYPED = {"greek capitals", "capital i for small l"}
# ... and a small letter's look-alike, or a capital's among small letters, spoofs nothing in capitals
SMALL_LOOKS = {"greek small eta for n", "capital i for small l"}


@pytest.mark.parametrize("name", sorted(SPOOFS))
@pytest.mark.parametrize("case", ["as written", "lower", "upper", "casefold"])
def test_look_alikes_read_as_the_latin_they_imitate_in_either_case(name: str, case: str) -> None:
    plain, spoof = SPOOFS[name]
    changed = {"as written": spoof, "lower": spoof.lower(), "upper": spoof.upper(), "casefold": spoof.casefold()}[case]
    if case == "upper" and name in SMALL_LOOKS or case in ("lower", "casefold") and name in AS_TYPED:
        changed = spoof  # a capital eta is an H, a small one an n: each spoofs what it looks like
    assert normalize(changed) == normalize(plain)


@pytest.mark.parametrize(
    "text",
    [
        "Καλημέρα σε όλους, ΗΜΕΡΑ και ημέρα",  # Greek: η and ν keep apart
        "Привет всем, это тест на новом телефоне",  # Russian
        "Բարեւ ձեզ, այսօր լավ օր է",  # Armenian
        "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",  # Cherokee
        "هههه مرحبا بكم، هذا اختبار",  # Arabic: heh and alef as themselves
        "שלום לכולם, זה מבחן",  # Hebrew: samekh and vav as themselves
    ],
)
def test_text_in_its_own_script_keeps_its_words_in_both_cases(text: str) -> None:
    assert normalize(text.upper()) == normalize(text.lower())
    assert not normalize(text).isascii()  # not spelled out in Latin as a spoof would be


def test_a_styled_capital_i_among_small_letters_stays_an_i() -> None:
    assert normalize("\U0001d41c\U0001d421\U0001d41e\U0001d41c\U0001d424\U0001d408\U0001d427") == "checkin"
    assert normalize("ｃｈｅｃｋＩｎ") == "checkin"


def test_signs_read_as_letters_only_inside_a_word_with_a_latin_letter() -> None:
    assert normalize("2 × 3 = 6, 5¢ or US¥ 500, A ∪ B") == normalize("2 3 = 6, 5 or US 500, A B")


PLAIN = "Win a brand new phone today! Just follow our account and retweet this post to enter the giveaway"


@pytest.mark.parametrize(
    "copies",
    [
        # digits for the letters they look like: 0 for o (which UTS #39 lists), 1, 3, 4, 5, 7
        [
            PLAIN.replace("o", "0"),
            PLAIN.replace("e", "3").replace("a", "4"),
            PLAIN.replace("i", "1").replace("s", "5").replace("t", "7"),
        ],
        # symbols for the letters they stand for
        [
            PLAIN.replace("i", "!"),
            PLAIN.replace("e", "€").replace("s", "$"),
            PLAIN.replace("l", "|").replace("a", "@").replace("i", "!"),
        ],
    ],
    ids=["leetspeak", "symbols"],
)
def test_a_campaign_in_leetspeak_is_a_duplicate_of_its_text(copies: list[str]) -> None:
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": PLAIN}).is_novel
        for at, copy in enumerate(copies):
            verdict = sf.check({"id": f"copy{at}", "text": f"@user{at} {copy} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of) == ("duplicate", "plain"), copy


def test_a_campaign_with_capital_is_or_ones_for_its_ls_is_a_duplicate_of_its_text() -> None:
    # "PayPaI": case folding makes the capital I an i, and a 1 reads as i or l
    plain = "Please follow all the links below and claim a small gift while it is still available online"
    copies = [plain.replace("l", "I"), plain.replace("l", "1"), plain.replace("I", "l").replace("i", "l").upper()]
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": plain}).is_novel
        for at, copy in enumerate(copies):
            verdict = sf.check({"id": f"copy{at}", "text": f"@user{at} {copy} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "plain", 1.0), copy


def test_a_campaign_with_rn_for_each_m_is_a_duplicate_of_its_text() -> None:
    # "arnazon": Unicode's confusables data gives rn as the look of an m
    plain = "Claim your Amazon premium membership team reward from my member program, limited time offer"
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": plain}).is_novel
        for at, copy in enumerate([plain.replace("m", "rn"), plain.upper().replace("M", "RN")]):
            verdict = sf.check({"id": f"copy{at}", "text": f"@user{at} {copy} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "plain", 1.0), copy
        # and "rn" is a look-alike of "m" to the filter alone: normalize still prints both
        assert "burn" in normalize("we burn the bum") and "bum" in normalize("we burn the bum")


def test_a_campaign_that_draws_out_its_letters_is_a_duplicate_of_its_text() -> None:
    # "freeeee", "sooo": a letter drawn out, a new one and a new length in each copy
    rng = random.Random(3)

    def drawn_out(word: str) -> str:
        at = rng.randrange(len(word))
        return word[: at + 1] + word[at] * rng.randint(2, 6) + word[at + 1 :]

    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": PLAIN}).is_novel
        for at in range(5):
            copy = " ".join(drawn_out(word) for word in PLAIN.split())
            verdict = sf.check({"id": f"copy{at}", "text": f"@user{at} {copy} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "plain", 1.0), copy
        # a number keeps its digits: gate 110 is not gate 1100
        assert sf.check({"id": "gate 1100", "text": "Gate 1100 closed"}).is_novel
        assert sf.check({"id": "gate 110", "text": "Gate 110 closed"}).is_novel
        assert sf.check({"id": "again", "text": "Gaaate 1100 closssed!"}).duplicate_of == "gate 1100"


@pytest.mark.parametrize("emoji", ["🔥", "❤️", "💰"])
def test_a_campaign_that_joins_its_letters_by_an_emoji_is_a_duplicate_of_its_text(emoji: str) -> None:
    # "f🔥r🔥e🔥e m🔥o🔥n🔥e🔥y": taken out, the emoji would leave one-letter words run together
    copy = " ".join(emoji.join(word) if word.isalpha() else word for word in PLAIN.split())
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": PLAIN}).is_novel
        verdict = sf.check({"id": "copy", "text": f"@user {copy} https://t.co/x"})
        assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "plain", 1.0), copy
    # an emoji between words, or inside a word of more letters, is taken out as any other
    assert normalize("I❤️NY so 👏 much") == "i ny so much"


def test_a_campaign_written_upside_down_is_a_duplicate_of_its_text() -> None:
    # as a "flip text" generator writes it: each letter turned, the whole written backwards
    turned = dict(zip("abcdefghijklmnopqrstuvwxyz", "ɐqɔpǝɟƃɥᴉɾʞlɯuodbɹsʇnʌʍxʎz", strict=True))
    copy = "".join(turned.get(char, char) for char in PLAIN.lower())[::-1]
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": PLAIN}).is_novel
        verdict = sf.check({"id": "copy", "text": f"@user {copy} https://t.co/x"})
        assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "plain", 1.0), copy
    # a text that uses some of those letters of its own is read as written
    for text in (
        "¿Qué pasa? ¡Hola amigo!",
        "Ɔdɔ yɛ wo ahoɔden",
        "/ðə kwɪk bɹaʊn fɑks/",
        "Işık ılık süt",
        "ɹɐʇ is a word",
    ):
        assert read_turned(text) == text, text


def test_a_post_copied_into_traditional_chinese_is_a_duplicate_of_its_simplified_text() -> None:
    # a converter maps character for character: 关注并转发 is 關注並轉發
    simplified = "关注并转发这条微博就有机会获得最新款手机一部活动截止到本周日"
    traditional = "關注並轉發這條微博就有機會獲得最新款手機一部活動截止到本週日"
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "simplified", "text": simplified}).is_novel
        verdict = sf.check({"id": "copy", "text": f"@user {traditional} https://t.co/x"})
        assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "simplified", 1.0)
    # a compatibility ideograph reads as its unified one does: 豈 (U+F900) as 豈 (U+8C48), that is 岂
    assert normalize("\uf900") == normalize("\u8c48") == normalize("岂") == "岂"


def test_a_campaign_with_a_mark_inside_each_word_is_a_duplicate_of_its_text() -> None:
    # "cl.aim yo,ur": each word broken in two, a new place and mark for each copy
    rng = random.Random(7)
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": PLAIN}).is_novel
        for at in range(5):

            def broken(word: str) -> str:
                if len(word) < 2 or not word.isalpha():
                    return word
                cut = rng.randrange(1, len(word))
                return word[:cut] + rng.choice(".,-;/·") + word[cut:]

            copy = " ".join(broken(word) for word in PLAIN.split())
            verdict = sf.check({"id": f"copy{at}", "text": f"@user{at} {copy} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "plain", 1.0), copy


def test_a_campaign_spelled_in_regional_indicators_is_a_duplicate_of_its_text() -> None:
    # 🇦 to 🇿 set apart show as boxed capitals (a pair that names a region would show as its flag)
    plain = "Win a brand new phone today, just follow our account and retweet this post"

    def boxed(text: str, between: str) -> str:
        return "".join(chr(0x1F1E6 + ord(char) - ord("a")) + between if char.isalpha() else char for char in text)

    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "plain", "text": plain}).is_novel
        for at, between in enumerate(["\u200b", " ", "\u2060"]):
            copy = boxed(plain.lower(), between)
            verdict = sf.check({"id": f"boxed{at}", "text": f"@user{at} {copy} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of) == ("duplicate", "plain"), copy


def test_a_campaign_whose_copies_carry_tags_of_their_own_is_a_duplicate_of_its_first() -> None:
    # eight hashtags drawn for each post outnumber a short text's words and pairs
    text = "Join our giveaway today and win a new phone"
    trending = [f"#{tag}" for tag in "win giveaway iphone free contest follow gift prize deal sale".split()]
    trending += [f"#{tag}" for tag in "promo viral love music news sports travel food art tech".split()]
    with StreamFilter(FilterConfig(seed=1)) as sf:
        assert sf.check({"id": "first", "text": f"{text} {' '.join(trending[:8])}"}).is_novel
        for at in range(1, 7):
            tags = " ".join(trending[at * 2 + 6 : at * 2 + 14] if at < 4 else trending[at - 4 :: 3][:8])
            verdict = sf.check({"id": f"tagged{at}", "text": f"@fan{at} {text} {tags} https://t.co/x{at}"})
            assert (verdict.kind.value, verdict.duplicate_of) == ("duplicate", "first"), tags


def test_a_campaign_hidden_among_chaff_words_is_a_duplicate_of_its_text() -> None:
    # words drawn anew for each copy, as many as the text's own or twice as
    # many: too many for the Jaccard (0.34 and under), not for the text
    # standing whole among them. Only the bands find a copy whose chaff comes
    # first, so the odds depend on the seed: 20 seeds, as benchmarks/chaff.py
    # measures on real tweets (about 0.95 with as many words, 0.7 with twice)
    words = ORIGINAL.split()
    copies: dict[str, Callable[[list[str]], list[str]]] = {
        "after": lambda chaff: [*words, *chaff],
        "before": lambda chaff: [*chaff, *words],
        "around": lambda chaff: [*chaff[:10], *words, *chaff[10:]],
    }
    caught = {amount: 0 for amount in (len(words), 2 * len(words))}
    for seed in range(1, 21):
        rng = random.Random(seed)
        vocabulary = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6)) for _ in range(500)]
        with StreamFilter(FilterConfig(seed=seed)) as sf:
            assert sf.check(_record("orig", ORIGINAL, 0)).is_novel
            for at, made in enumerate(copies.values(), 1):
                for amount in caught:
                    text = " ".join(made(rng.sample(vocabulary, amount)))
                    verdict = sf.check(_record(f"{at}-{amount}", f"@fan{at} {text} https://t.co/x{at}", at))
                    caught[amount] += (verdict.kind.value, verdict.duplicate_of) == ("duplicate", "orig")
            cut = sf.check(_record("cut", " ".join(words[:8]), 10))  # 8 of its 20 words, and no "…"
        assert (cut.kind.value, cut.duplicate_of, cut.similarity) == ("duplicate", "orig", 1.0)
    assert caught[len(words)] >= 57 and caught[2 * len(words)] >= 45, caught  # of 60 each


def test_a_short_phrase_inside_a_longer_post_does_not_make_it_a_copy() -> None:
    # 7 words inside 18 are too few to call the longer post a copy; 8 inside 20 are not
    with StreamFilter(FilterConfig(seed=SEED)) as sf:
        sf.check(_record("phrase", "we waited four hours at the gate", 0))
        longer = "we waited four hours at the gate and then the crew finally told us the flight was cancelled"
        assert sf.check(_record("longer", longer, 1)).is_novel
        sf.check(_record("eight", "our bags were left behind in denver again today", 2))
        eight = "our bags were left behind in denver again today so we bought new clothes at the airport shop"
        verdict = sf.check(_record("holds eight", eight, 3))
    assert (verdict.kind.value, verdict.duplicate_of) == ("duplicate", "eight")


def test_greek_words_that_differ_by_eta_and_nu_stay_apart() -> None:
    sentence = "καλή {} σε όλους"
    assert normalize(sentence.format("ημερα")) != normalize(sentence.format("νμερα"))
    assert normalize(sentence.format("ΗΜΕΡΑ")) == normalize(sentence.format("ημερα"))


def test_a_copy_cut_short_at_a_platform_s_limit_finds_its_original_by_its_start() -> None:
    # a retweet cut to 28 characters keeps 5 of the original's 24 words: it
    # shares no band key with it, and only the keys of its first words find it
    original = (
        "we waited four hours at the gate in denver and nobody from the crew told us why the flight "
        "was late or when it would leave"
    )
    copy = "RT @traveller: " + original[:28].rstrip() + "…"

    def shares_a_band(seed: int) -> bool:
        sketcher = Sketcher(FilterConfig(seed=seed), record_adapter("auto"))
        bands = [set(_band_keys(sketcher, normalize(text).split())) for text in (original, copy)]
        return bool(bands[0] & bands[1])

    seed = next(seed for seed in range(1, 100) if not shares_a_band(seed))  # most seeds
    with StreamFilter(FilterConfig(seed=seed)) as sf:
        sf.check(_record("orig", original, 0))
        verdict = sf.check(_record("cut", copy, 30))
        short = sf.check(_record("short", "We waited four hours at the gate…", 31))  # 7 words
        other = sf.check(_record("other", "we waited four days at the…", 32))  # 5 words, not its start
    assert (verdict.kind.value, verdict.duplicate_of, verdict.similarity) == ("duplicate", "orig", 1.0)
    assert (short.kind.value, short.duplicate_of) == ("duplicate", "orig")
    assert other.kind.value == "novel"


def test_a_storm_of_one_text_is_normalised_once_and_a_flood_of_long_ones_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamfilter import _engine
    from streamfilter._normalize import words_and_cut

    normalised: list[str] = []

    def counting(text: str) -> tuple[list[str], bool]:
        normalised.append(text)
        return words_and_cut(text)

    monkeypatch.setattr(_engine, "words_and_cut", counting)
    sketcher = Sketcher(FilterConfig(seed=SEED), record_adapter("auto"))
    storm = "RT this giveaway ends tonight, follow and retweet to win a new phone"
    retweets = [(n, {"id": str(n), "text": storm}) for n in range(500)]
    batch = sketcher.prepare(retweets)
    assert normalised == [storm] and len(batch.sketches) == 500
    words, ends = batch.sketches.words, batch.sketches.word_ends
    assert len(words[ends[0] : ends[1]]) == 13 and words[ends[0] : ends[1]].tolist() == words[ends[499] :].tolist()

    # texts past a post's length, as a flood of them, are normalised each time and not kept
    long_texts = [(n, {"id": f"long{n}", "text": f"word{n} " * 600}) for n in range(3)]
    sketcher.prepare(long_texts + long_texts)
    assert len(normalised) == 1 + 6
    assert all(len(text) <= 2000 for text in sketcher._recent_words)

    # and the words kept are at most the last RECENT_TEXTS texts'
    sketcher.prepare([(n, {"id": f"t{n}", "text": f"text number {n}"}) for n in range(_engine.RECENT_TEXTS + 10)])
    assert len(sketcher._recent_words) == _engine.RECENT_TEXTS
