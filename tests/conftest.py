from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from streamfilter.cli._console import set_quiet

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED_PAYLOADS = ROOT.parent / "shared" / "data" / "payloads"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _commands_not_quiet() -> None:
    """Each test starts as a new process does: a command run in this process
    with ``-q`` silences the commands' notices and progress line, and the
    library's warnings below errors, until the next command says otherwise
    (``cli._console.set_quiet``)."""
    set_quiet(False)


def shared_payload(relative: str) -> Path:
    path = SHARED_PAYLOADS / relative
    if not path.exists():
        pytest.skip(f"{path} is not available (../shared/data is read in place)")
    return path


class HandClock:
    """A monotonic clock a test moves by hand (``now``), for code that takes its clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replay_command(*args: str) -> list[str]:
    """The argv of ``python -m streamfilter replay ARGS``."""
    return [sys.executable, "-m", "streamfilter", "replay", *args]


@pytest.fixture(scope="session")
def kernel():  # type: ignore[no-untyped-def]
    """The compiled kernel, for the tests that hold it to its reference."""
    from streamfilter._compiled import compiled_kernel

    found = compiled_kernel()
    if found is None and os.environ.get("STREAMFILTER_PURE", "") not in ("", "0"):
        pytest.skip("STREAMFILTER_PURE=1: the references alone, no kernel to hold to them")
    if found is None:
        pytest.fail("the compiled kernel is not built")
    return found


def python_rules(patch: pytest.MonkeyPatch) -> None:
    """Verify with the Python rules (sets and all), not the kernel's, under ``patch``."""
    from streamfilter import _rules

    patch.setattr(_rules, "best_match", _rules._py_best_match)
    patch.setattr(_rules, "_edits", _rules._py_edits)


# -- real Redis servers, one set per test session ---------------------------------
@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from .redis_servers import RedisServer, redis_available

    if not redis_available():
        pytest.skip("redis-server is not installed (.ci/run installs it: apt-get install redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from .redis_servers import RedisCluster, redis_available

    if not redis_available():
        pytest.skip("redis-server is not installed (.ci/run installs it: apt-get install redis-server)")
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    yield cluster
    cluster.stop()


_prefixes = iter(range(1, 1 << 30))


def unique_prefix(url: str) -> str:
    """The URL with a key prefix no other test uses, so tests share servers without flushing."""
    return f"{url}?prefix=t{next(_prefixes)}"


_VOCABULARY = [
    f"{stem}{n}" for stem in ("ka", "lo", "mi", "ne", "po", "ru", "si", "ta", "ve", "zo") for n in range(200)
]


def distinct_text(seed: int, words: int = 7) -> str:
    """A text of made-up words that shares little with the text of any other
    seed: a template that changes only a number or two is a near-duplicate
    (words and word pairs are compared), so tests that need distinct texts use these."""
    return " ".join(random.Random(seed).sample(_VOCABULARY, words))
