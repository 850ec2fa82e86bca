from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED_PAYLOADS = ROOT.parent / "shared" / "data" / "payloads"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def shared_payload(relative: str) -> Path:
    path = SHARED_PAYLOADS / relative
    if not path.exists():
        pytest.skip(f"{path} is not available (../shared/data is read in place)")
    return path


def replay_command(*args: str) -> list[str]:
    """The argv of ``python -m streamfilter replay ARGS``."""
    return [sys.executable, "-m", "streamfilter", "replay", *args]
