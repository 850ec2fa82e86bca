"""The report as one self-contained HTML page: figures, charts as inline SVG, campaigns.

Charts are Vega-Lite specifications rendered to static SVG by
``vl-convert-python`` (the ``report`` extra), which runs offline: the page
loads nothing, and its Content-Security-Policy forbids any request and every
script but its own one (``page.js``, allowed by its hash: search, sort, CSV).
"""

from __future__ import annotations

import difflib
import html
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from .._exceptions import MissingDependencyError
from ._clusters import Clusters, _Cluster
from ._drilldown import SCRIPT, SCRIPT_HASH, accounts_view, campaign_details
from ._signals import Coordination

__all__ = ["render"]

_MAX_BINS = 120
# Nothing may be requested; styles are inline, images data: URLs, and the one script is allowed by its hash.
_CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src '{SCRIPT_HASH}'"
_COLOURS = {
    "novel": "#4c78a8",
    "duplicate": "#f58518",
    "retweet": "#54a24b",
    "invalid": "#e45756",
    "skipped": "#bab0ac",
}


def _vl_convert() -> Any:
    try:
        import vl_convert
    except ImportError as exc:
        raise MissingDependencyError("the HTML report (vl-convert-python)", "report") from exc
    return vl_convert


def _bins(minutes: list[int]) -> tuple[int, int]:
    """(first minute, minutes a bin) so that the span fits ``_MAX_BINS`` bins of round sizes."""
    first, last = min(minutes), max(minutes)
    for width in (1, 5, 10, 15, 30, 60, 120, 360, 720, 1440, 10080):
        if (last - first) // width < _MAX_BINS:
            return first - first % width, width
    return first, max(1, (last - first) // _MAX_BINS + 1)


def _binned(counts: Counter[int], start: int, width: int) -> Counter[int]:
    binned: Counter[int] = Counter()
    for minute, count in counts.items():
        binned[start + (minute - start) // width * width] += count
    return binned


def _iso(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time_axis(width: int) -> dict[str, Any]:
    """The x encoding of both charts: time in UTC, in bins of ``width`` minutes."""
    return {
        "field": "time",
        "type": "temporal",
        "scale": {"type": "utc"},
        "axis": {"format": "%b %d %H:%M", "labelAngle": -30},
        "title": f"time, UTC (bins of {width} min)",
    }


def _svg(spec: dict[str, Any]) -> str:
    svg = _vl_convert().vegalite_to_svg(spec)
    return str(svg)


def _over_time(report: Clusters) -> str:
    minutes = [minute for counts in report.timeline.values() for minute in counts]
    if not minutes:
        return "<p>No post carried a time.</p>"
    start, width = _bins(minutes)
    values = [
        {"time": _iso(minute), "verdict": verdict, "posts": count}
        for verdict, counts in sorted(report.timeline.items())
        for minute, count in sorted(_binned(counts, start, width).items())
    ]
    kinds = sorted(report.timeline)
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "width": 760,
        "height": 220,
        "data": {"values": values},
        "mark": {"type": "bar"},
        "encoding": {
            "x": _time_axis(width),
            # posts are whole: ticks a whole post apart at least, labelled without decimals
            "y": {
                "field": "posts",
                "type": "quantitative",
                "stack": "zero",
                "title": "posts",
                "axis": {"tickMinStep": 1, "format": "d"},
            },
            "color": {
                "field": "verdict",
                "type": "nominal",
                "scale": {"domain": kinds, "range": [_COLOURS.get(kind, "#888") for kind in kinds]},
            },
        },
    }
    return _svg(spec)


# Bin widths in seconds, of round sizes: a campaign's bins are the smallest that
# fit its own span into _MAX_BINS (a burst of 14 s in seconds, a day in minutes).
_SECOND_BINS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 604800)


def _second_bins(first: int, last: int) -> tuple[int, int]:
    """(the first bin's start, seconds a bin) for a span from ``first`` to ``last``."""
    for width in _SECOND_BINS:
        if (last - first) // width < _MAX_BINS:
            return first - first % width, width
    width = (last - first) // _MAX_BINS + 1
    return first, width


def _width_text(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def campaign_timeline_spec(report: Clusters, top: int) -> dict[str, Any] | None:
    """The Vega-Lite spec of the top campaigns' timelines, one row each: posts
    per bin, every bin of the campaign's own span drawn (empty ones as 0),
    bins sized to that span, and the campaign's text as its label."""
    clusters = [cluster for cluster in report.campaigns()[:top] if cluster.seconds]
    if not clusters:
        return None
    values = []
    for rank, cluster in enumerate(clusters, 1):
        counts = cluster.timeline
        start, width = _second_bins(min(counts), max(counts))
        binned: Counter[int] = Counter()
        for second, count in counts.items():
            binned[start + (second - start) // width * width] += count
        text = " ".join(cluster.text.split())
        shown = text if len(text) <= 60 else text[:60] + "…"
        peak = max(binned.values())
        label = f"#{rank}: {cluster.size:,} posts, at most {peak:,} a bin of {_width_text(width)}: {shown}"
        for at in range(start, max(binned) + width, width):
            values.append({"campaign": label, "rank": rank, "time": _iso_second(at), "posts": binned.get(at, 0)})
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": values},
        "facet": {
            "row": {
                "field": "campaign",
                "type": "nominal",
                "sort": {"field": "rank"},
                "title": None,
                "header": {"labelAngle": 0, "labelAlign": "left", "labelAnchor": "start", "labelOrient": "top"},
            }
        },
        "spec": {
            "width": 700,
            "height": 50,
            "mark": {"type": "bar", "color": _COLOURS["duplicate"]},
            "encoding": {
                "x": {
                    "field": "time",
                    "type": "temporal",
                    "scale": {"type": "utc"},
                    "axis": {"format": "%b %d %H:%M:%S", "labelAngle": -30, "title": None},
                },
                "y": {
                    "field": "posts",
                    "type": "quantitative",
                    "title": None,
                    # posts are whole, and this Vega's small axes tick at 0.5: the row label gives the peak
                    "axis": None,
                },
            },
        },
        # each campaign on its own span of time and its own count
        "resolve": {"scale": {"x": "independent", "y": "independent"}, "axis": {"x": "independent"}},
    }


def _campaign_timelines(report: Clusters, top: int) -> str:
    spec = campaign_timeline_spec(report, top)
    return "<p>No campaign carried times.</p>" if spec is None else _svg(spec)


def _iso_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _diff(original: str, variant: str) -> str:
    """``variant`` as HTML, its words that ``original`` lacks marked, the words it dropped struck."""
    before, after = original.split(), variant.split()
    parts: list[str] = []
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(html.escape(" ".join(after[b0:b1])))
            continue
        if a1 > a0:
            parts.append(f"<del>{html.escape(' '.join(before[a0:a1]))}</del>")
        if b1 > b0:
            parts.append(f"<ins>{html.escape(' '.join(after[b0:b1]))}</ins>")
    return " ".join(parts)


def _signal_cell(cluster: _Cluster, rule: Coordination) -> str:
    """A campaign's coordination signals, as a short list."""
    signals = cluster.signals.to_json(cluster.size, cluster.seconds, rule)
    lines = [f"{signals['burst']['posts']:,} posts within {_width_text(int(rule.window_seconds))}"]
    if signals["posts_per_account"] is not None:
        per = signals["posts_per_account"]
        lines.append(f"{per:g} {'post' if per == 1 else 'posts'} an account")
    lines += [
        f"{name}: {', '.join(f'{html.escape(key)} ({count:,})' for key, count in signals[field].items())}"
        for name, field in (("platforms", "platforms"), ("links", "link_domains"), ("hashtags", "hashtags"))
        if signals[field]
    ]
    return "<br>".join(lines)


def _more(count: int) -> str:
    return f" and {count:,} more" if count > 0 else ""


def _campaign_refs(campaigns: list[str], rank_of: dict[str, int]) -> str:
    """Campaigns by their rank on this page; clusters that are no campaign by their count."""
    ranked = [f"#{rank_of[cluster_id]}" for cluster_id in campaigns if cluster_id in rank_of]
    others = len(campaigns) - len(ranked)
    return ", ".join(ranked[:10]) + (f"{', ' if ranked else ''}{others:,} other clusters" if others else "")


def _when(timestamp: float | None) -> str:
    return "" if timestamp is None else datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M")


def render(report: Clusters, top: int, title: str) -> str:
    """The whole page."""
    clusters = report.clusters()
    clusters_total = len(clusters)
    clusters = report.campaigns()
    rule = report.coordination
    figures = [
        ("posts", report.posts),
        *sorted(report.verdicts.items()),
        ("clusters (2+ posts)", clusters_total),
        ("campaigns (coordinated)", len(clusters)),
    ]
    if clusters:
        figures.append(("largest campaign", clusters[0].size))
    cards = "".join(
        f'<div class="card"><b>{value:,}</b><span>{html.escape(name)}</span></div>' for name, value in figures
    )
    rows = []
    for rank, cluster in enumerate(clusters[:top], 1):
        variants = "".join(f"<li>{_diff(cluster.text, text)}</li>" for text in (cluster.variants or ())[:3])
        authors = f"{cluster.authors:,}{'+' if cluster.signals.accounts_capped else ''}"
        searched = " ".join([cluster.text, *(cluster.variants or ()), *(a or "" for _, _, a, _ in cluster.members)])
        rows.append(
            f'<tr class="campaign" data-rank="{rank}" data-posts="{cluster.size}" data-accounts="{cluster.authors}"'
            f' data-first="{cluster.first_seen or 0}" data-search="{html.escape(searched.lower())}">'
            f'<td class="num">{rank}</td><td class="num">{cluster.size:,}</td><td class="num">{authors}</td>'
            f"<td>{_when(cluster.first_seen)}<br>{_when(cluster.last_seen)}</td>"
            f"<td>{_signal_cell(cluster, rule)}</td>"
            f'<td><p class="text">{html.escape(cluster.text)}</p><ul class="variants">{variants}</ul>'
            f"{campaign_details(cluster)}</td></tr>"
        )
    rank_of = {cluster.id: rank for rank, cluster in enumerate(clusters, 1)}
    groups = report.graph().groups([cluster.id for cluster in clusters])
    group_rows = "".join(
        f'<tr><td class="num">{index}</td><td class="num">{len(group.accounts):,}</td>'
        f'<td class="num">{group.co_posts:,}</td>'
        f"<td>{html.escape(', '.join(group.accounts[:8]))}{_more(len(group.accounts) - 8)}</td>"
        f"<td>{_campaign_refs(group.campaigns, rank_of)}</td></tr>"
        for index, group in enumerate(groups[:top], 1)
    )
    group_table = (
        f"<p>Showing {min(top, len(groups)):,} of {len(groups):,} groups: accounts linked when they posted "
        f"near-duplicates within {_width_text(int(rule.co_post_seconds))} of each other, as the co-tweet networks "
        "of CooRTweet and the coordination-network-toolkit link them.</p>"
        "<table><tr><th>#</th><th>accounts</th><th>co-posts</th><th>who</th><th>campaigns</th></tr>"
        f"{group_rows}</table>"
        if groups
        else "<p>No two accounts posted near-duplicates of each other within "
        f"{_width_text(int(rule.co_post_seconds))}.</p>"
    )
    reasons = "".join(
        f'<tr><td>{html.escape(reason)}</td><td class="num">{count:,}</td></tr>'
        for reason, count in report.invalid_reasons.most_common()
    )
    shown = (
        f"<p>Showing {len(rows):,} of {len(clusters):,} campaigns: clusters of near-duplicates posted by at least "
        f"{rule.min_accounts} accounts, with at least {rule.min_burst} posts within "
        f"{_width_text(int(rule.window_seconds))} ({clusters_total:,} clusters in all).</p>"
    )
    tools = (
        '<p class="tools"><label>Search <input id="search" type="search" placeholder="text, variant or account">'
        '</label> <label>Sort by <select id="sort"><option value="posts">posts</option>'
        '<option value="accounts">accounts</option><option value="first">first seen</option></select></label> '
        f'<button id="export" type="button">Export members as CSV</button> showing <b id="shown">{len(rows):,}</b> of '
        f"{len(rows):,} campaigns listed here</p>"
    )
    campaigns = (
        shown + tools + '<table id="campaign-table"><thead><tr><th>#</th><th>posts</th><th>accounts</th>'
        "<th>first / last seen (UTC)</th><th>signals</th><th>text, and variants (<ins>added</ins>, "
        "<del>dropped</del>); open for members and every variant</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else f"<p>No campaign: no cluster of near-duplicates was posted by {rule.min_accounts} accounts or more "
        f"with {rule.min_burst} posts within {_width_text(int(rule.window_seconds))} ({clusters_total:,} clusters "
        "in all).</p>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
body {{ font: 14px/1.4 system-ui, "Noto Sans", "Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans Thai",
  "Noto Sans Arabic", "Noto Sans Devanagari", "Noto Color Emoji", sans-serif; margin: 24px; color: #222;
  max-width: 1100px; }}
details summary {{ cursor: pointer; color: #2a5db0; }} mark {{ background: #fff3b0; font-size: 12px; }}
.members td {{ padding: 2px 6px; }} .tools input {{ width: 260px; }}
h1 {{ font-size: 22px; }} h2 {{ font-size: 17px; margin-top: 28px; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 10px; }}
.card {{ border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 110px; }}
.card b {{ display: block; font-size: 20px; }} .card span {{ color: #666; }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ border-top: 1px solid #eee; padding: 6px; vertical-align: top; text-align: left; }}
.num {{ text-align: right; white-space: nowrap; }} .text {{ margin: 0 0 4px; font-weight: 600; }}
.variants {{ margin: 0; padding-left: 18px; color: #444; }}
ins {{ background: #d4f7d4; text-decoration: none; }} del {{ background: #ffd8d8; }}
figure.chart {{ margin: 0; }} figure.chart svg {{ max-width: 100%; height: auto; }}
body, td {{ overflow-wrap: anywhere; }}
@media (max-width: 600px) {{
  body {{ margin: 8px; }} td, th {{ padding: 4px 3px; }} .tools input {{ width: 100%; }}
  .card {{ min-width: 0; padding: 6px 8px; }} .members {{ display: block; overflow-x: auto; }}
}}
</style></head><body>
<h1>{html.escape(title)}</h1>
<div class="cards">{cards}</div>
<h2>Posts over time, by verdict</h2>
<figure class="chart" id="over-time">{_over_time(report)}</figure>
<h2>The top {min(top, len(clusters))} campaigns over time</h2>
<figure class="chart" id="campaigns">{_campaign_timelines(report, top)}</figure>
<h2>The top campaigns</h2>
{campaigns}
<h2>Groups of accounts that coordinate</h2>
{group_table}
<h2>Accounts in the most campaigns</h2>
{accounts_view(clusters[:top], top)}
<h2>Invalid lines, by reason</h2>
{f"<table><tr><th>reason</th><th>lines</th></tr>{reasons}</table>" if reasons else "<p>None.</p>"}
<script>{SCRIPT}</script>
</body></html>
"""
