"""Coverage-guided fuzzing of decode -> adapt -> normalise -> sketch -> judge.

    pip install atheris
    mkdir -p fuzz-corpus
    python tests/fuzz/fuzz_judge.py -max_total_time=1800 -max_len=4096 fuzz-corpus tests/fuzz/seeds

Each input goes in as a raw line and nested where each platform nests JSON
(``harness.shapes``). Whatever the input, every post gets a verdict and
nothing raises: a crash, a hang or the engine's safety-net reason is a
finding. Not part of the test suite (it runs for half an hour);
``tests/fuzz/test_seeds.py`` runs the seeds, and each finding is kept in
``seeds/`` once fixed.
"""

from __future__ import annotations

import logging
import sys

import atheris  # type: ignore[import-untyped]  # ships no stubs

with atheris.instrument_imports(include=["streamfilter"]):
    from harness import check  # type: ignore[import-not-found]


if __name__ == "__main__":
    logging.getLogger("streamfilter").setLevel(logging.CRITICAL)  # warnings of odd times, by the thousand
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()
