"""Signals the command catches before it watches for them.

SIGTERM received while a stream command imports and opens its index stops it
at its first batch, instead of killing it with its work half done: the entry
point (``_launch``) records it here, and ``cli._inputs.watch_signals`` reads
it. Standard library only, as the entry point imports it first.
"""

from __future__ import annotations

import signal

__all__ = ["EARLY_SIGNALS", "catch_early_sigterm"]

EARLY_SIGNALS: list[int] = []


def catch_early_sigterm() -> None:
    """Record SIGTERM in ``EARLY_SIGNALS`` until the command watches for it."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: EARLY_SIGNALS.append(signum))
