"""The docs a user copies from: every code block runs as written, and the built site keeps its structure.

A fenced ``python`` block runs as a script; a ``bash`` block runs in bash; each
in a directory of its own that holds the repository's ``fixtures``, with the
``streamfilter`` command of this environment. A block that starts servers,
needs the internet or installs packages says so on the line before it:
``<!-- docs-test: skip: the reason -->``; the test skips it with that reason.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streamfilter

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(
    r"^(?:<!-- docs-test: skip: (?P<skip>.+?) -->\n)?```(?P<language>[a-z]*)\n(?P<code>.*?)^```$", re.M | re.S
)
_RUN = {"python": [sys.executable, "-"], "bash": ["bash", "-euo", "pipefail", "-s"]}


def blocks() -> list[tuple[str, str, str, str | None]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            if match["language"] in _RUN:
                line = text.count("\n", 0, match.start("code"))
                found.append((f"{page.relative_to(ROOT)}:{line}", match["language"], match["code"], match["skip"]))
    return found


@pytest.mark.parametrize(("where", "language", "code", "skip"), blocks(), ids=[b[0] for b in blocks()])
def test_every_code_block_runs_as_written(
    tmp_path: Path, where: str, language: str, code: str, skip: str | None
) -> None:
    if skip:
        pytest.skip(skip)
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(_RUN[language], input=code.encode(), cwd=tmp_path, capture_output=True, timeout=300, env=env)
    assert done.returncode == 0, f"{where}:\n{done.stderr.decode()}"


def test_the_ten_line_example_prints_what_it_says() -> None:
    code = next(code for where, _, code, _ in blocks() if where.startswith("docs/index.md") and "anyio" in code)
    done = subprocess.run([sys.executable, "-"], input=code.encode(), capture_output=True, timeout=120, check=True)
    assert done.stdout.decode().splitlines() == ["1 Win a free cruise!"]


# Words that point at a place on the page: each must be a link, or the place must be named.
_DANGLING = re.compile(r"\b(see|table|figures|counts|are) [^.\n]{0,30}\b(above|below)\b|see '[^']+'", re.I)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_dangling_references(page: Path) -> None:
    prose = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert _DANGLING.findall(prose) == []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    return out


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_the_site_nests_lists_and_gives_every_guide_headings(site: Path) -> None:
    reliability = (site / "guides" / "reliability.html").read_text(encoding="utf-8")
    assert re.search(r"<li>(?:(?!</li>).)*?<ul>", reliability, re.S)  # a list inside a list item
    for guide in (site / "guides").glob("*.html"):
        assert guide.read_text(encoding="utf-8").count("<h2") >= 2, f"{guide.name} has no table of contents"


def test_pages_link_to_files_so_the_folder_reads_from_disk(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="guides/library.html"' in index and 'src="images/report.png"' in index


def test_the_reference_documents_every_public_name_and_parameter(site: Path) -> None:
    reference = (site / "reference.html").read_text(encoding="utf-8")
    text = _text(reference)
    assert not re.search(r"\w::\s", text)  # reStructuredText residue
    assert not re.search(r"streamfilter\._[a-z]", text)  # private module paths
    for name in streamfilter.__all__:
        assert f'id="streamfilter.{name}"' in reference, name
    members = ["StreamFilter.open", "StreamFilter.flush", "FilterConfig.plan", "BandPlan.probability", "BandPlan.table"]
    members += [f"{store}.{method}" for store in ("LMDBStore", "MemoryStore", "RedisStore") for method in
                ("open", "close", "progress")]  # fmt: skip
    for member in members:  # the ones a user calls, each with its own entry
        assert f'id="streamfilter.{member}"' in reference, member
    section = reference[
        reference.index('id="streamfilter.StreamFilter"') : reference.index('id="streamfilter.FilterConfig"')
    ]
    documented = set(re.findall(r"<td>\s*<code>(\w+)</code>\s*</td>", section))
    signature = inspect.signature(streamfilter.StreamFilter)
    assert documented >= set(signature.parameters), set(signature.parameters) - documented


@pytest.mark.parametrize("page", ["README.md", "docs/guides/cli.md"])
def test_the_synopses_name_only_options_their_command_has(page: str) -> None:
    from streamfilter.cli._parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    options = {name: {o for a in sub._actions for o in a.option_strings} for name, sub in commands.items()}
    text = (ROOT / page).read_text(encoding="utf-8")
    block = text[text.index("```text\nstreamfilter ") : text.index("```", text.index("```text\nstreamfilter ") + 7)]
    named: dict[str, set[str]] = {}
    command = ""
    for line in block.splitlines():
        if line.startswith("streamfilter "):
            command = line.split()[1]
        if command and "except" not in line:  # "[replay's options, except ... --sketch-processes]" names no option
            named.setdefault(command, set()).update(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))
    for command, found in named.items():
        assert found <= options[command], (command, found - options[command])
    wanted = {"--graph", "--min-accounts", "--min-burst", "--window", "--co-post-window"}
    assert wanted <= named["report"] and "--record" in named["follow"]
