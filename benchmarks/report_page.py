"""How the report page holds up with a large input: its size, and how long a browser takes.

    python benchmarks/make_stream.py --repeat 4 --campaigns 30 --out benchmarks/out/report.jsonl --labels benchmarks/out/report_labels.jsonl
    python benchmarks/report_page.py benchmarks/out/report.jsonl --top 100

Replays the stream, writes the report (timed, with its peak RSS), then opens
the page in Debian's Chromium through Playwright and times: loading it
(``load``), a search typed into it until the rows are filtered, opening the
largest campaign's members, and the CSV export of every campaign shown.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream", type=Path)
    parser.add_argument("--top", default="100")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch:
        verdicts, page_file = Path(scratch) / "verdicts.jsonl", Path(scratch) / "report.html"
        replay = [sys.executable, "-m", "streamfilter", "replay", str(args.stream), "--verdicts", str(verdicts)]
        subprocess.run([*replay, "--out", os.devnull, "-q"], check=True)
        posts = sum(1 for _ in args.stream.open("rb"))
        started = time.perf_counter()
        report = [sys.executable, "-m", "streamfilter", "report", str(args.stream), "--verdicts", str(verdicts)]
        subprocess.run([*report, "--html", str(page_file), "--top", args.top, "-q"], check=True)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"{posts:,} posts; report written in {seconds:.1f} s, peak RSS {peak:.0f} MB")
        print(f"page: {page_file.stat().st_size / 2**20:.1f} MB, --top {args.top}")
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(accept_downloads=True)
            started = time.perf_counter()
            page.goto(page_file.as_uri(), wait_until="load")
            loaded = time.perf_counter() - started
            rows = page.locator("tr.campaign").count()
            started = time.perf_counter()
            page.fill("#search", "the")
            page.wait_for_function("document.getElementById('shown').textContent !== ''")
            searched = time.perf_counter() - started
            page.fill("#search", "")
            started = time.perf_counter()
            page.locator("tr.campaign summary").first.click()
            page.locator("tr.campaign").first.locator("tr.member").first.wait_for()
            opened = time.perf_counter() - started
            started = time.perf_counter()
            with page.expect_download() as download:
                page.click("#export")
            lines = sum(1 for _ in open(download.value.path(), encoding="utf-8"))
            exported = time.perf_counter() - started
            browser.close()
        print(f"{rows} campaigns on the page; load {loaded * 1000:.0f} ms, search {searched * 1000:.0f} ms, ")
        print(f"open the largest {opened * 1000:.0f} ms, CSV of {lines - 1:,} members {exported * 1000:.0f} ms")


if __name__ == "__main__":
    main()
