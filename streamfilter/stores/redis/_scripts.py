"""The Lua scripts of the Redis store, read from the ``.lua`` files beside this module.

A script is assembled from parts (``record.lua`` reads a post record,
``similarity.lua`` holds the rules' similarity, ``add_member.lua`` files a
post under a band key) and its own body. The rules' constants travel as
arguments (``rules_args``), never spliced into the text.
"""

from __future__ import annotations

import functools
from importlib import resources

from ... import _rules

__all__ = ["rules_args", "script"]

# name: (flags of the script's shebang line, the parts it is made of, in order)
_SCRIPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "batch": ("", ("record", "add_member", "similarity", "batch")),
    "similarity_check": ("", ("record", "similarity", "similarity_check")),
    "read": ("allow-cross-slot-keys,no-writes", ("read",)),
    "claim": ("allow-cross-slot-keys", ("record", "claim")),
    "append": ("allow-cross-slot-keys", ("add_member", "append")),
    "pin": ("allow-cross-slot-keys", ("record", "pin")),
    "drop": ("allow-cross-slot-keys", ("record", "drop")),
    "raise_clock": ("", ("raise_clock",)),
}


@functools.cache
def script(name: str) -> str:
    """The text of script ``name``."""
    flags, parts = _SCRIPTS[name]
    here = resources.files(__package__)
    text = "\n".join(here.joinpath(f"{part}.lua").read_text(encoding="utf-8") for part in parts)
    return f"#!lua flags={flags}\n{text}" if flags else text


def rules_args(threshold: float, shingle_size: int) -> list[str]:
    """The rules' constants, as ``similarity.lua``'s ``read_rules`` takes them."""
    return [
        repr(float(threshold)),
        str(shingle_size),
        str(_rules.CUT_OFF_MIN_WORDS),
        repr(float(_rules.CUT_OFF_MIN_SIMILARITY)),
        str(_rules.EDIT_MIN_WORDS),
        str(_rules.EDIT_MAX_EDITS),
        repr(float(_rules.EDIT_MIN_JACCARD)),
    ]
