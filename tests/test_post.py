"""Posts and verdicts as a user holds them, and the ``--verdicts`` line (the JSON of ``to_json``)."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamfilter import Post, Verdict, VerdictKind

ids = st.none() | st.text() | st.sampled_from(['100"2', "a\\b", "\u2028", "\x85", "\x00", "id\n", "ñ😀"])
verdicts = st.builds(
    Verdict,
    kind=st.sampled_from(list(VerdictKind)),
    line=st.integers(min_value=1, max_value=10**12),
    post=st.none() | st.builds(Post, id=ids, text=st.text(max_size=20)),
    duplicate_of=st.none() | st.text(),
    similarity=st.none() | st.floats(min_value=0.0, max_value=1.0),
    reason=st.none() | st.text(),
)


@given(verdicts)
def test_json_line_is_the_json_of_to_json(verdict: Verdict) -> None:
    line = verdict.json_line()
    assert len(line.splitlines()) == 1  # one line to every reader: NEL, U+2028 and U+2029 escaped too
    written = json.dumps(verdict.to_json(), ensure_ascii=False)
    assert line == written.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    assert json.loads(line) == verdict.to_json()


@pytest.mark.parametrize("cls", [Post, Verdict])
def test_the_written_constructor_takes_every_field_with_its_declared_default(cls: type) -> None:
    parameters = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in parameters] == [f.name for f in dataclasses.fields(cls)]
    for parameter, declared in zip(parameters, dataclasses.fields(cls), strict=True):
        expected = inspect.Parameter.empty if declared.default is dataclasses.MISSING else declared.default
        assert parameter.default == expected


def test_posts_stay_frozen_hashable_and_equal_whatever_their_raw_record() -> None:
    post = Post("1", "same text", 5.0, raw={"a": 1})
    twin = Post(id="1", text="same text", timestamp=5.0, raw=b"another line")
    assert post == twin and hash(post) == hash(twin)
    assert post.raw == {"a": 1} and post.platform == "text" and not post.is_retweet
    with pytest.raises(dataclasses.FrozenInstanceError):
        post.text = "changed"  # type: ignore[misc]
    verdict = Verdict(VerdictKind.DUPLICATE, 3, post, duplicate_of="0", similarity=0.75)
    assert (verdict.kind, verdict.line, verdict.post, verdict.reason, verdict.raw) == (
        VerdictKind.DUPLICATE,
        3,
        post,
        None,
        None,
    )
    assert dataclasses.replace(verdict, line=4).line == 4
