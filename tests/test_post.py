"""What a Verdict says about itself: the ``--verdicts`` line is the JSON of ``to_json``."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from streamfilter import Post, Verdict, VerdictKind

ids = st.none() | st.text() | st.sampled_from(['100"2', "a\\b", "\u2028", "\x00", "id\n", "ñ😀"])
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
    assert "\n" not in line
    assert line == json.dumps(verdict.to_json(), ensure_ascii=False)
    assert json.loads(line) == verdict.to_json()
