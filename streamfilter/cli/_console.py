"""What the commands print on stderr besides their errors, and ``-q``, which silences it."""

from __future__ import annotations

import logging
import sys

__all__ = ["notice", "quiet", "set_quiet"]

_state = {"quiet": False}


def set_quiet(value: bool) -> None:
    """``-q``: from now on, only the errors that end a run reach stderr (and
    the library's warnings, which go through logging, only when they are errors)."""
    _state["quiet"] = value
    logging.getLogger("streamfilter").setLevel(logging.ERROR if value else logging.NOTSET)


def quiet() -> bool:
    return _state["quiet"]


def notice(message: str, *, end: str = "\n") -> None:
    """``streamfilter: message`` on stderr, unless ``-q`` was given."""
    if not _state["quiet"]:
        print(f"streamfilter: {message}", file=sys.stderr, end=end, flush=True)
