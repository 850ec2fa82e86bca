"""Response pages cut to the posts kept (``adapters/_pages.py``), as --out writes them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamfilter.adapters._pages import _cut_page


def reference_cut(page: dict[str, Any], keep: set[str | None]) -> dict[str, Any]:
    """A page cut by decoding it: what --out's page must mean."""
    cut = dict(page)
    for key in ("data", "statuses"):
        if isinstance(cut.get(key), list):
            cut[key] = [i for i in cut[key] if isinstance(i, dict) and str(i.get("id_str", i.get("id"))) in keep]
    return cut


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["data", "statuses"]),
    st.lists(st.one_of(st.integers(0, 30), st.just("x")), max_size=12),
    st.sets(st.integers(0, 30).map(str)),
    st.sampled_from(["", " ", "\n  "]),
    st.booleans(),
    st.booleans(),
)
def test_a_page_is_cut_in_place_to_the_posts_kept(
    key: str, ids: list[int | str], keep: set[str | None], blank: str, ascii_only: bool, includes_first: bool
) -> None:
    items = [i if i == "x" else {"id": i, "text": f"post {i} é \u263a", "n": [1, {"a": "]"}]} for i in ids]
    page: dict[str, Any] = {key: items, "includes": {"users": [{"id": "1", "name": '"data"?'}]}, "meta": {"n": 1}}
    if includes_first:
        page = {"includes": page["includes"], key: items, "meta": page["meta"]}
    separators = ("," + blank, ":" + blank)
    text = blank + json.dumps(page, ensure_ascii=ascii_only, separators=separators)
    cut = _cut_page(text, keep)
    if cut is None:  # not a page the scan reads: decoded whole instead
        assert includes_first or not items or text.count(f'"{key}"') != 1
        return
    assert json.loads(cut) == reference_cut(page, keep)
    # every character outside the array as it was, and the kept items' own text
    array_start = text.index("[", text.index(f'"{key}"')) + 1
    array_end = text.index(separators[0] + '"includes"') - 1
    kept = [item for item in items if isinstance(item, dict) and str(item["id"]) in keep]
    inside = ",".join(json.dumps(item, ensure_ascii=ascii_only, separators=separators) for item in kept)
    assert cut == text[:array_start] + inside + text[array_end:]


def test_a_page_the_scan_cannot_read_alone_is_left_to_decoding() -> None:
    keep: set[str | None] = {"1"}
    # a second "data" key (json keeps the last), the posts not first, a "data" key further in
    for text in (
        '{"data": [{"id": 1}, {"id": 2}], "data": [{"id": 3}]}',
        '{"meta": {}, "data": [{"id": 1}, {"id": 2}]}',
        '{"data": [{"id": 1}, {"id": 2}], "includes": {"x": {"data": []}}}',
        '{"data": [{"id": 1} {"id": 2}]}',
    ):
        assert _cut_page(text, keep) is None
    assert _cut_page('{"data": [{"id": 1}, {"id": 2}], "meta": {}}', keep) == '{"data": [{"id": 1}], "meta": {}}'


def test_a_page_with_a_lone_surrogate_is_cut_by_decoding_and_stays_json() -> None:
    """The fallback (a page the in-place cut declines: here it holds "data" twice)
    once crashed on a lone surrogate, which JSON carries and UTF-8 cannot."""
    from streamfilter.adapters import page_of_posts

    page = b'{"data":[{"id":"1","text":"keep \\udfff me"},{"id":"2","text":"drop me"}],"includes":{"data":[]}}'
    cut = page_of_posts(page, {"1"})
    assert cut is not None
    assert json.loads(cut)["data"] == [{"id": "1", "text": "keep \udfff me"}]
