"""A real full disk: a 3 MiB tmpfs that the index lives on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from streamfilter import FilterConfig
from tests.conftest import replay_command


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    mount = tmp_path / "disk"
    mount.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_fails_clearly_keeps_data_and_resumes(small_disk: Path, tmp_path: Path) -> None:
    stream = tmp_path / "stream.jsonl"
    stream.write_text(
        "\n".join(
            json.dumps({"id": str(i), "text": f"distinct post {i} with words {i * 7} and {i * 13} more"})
            for i in range(40000)
        )
        + "\n"
    )
    db = small_disk / "index"
    out = tmp_path / "out.jsonl"
    # 40,000 texts that differ only in three numbers: 120,000 distinct words, where two may share a
    # 32-bit word hash under some seeds and make two posts look alike; one seed keeps the run exact
    command = replay_command(str(stream), "--db", str(db), "--out", str(out), "--ttl", "0", "--resume", "--seed", "1")
    full = subprocess.run(command, capture_output=True, timeout=300)
    assert full.returncode == 1
    message = full.stderr.decode().strip().splitlines()[-1]
    assert message.startswith("streamfilter: error:") and "disk is full" in message
    delivered = out.read_text().splitlines()
    assert 0 < len(delivered) < 40000
    # free space: move the index to a roomy disk, then resume
    roomy = tmp_path / "index"
    shutil.copytree(db, roomy)
    resumed = subprocess.run([*command[:6], str(roomy), *command[7:]], capture_output=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr.decode()
    everything = out.read_text().splitlines()
    assert set(everything) == set(stream.read_text().splitlines())
    # at most the batch that failed to commit is repeated
    assert len(everything) - 40000 <= FilterConfig().batch_size
