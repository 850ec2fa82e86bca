"""streamfilter report: cluster figures against verdicts counted here, and the page in a real browser."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from .conftest import FIXTURES, replay_command


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _report(stream: Path, tmp_path: Path, *extra: str) -> tuple[dict[str, Any], Path, list[dict[str, Any]]]:
    verdicts = tmp_path / "verdicts.jsonl"
    subprocess.run(replay_command(str(stream), "--verdicts", str(verdicts)), check=True, capture_output=True)
    report_json, page = tmp_path / "report.json", tmp_path / "report.html"
    command = [sys.executable, "-m", "streamfilter", "report", str(stream), "--verdicts", str(verdicts)]
    subprocess.run([*command, "--json", str(report_json), "--html", str(page), *extra], check=True, timeout=120)
    lines = [json.loads(line) for line in verdicts.read_text().splitlines()]
    return json.loads(report_json.read_text()), page, lines


def _stream(tmp_path: Path) -> Path:
    """The campaign fixture, an invalid line, and a second campaign from many accounts."""
    lines = (FIXTURES / "campaign.jsonl").read_text().splitlines()
    lines.append('{"broken": ')
    for index in range(40):
        lines.append(
            json.dumps(
                {
                    "id_str": str(300 + index),
                    "text": f"@fan{index} Win a trip to Lisbon with #FlyAway, retweet to enter! https://t.co/x{index}",
                    "created_at": f"Fri May 04 18:{index:02d}:00 +0000 2012",
                    "user": {"screen_name": f"account{index % 25}"},
                }
            )
        )
    stream = tmp_path / "stream.jsonl"
    stream.write_text("\n".join(lines) + "\n")
    return stream


def test_cluster_figures_equal_the_verdicts_counted_independently(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    # every cluster a campaign, to compare them all
    report, _, verdicts = _report(stream, tmp_path, "--min-accounts", "1", "--min-burst", "1")
    records = {}
    for line in stream.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        records[record["id_str"]] = record
    members: dict[str, list[str]] = defaultdict(list)
    for verdict in verdicts:
        if verdict["verdict"] == "duplicate":
            members[verdict["duplicate_of"]].append(verdict["id"])
    expected = []
    for original, copies in members.items():
        ids = [original, *copies]
        times = [datetime.strptime(records[i]["created_at"], "%a %b %d %H:%M:%S %z %Y").timestamp() for i in ids]
        authors = {records[i]["user"]["screen_name"] for i in ids}
        expected.append((len(ids), original, _iso(min(times)), _iso(max(times)), len(authors)))
    expected.sort(key=lambda row: (-row[0], row[2] or ""))
    got = [(c["size"], c["id"], c["first_seen"], c["last_seen"], c["accounts"]) for c in report["clusters"]]
    assert got == expected
    assert report["clusters"][0]["size"] == 40 and report["clusters"][0]["accounts"] == 25
    assert report["posts"] == len(verdicts)
    assert report["verdicts"] == {"duplicate": 51, "invalid": 1, "novel": 13}
    assert report["invalid_reasons"] == {"broken JSON": 1}
    variants = [records[example]["text"] for example in report["clusters"][0]["examples"]]
    assert variants and all(text != report["clusters"][0]["text"] for text in variants)
    largest = report["clusters"][0]
    assert largest["hashtags"] == {"flyaway": 40} and largest["link_domains"] == {"t.co": 40}
    assert largest["platforms"] == {"twitter": 40} and largest["posts_per_account"] == 1.6

    # the default rule: 3 accounts or more, and 3 posts or more within an hour
    def bursts(ids: list[str]) -> int:
        times = sorted(datetime.strptime(records[i]["created_at"], "%a %b %d %H:%M:%S %z %Y").timestamp() for i in ids)
        return max(sum(1 for t in times if start <= t <= start + 3600) for start in times)

    coordinated = [
        original
        for original, copies in members.items()
        if len({records[i]["user"]["screen_name"] for i in [original, *copies]}) >= 3
        and bursts([original, *copies]) >= 3
    ]
    by_default, _, _ = _report(stream, tmp_path)
    assert sorted(c["id"] for c in by_default["clusters"]) == sorted(coordinated)
    assert by_default["clusters_total"] == len(members) and by_default["campaigns_total"] == len(coordinated)
    assert all(c["coordinated"] for c in by_default["clusters"])


def test_report_without_an_output_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streamfilter", "report", str(FIXTURES / "campaign.jsonl"), "--verdicts", "x"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "needs --html FILE, --json FILE, --graph FILE or --members FILE" in done.stderr


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (.ci/run installs it: apt-get install chromium)")
    return found


def test_the_page_renders_its_charts_and_requests_nothing(tmp_path: Path) -> None:
    chromium = _chromium()
    _, page, _ = _report(_stream(tmp_path), tmp_path, "--top", "3")
    text = page.read_text()
    # one script, the page's own, which the policy allows by its hash and no other
    assert text.count("<script") == 1 and 'http-equiv="Content-Security-Policy"' in text
    from streamfilter.report._drilldown import SCRIPT_HASH

    assert f"script-src '{SCRIPT_HASH}'" in text
    # Every request the page might make goes to this proxy: none may arrive.
    trap = socket.create_server(("127.0.0.1", 0))
    arrived: list[bytes] = []

    def listen() -> None:
        while True:
            try:
                connection, _ = trap.accept()
            except OSError:
                return
            arrived.append(connection.recv(4096))
            connection.close()

    threading.Thread(target=listen, daemon=True).start()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--proxy-server=http://127.0.0.1:{trap.getsockname()[1]}",
        "--proxy-bypass-list=<-loopback>",
        "--virtual-time-budget=3000",
    ]
    try:
        dom = subprocess.run(
            [chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
        ).stdout
        shot = tmp_path / "report.png"
        subprocess.run(
            [chromium, *flags, "--window-size=1100,1400", f"--screenshot={shot}", page.as_uri()],
            capture_output=True,
            timeout=120,
        )
    finally:
        trap.close()
    # Chromium's own services (network time, component updates, sign-in) are not the page's, nor is
    # a connection it opens ahead of need and closes without a request (a preconnect: no bytes)
    own = (b"clients2.google.com/time/", b"update.googleapis.com", b"accounts.google.com")
    from_page = [
        request for request in arrived if request and not any(host in request.split(b"\r\n", 1)[0] for host in own)
    ]
    assert from_page == []  # no request left the page
    for chart in ("over-time", "campaigns"):
        figure = dom.split(f'id="{chart}"', 1)[1].split("</figure>", 1)[0]
        assert "<svg" in figure and figure.count("<path") + figure.count("<rect") > 5, chart
    assert "#1: 40 posts" in dom
    assert shot.stat().st_size > 20_000  # a page with charts, not a blank one


def test_each_campaign_is_drawn_on_its_own_span_with_empty_bins_as_zero(tmp_path: Path) -> None:
    """A burst of 302 posts in 14 s was drawn as a block of two and a half hours,
    beside a campaign spread over hours: each now gets bins of its own span."""
    from streamfilter import Post
    from streamfilter.report import Clusters
    from streamfilter.report._html import campaign_timeline_spec
    from streamfilter.report._signals import Coordination

    burst_start = datetime(2024, 5, 1, 4, 17, tzinfo=UTC).timestamp()
    slow_start = datetime(2024, 5, 1, 6, 0, tzinfo=UTC).timestamp()
    clusters = Clusters()
    text = "win a free cruise to the islands this weekend only"
    other = "the flight was delayed three hours and nobody told us why"
    posts = [Post(f"b{n}", text, burst_start + n * 14 / 301, author=f"u{n}") for n in range(302)]
    posts += [Post(f"s{n}", other, slow_start + n * 3 * 3600, author=f"v{n}") for n in range(3)]
    for post in posts:
        original = "b0" if (post.id or "").startswith("b") else "s0"
        verdict = "novel" if post.id == original else "duplicate"
        clusters.add([post], [{"id": post.id, "verdict": verdict, "duplicate_of": original, "line": 1}])
    spec = campaign_timeline_spec(clusters, 10)  # the slow one is no campaign by the default rule
    assert spec is not None and len({v["campaign"] for v in spec["data"]["values"]}) == 1
    clusters.coordination = Coordination(min_burst=1)
    spec = campaign_timeline_spec(clusters, 10)
    assert spec is not None
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for value in spec["data"]["values"]:
        rows[value["campaign"]].append(value)
    burst, slow = (rows[label] for label in sorted(rows))  # "#1: 302 posts…", "#2: 3 posts…"
    assert sum(v["posts"] for v in burst) == 302 and burst[0]["campaign"].startswith(
        "#1: 302 posts, at most 22 a bin of 1 s"
    )
    assert burst[0]["time"] == "2024-05-01T04:17:00Z" and burst[-1]["time"] == "2024-05-01T04:17:14Z"
    assert sum(v["posts"] for v in slow) == 3 and [v["posts"] for v in slow].count(0) > 0  # the gaps, as zeros
    assert all(isinstance(v["posts"], int) for v in burst + slow)


def test_verdicts_of_another_stream_are_refused(tmp_path: Path) -> None:
    verdicts = tmp_path / "mixed.jsonl"
    subprocess.run(
        replay_command(str(FIXTURES / "mixed.jsonl"), "--verdicts", str(verdicts), "--out", "/dev/null"),
        check=True,
        capture_output=True,
    )
    command = [sys.executable, "-m", "streamfilter", "report", str(FIXTURES / "campaign.jsonl")]
    for given in (verdicts, Path(os.devnull)):
        done = subprocess.run(
            [*command, "--verdicts", str(given), "--json", str(tmp_path / "r.json")], capture_output=True, timeout=60
        )
        assert done.returncode == 1 and b"these verdicts are not of this input" in done.stderr, done.stderr
        assert b"usage:" not in done.stderr


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        (b"not json at all", b"its line 3 is no JSON (Expecting value at character 0)"),
        (b'{"id": "x", "verdict": "novel"}', b"its line 3 has no 'line'"),
        (b'{"id": "x", "verdict": "novel", "line": "three"}', b"its line 3 is no verdict"),
        (b"\xff\xfe", b"it is not UTF-8 text"),
    ],
)
def test_a_broken_verdicts_file_names_its_broken_line(tmp_path: Path, broken: bytes, says: bytes) -> None:
    verdicts = tmp_path / "v.jsonl"
    subprocess.run(
        replay_command(str(FIXTURES / "campaign.jsonl"), "--verdicts", str(verdicts), "--out", "/dev/null"),
        check=True,
        capture_output=True,
    )
    lines = verdicts.read_bytes().splitlines()
    verdicts.write_bytes(b"\n".join([*lines[:2], broken, *lines[3:]]) + b"\n")
    done = subprocess.run(
        [sys.executable, "-m", "streamfilter", "report", str(FIXTURES / "campaign.jsonl")]
        + ["--verdicts", str(verdicts), "--json", str(tmp_path / "r.json")],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1 and says in done.stderr and b"Traceback" not in done.stderr, done.stderr


def test_follow_records_its_stream_for_a_report(tmp_path: Path) -> None:
    from .live_servers import StreamServer

    records = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    record, verdicts = tmp_path / "stream.jsonl", tmp_path / "v.jsonl"
    with StreamServer("jsonl", records) as server:
        follow = [sys.executable, "-m", "streamfilter", "follow", server.url, "--record", str(record)]
        process = subprocess.Popen(
            [*follow, "--verdicts", str(verdicts), "--out", os.devnull], stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (verdicts.exists() and verdicts.read_bytes().count(b"\n") == 24):
                time.sleep(0.05)  # until every record is judged (the server then idles, as a live stream does)
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert record.read_bytes().splitlines() == records  # every record judged, in order
    report = tmp_path / "r.json"
    command = [sys.executable, "-m", "streamfilter", "report", str(record), "--verdicts", str(verdicts)]
    subprocess.run([*command, "--json", str(report), "--min-accounts", "1"], check=True, capture_output=True)
    assert json.loads(report.read_text())["clusters_total"] == 5


def test_the_coordination_graph_ranks_planted_groups_first(tmp_path: Path) -> None:
    """Three planted groups post their templates within seconds of each other; 60
    organic accounts post their own texts, and now and then the same viral line,
    hours apart. The groups the report lists first are the planted ones, exactly."""
    import random

    rng = random.Random(42)
    start = datetime(2024, 5, 1, 8, 0, tzinfo=UTC).timestamp()
    records: list[tuple[float, str, str]] = []  # (time, account, text)
    planted = {g: [f"bot{g}x{n}" for n in range(6)] for g in range(3)}
    for group, accounts in planted.items():
        for template in range(4):
            at = start + group * 7200 + template * 1800
            text = " ".join(f"g{group}t{template}w{i}" for i in range(12))  # each template its own words
            for account in accounts:
                records.append((at + rng.uniform(0, 30), account, f"@x{rng.randrange(999)} {text}"))
    organic = [f"person{n}" for n in range(60)]
    for n, account in enumerate(organic):
        words = " ".join(f"w{n:02d}x{i}" for i in range(10))  # two digits: read as leetspeak, w5 would be w55
        records.append((start + rng.uniform(0, 6 * 3600), account, f"my own thoughts on the day {words}"))
    for account in rng.sample(organic, 8):  # a viral line, shared by chance, hours apart
        records.append((start + rng.uniform(0, 6 * 3600), account, "the early bird catches the worm, they say"))
    records.sort()
    stream = tmp_path / "planted.jsonl"
    stream.write_text(
        "".join(
            json.dumps(
                {
                    "id_str": str(1000 + index),
                    "text": text,
                    "created_at": datetime.fromtimestamp(at, UTC).strftime("%a %b %d %H:%M:%S +0000 %Y"),
                    "user": {"screen_name": account},
                }
            )
            + "\n"
            for index, (at, account, text) in enumerate(records)
        )
    )
    report, _, _ = _report(stream, tmp_path, "--graph", str(tmp_path / "g.gexf"))
    found = [set(group["accounts"]) for group in report["groups"][:3]]
    expected = [{f"twitter:{account}" for account in accounts} for accounts in planted.values()]
    assert sorted(found, key=sorted) == sorted(expected, key=sorted)  # precision and recall 1.0
    assert all(not name.startswith("twitter:person") for group in report["groups"] for name in group["accounts"])
    graph = (tmp_path / "g.gexf").read_text()
    assert graph.count("<node ") == 18 + 8  # the accounts of clusters: the bots, and the 8 who shared the line
    assert graph.count("<edge ") == 3 * 15  # each group's 6 accounts all linked, and nobody else


_HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
_FORMULA = "=cmd|' /C calc'!A2"  # what a spreadsheet would run, were the CSV's cell bare
_WIDE_FORMULA = "\u3000\uff1dcmd|' /C calc'!A3"  # the same, full width after an ideographic space


def _drilldown_stream(tmp_path: Path) -> Path:
    """The campaigns of ``_stream``, a burst of 302 posts in 14 s whose
    variants carry look-alike letters, zero-width and full-width characters,
    and markup planted in a text, a handle, an id and the file's name."""
    stream = _stream(tmp_path)
    lines = stream.read_text().splitlines()
    start = datetime(2012, 5, 5, 4, 17, tzinfo=UTC)  # within a TTL of the other campaigns
    tricks = ["", "", "\u200b", "\uff01"]  # (a Cyrillic a below), a zero-width space, a full-width "!"
    for n in range(302):
        text = f"@fan{n} Win a free cruise to the islands this weekend only" + tricks[n % 4]
        moment = start.timestamp() + n * 14 / 301
        lines.append(
            json.dumps(
                {
                    "id_str": {9: '9"><b>00009', 12: _FORMULA, 13: _WIDE_FORMULA}.get(n, f"9{n:05d}"),
                    "text": text.replace("a free", "\u0430 free") if n % 4 == 1 else text,
                    "created_at": datetime.fromtimestamp(moment, UTC).strftime("%a %b %d %H:%M:%S +0000 %Y"),
                    "user": {"screen_name": f"cruiser{n % 60}" if n != 11 else _HOSTILE},
                }
            )
        )
    for n in range(3):  # a campaign whose text is markup
        lines.append(
            json.dumps(
                {
                    "id_str": f"8{n:05d}",
                    "text": "claim your prize " + _HOSTILE,
                    "created_at": f"Sat May 05 05:0{n}:00 +0000 2012",
                    "user": {"screen_name": f"prize{n}"},
                }
            )
        )
    named = tmp_path / (_HOSTILE.replace("/", "") + ".jsonl")  # the page's title is the file's name
    named.write_text("\n".join(lines) + "\n")
    return named


def test_the_page_searches_opens_a_campaign_and_exports_it_in_a_browser(tmp_path: Path) -> None:
    chromium = _chromium()
    playwright = pytest.importorskip("playwright.sync_api")
    _, page_file, _ = _report(_drilldown_stream(tmp_path), tmp_path, "--top", "6")
    requested: list[str] = []
    dialogs: list[str] = []
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(accept_downloads=True)

            def dismissed(dialog: Any) -> None:
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", dismissed)

            def refuse(route: Any) -> None:
                if route.request.url != page_file.as_uri():
                    requested.append(route.request.url)
                route.abort() if route.request.url != page_file.as_uri() else route.continue_()

            page.route("**/*", refuse)
            page.goto(page_file.as_uri())
            campaigns = page.locator("tr.campaign")
            total = campaigns.count()
            assert total >= 3 and page.inner_text("#shown") == str(total)
            # search: one campaign left, and the count says so
            page.fill("#search", "cruise")
            visible = page.locator("tr.campaign:visible")
            assert visible.count() == 1 and page.inner_text("#shown") == "1"
            burst = visible.first
            assert burst.get_attribute("data-posts") == "302"
            # open it: its members, their handles and links, and every variant with its tricks flagged
            burst.locator("summary").click()
            members = burst.locator("tr.member")
            assert members.count() == 302
            assert "twitter:cruiser0" in burst.inner_text()
            assert burst.locator('a[href^="https://x.com/cruiser0/status/"]').count() >= 1
            assert burst.locator('a[href*="img"]').count() == 0  # no link made of a handle that is none
            flags = burst.locator("ul.all-variants mark").all_inner_texts()
            assert {"homoglyphs", "zero-width characters", "full-width forms"} <= set(flags)
            # sorting by first seen puts the campaigns of May 4 before the burst of May 5
            page.fill("#search", "")
            page.select_option("#sort", "first")
            ranks = [row.get_attribute("data-first") for row in page.locator("tr.campaign").all()]
            assert [float(rank or 0) for rank in ranks] == sorted(float(rank or 0) for rank in ranks)
            # CSV of the members of the campaigns shown
            page.fill("#search", "cruise")
            with page.expect_download() as download:
                page.click("#export")
            csv = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
            assert csv[0] == "campaign,platform,account,time,post,link" and len(csv) == 1 + 302
            assert any(line.startswith("1,twitter,twitter:cruiser1,2012-05-05T04:17:") for line in csv)
            # planted markup stayed text, in the page and in the CSV
            assert page.evaluate("window.__pwned") is None and dialogs == []
            assert _HOSTILE in burst.inner_text()  # the handle
            assert any(_HOSTILE.replace('"', '""') in line for line in csv)
            cells = [cell for line in csv[1:] for cell in line.split(",")]
            assert "'" + _FORMULA in cells and not any(cell[:1] in ("=", "+", "-", "@") for cell in cells)
            assert "'" + _WIDE_FORMULA in cells
            page.fill("#search", "prize")
            assert _HOSTILE in page.locator("tr.campaign:visible").first.inner_text()  # the text
            assert _HOSTILE.replace("/", "") in page.inner_text("h1")  # the file name
            # the burst of 14 s is drawn in its own minute
            chart = page.locator("#campaigns").evaluate("figure => figure.textContent")  # the SVG's labels
            # text in every script has a font to fall back on (.ci/run installs the Noto fonts)
            stack = page.evaluate("getComputedStyle(document.body).fontFamily")
            assert all(font in stack for font in ("Noto Sans CJK JP", "Noto Sans Thai", "Noto Color Emoji"))
            assert "May 05 04:17:" in chart and "May 05 04:18" not in chart
            # on a phone, 400 px wide: nothing runs off the side, charts shrink, campaign texts wrap
            page.set_viewport_size({"width": 400, "height": 900})
            page.fill("#search", "")
            page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= 400
            widths = page.evaluate(
                "[...document.querySelectorAll('figure.chart svg')].map(s => s.getBoundingClientRect().right)"
            )
            assert widths and max(widths) <= 400
            right = page.evaluate(
                "Math.max(...[...document.querySelectorAll('p.text')].map(p => p.getBoundingClientRect().right))"
            )
            assert right <= 400
        finally:
            browser.close()
    assert requested == []  # the page asked for nothing
    assert (tmp_path / "phone.png").stat().st_size > 10_000  # the screenshot of the page at 400 px


def test_hash_authors_names_no_account_and_keeps_each_one_token(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    lines = [line for line in stream.read_text().splitlines() if not line.startswith('{"broken"')]
    handles = {json.loads(line)["user"]["screen_name"] for line in lines}
    graph = tmp_path / "graph.graphml"
    plain, _, _ = _report(stream, tmp_path, "--graph", str(graph))
    hashed, page, _ = _report(stream, tmp_path, "--hash-authors", "--graph", str(graph))
    shown = json.dumps(hashed) + page.read_text() + graph.read_text()
    assert not [handle for handle in handles if f"twitter:{handle}" in shown or f">{handle}<" in shown]
    # the same groups, of the same sizes: each account one token throughout
    assert [len(group["accounts"]) for group in hashed["groups"]] == [
        len(group["accounts"]) for group in plain["groups"]
    ]
    tokens = {account for group in hashed["groups"] for account in group["accounts"]}
    assert tokens and all(token.split(":", 1)[1].startswith("acct-") for token in tokens)


def _run_report(tmp_path: Path, stream: Path, *options: str) -> subprocess.CompletedProcess[bytes]:
    verdicts = tmp_path / f"{stream.stem}.v"
    judged = subprocess.run(replay_command(str(stream), "--verdicts", str(verdicts), "-q"), capture_output=True)
    assert judged.returncode == 0, judged.stderr
    command = [sys.executable, "-m", "streamfilter", "report", str(stream), "--verdicts", str(verdicts), *options]
    return subprocess.run(command, capture_output=True, timeout=300)


def _tweet(number: int, seconds: int, text: str, handle: str) -> str:
    created = datetime.fromtimestamp(1_336_140_000 + seconds, UTC).strftime("%a %b %d %H:%M:%S +0000 %Y")
    return json.dumps({"id_str": str(10**17 + number), "created_at": created, "text": text,
                       "user": {"screen_name": handle}}) + "\n"  # fmt: skip


def test_the_bundled_campaign_shows_a_coordinated_group_with_the_defaults(tmp_path: Path) -> None:
    done = _run_report(tmp_path, FIXTURES / "campaign.jsonl", "--graph", str(tmp_path / "g.graphml"),
                       "--json", str(tmp_path / "r.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    groups = json.loads((tmp_path / "r.json").read_text())["groups"]
    assert len(groups[0]["accounts"]) >= 3 and b"<edge" in (tmp_path / "g.graphml").read_bytes()


@pytest.mark.parametrize("suffix", [".graphml", ".gexf"])
def test_a_graph_of_handles_xml_cannot_hold_is_well_formed(tmp_path: Path, suffix: str) -> None:
    import xml.dom.minidom

    text = "graph campaign text for all of us to share right now"
    handles = ["ctl\u0001a", "b\u001bc", "d\ufffe", "plain"]
    stream = tmp_path / "controls.jsonl"
    stream.write_text("".join(_tweet(n, n * 3, text, handle) for n, handle in enumerate(handles)))
    graph = tmp_path / f"g{suffix}"
    assert _run_report(tmp_path, stream, "--graph", str(graph)).returncode == 0
    document = xml.dom.minidom.parse(str(graph))
    assert len(document.getElementsByTagName("node")) == 4  # each handle its own node, written out
    assert "\\u0001" in graph.read_text(encoding="utf-8")


def test_a_campaign_too_large_for_pairs_is_drawn_as_a_hub(tmp_path: Path) -> None:
    # 2,000 accounts posting one text within ten minutes would be two million
    # pairs; each is linked to one hub node for the campaign instead
    text = "vote for the harbour bridge plan today and share this with your friends"
    stream = tmp_path / "clique.jsonl"
    stream.write_text("".join(_tweet(n, n * 3 // 10, text, f"acct{n}") for n in range(2000)))
    graph, report = tmp_path / "g.graphml", tmp_path / "r.json"
    assert _run_report(tmp_path, stream, "--graph", str(graph), "--json", str(report)).returncode == 0
    group = json.loads(report.read_text())["groups"][0]
    assert group["size"] == 2000 and group["links"] == 2000 and len(group["hubs"]) == 1
    written = graph.read_text(encoding="utf-8")
    assert written.count("<edge ") == 2000 and written.count(">campaign<") == 1  # the hub's kind


def test_the_report_folds_hashtags_sorts_accounts_naturally_and_counts_whole_posts(tmp_path: Path) -> None:
    report, page, _ = _report(FIXTURES / "campaign.jsonl", tmp_path)
    betting = next(c for c in report["clusters"] if c["id"] == "200000000000000001")
    assert betting["hashtags"] == {"kyderby": 7}  # #ＫＹＤｅｒｂｙ in full-width letters among them
    assert [member["account"] for member in betting["members"]] == [f"user{n}" for n in (1, 2, 3, 9, 10, 11, 12)]
    assert betting["members"][0] == {
        "time": "2012-05-04T14:07:00.000Z", "platform": "twitter", "account": "user1", "post": "200000000000000001"
    }  # fmt: skip
    accounts = report["groups"][0]["accounts"]  # one post each: by name, their numbers as numbers
    assert accounts == [f"twitter:user{n}" for n in (1, 2, 3, 9, 10, 11, 12)]
    html = page.read_text(encoding="utf-8")
    chart = html[html.index('id="over-time"') : html.index("</figure>", html.index('id="over-time"'))]
    ticks = re.findall(r">(\d+(?:\.\d+)?)</text>", chart)
    assert ticks and all("." not in tick for tick in ticks)  # whole posts: no tick at half a post


def test_a_chart_of_few_posts_ticks_whole_posts(tmp_path: Path) -> None:
    text = "graph campaign text for all of us to share right now"
    stream = tmp_path / "three.jsonl"
    stream.write_text("".join(_tweet(n, n * 3, text, f"acct{n}") for n in range(3)))
    _, page, _ = _report(stream, tmp_path)
    html = page.read_text(encoding="utf-8")
    chart = html[html.index('id="over-time"') : html.index("</figure>", html.index('id="over-time"'))]
    ticks = re.findall(r">(\d+(?:\.\d+)?)</text>", chart)
    assert ticks and all("." not in tick for tick in ticks), ticks


def test_accounts_in_the_most_campaigns_count_every_post_of_theirs(tmp_path: Path) -> None:
    # three accounts post one text 600 times each: more than the 500 members a
    # campaign lists, and the accounts table counts all 600 of each
    text = "vote for the harbour bridge plan today and share this with your friends"
    stream = tmp_path / "busy.jsonl"
    stream.write_text("".join(_tweet(n, n, text, f"busy{n % 3}") for n in range(1800)))
    _, page, _ = _report(stream, tmp_path)
    html = page.read_text(encoding="utf-8")
    rows = re.findall(r'<tr><td>(twitter:busy\d)</td><td class="num">(\d+)</td><td class="num">([\d,]+)</td>', html)
    assert sorted(rows) == [(f"twitter:busy{n}", "1", "600") for n in range(3)]


def test_a_link_counts_as_campaigns_only_the_clusters_that_are_campaigns(tmp_path: Path) -> None:
    import networkx  # type: ignore[import-untyped]

    # a and b share two clusters within seconds: one a campaign (c joins it),
    # the other two accounts only, below --min-accounts (3)
    campaign = "vote for the harbour bridge plan today and share this with your friends"
    pair = "the ferry timetable changed again this morning for everyone going north"
    stream = tmp_path / "two.jsonl"
    stream.write_text(
        _tweet(1, 0, campaign, "a") + _tweet(2, 5, campaign, "b") + _tweet(3, 9, campaign, "c")
        + _tweet(4, 100, pair, "a") + _tweet(5, 104, pair, "b")
    )  # fmt: skip
    graph = tmp_path / "g.graphml"
    assert _run_report(tmp_path, stream, "--graph", str(graph)).returncode == 0
    link = networkx.read_graphml(graph).edges["twitter:a", "twitter:b"]
    assert (link["clusters"], link["campaigns"], link["weight"]) == (2, 1, 2)


def test_members_exports_every_post_of_every_campaign_with_its_text(tmp_path: Path) -> None:
    # one campaign of 600 accounts, more than the page lists, and a pair's own cluster
    text = "vote for the harbour bridge plan today and share this with your friends"
    pair = "the ferry timetable changed again this morning for everyone going north"
    stream = tmp_path / "big.jsonl"
    lines = [_tweet(n, n // 10, text + (" now" if n % 2 else ""), f"acct{n}") for n in range(600)]
    lines += [_tweet(900, 5000, pair, "x"), _tweet(901, 5003, pair, "y")]
    lines.append(_tweet(902, 5004, '=HYPERLINK("http://x") ' + text, "=cmd"))
    stream.write_text("".join(lines))
    members = tmp_path / "members.csv"
    assert _run_report(tmp_path, stream, "--members", str(members)).returncode == 0
    with members.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 601 and {row["campaign"] for row in rows} == {str(10**17)}  # not the pair's
    assert rows[0] == {
        "campaign": str(10**17), "time": "2012-05-04T14:00:00.000Z", "platform": "twitter",
        "account": "acct0", "post": str(10**17), "text": text,
    }  # fmt: skip
    assert rows[1]["text"] == text + " now" and rows[1]["account"] == "acct1"
    planted = rows[-1]  # a formula in a cell is written after a quote
    assert planted["account"] == "'=cmd" and planted["text"].startswith("'=HYPERLINK")


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ("=1+1", "'=1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\x00=1", "'\x00=1"),
        ("  =1+1", "'  =1+1"),  # spaces first
        ("\uff1d1+1", "'\uff1d1+1"),  # full width
        ("\u00a0\uff0b1", "'\u00a0\uff0b1"),
        ("a = b", "a = b"),
        ("cruise fans", "cruise fans"),
        ("", ""),
    ],
)
def test_a_members_cell_that_may_run_as_a_formula_is_written_after_a_quote(cell: str, written: str) -> None:
    from streamfilter.report._members import _neutral

    assert _neutral(cell) == written


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("Win a free cruise this weekend", []),
        ("W1n a fr33 cruise this w33kend", ["digits for letters"]),
        ("W I N a free cruise", ["letters spaced out"]),
        ("Win а free cruise\u200b", ["homoglyphs", "zero-width characters"]),  # a Cyrillic а
        ("Flight UA1234 on the 3rd, mp3 and covid19 news", []),  # numbers are not tricks
        ("\U0001f1fc\u200b\U0001f1ee\u200b\U0001f1f3 a free cruise", ["zero-width characters", "flag letters"]),
        ("Cruise fans \U0001f1fa\U0001f1f8 \U0001f1eb\U0001f1f7 welcome", []),  # flags are no trick
        ("W\nI\nN\nS\n\na free cruise", ["letters spaced out"]),
        ("W!n a fr€€ cruise, ca$h too", ["symbols for letters"]),
        ("Save $30 today!Great cruise", []),  # an amount, a sentence run on
        ("F.R.E.E cruise in the U.S.A.", ["letters joined by marks"]),
        ("Cl.aim yo,ur fr-ee cruise", ["words broken by marks"]),
        ("a front-end and/or back end", []),  # two, as honest text has them
        ("\u202eesiurc eerf a niW", ["reversed text"]),
        ("ǝsᴉnɹɔ ǝǝɹɟ ɐ uᴉM", ["text upside down"]),
        ("¿Quién gana el crucero? ¡Tú!", []),  # Spanish marks, no turned letter
        ("Win a freeeee cruise sooo soon", ["letters drawn out"]),
        ("Book at www.cruise.example or @zzzcruises, a good deal", []),  # a link, a handle, a double letter
        ("The Queen Mary III sails in May", []),  # a Roman numeral
    ],
)
def test_a_variant_is_flagged_for_each_trick_in_it(text: str, flags: list[str]) -> None:
    from streamfilter.report._tricks import tricks

    assert tricks(text) == flags
