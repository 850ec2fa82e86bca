"""The Lua scripts of the Redis store, read from the ``.lua`` files beside this module.

A script is assembled from parts (``record.lua`` reads a post record,
``index.lua`` finds and files band entries in time slices) and its own body. They keep
the index only: the one batch judge (``_judge``) applies the rules in Python.
"""

from __future__ import annotations

import functools
from importlib import resources

from ..._rules import OLDEST_PER_KEY

__all__ = ["script"]

# name: (flags of the script's shebang line, the parts it is made of, in order)
_SCRIPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "read_batch": ("", ("index", "read_batch")),
    "commit": ("", ("index", "commit")),
    "slices": ("", ("index", "slices")),
    "read": ("allow-cross-slot-keys,no-writes", ("read",)),
    "read_bands": ("allow-cross-slot-keys,no-writes", ("index", "read_bands")),
    "claim": ("allow-cross-slot-keys", ("record", "index", "claim")),
    "append": ("allow-cross-slot-keys", ("index", "append")),
    "pin": ("allow-cross-slot-keys", ("record", "pin")),
    "drop": ("allow-cross-slot-keys", ("record", "drop")),
    "unlink": ("allow-cross-slot-keys", ("unlink",)),
    "raise_clock": ("", ("raise_clock",)),
    "filing": ("", ("filing",)),
}


@functools.cache
def script(name: str) -> str:
    """The text of script ``name``."""
    flags, parts = _SCRIPTS[name]
    here = resources.files(__package__)
    text = "\n".join(here.joinpath(f"{part}.lua").read_text(encoding="utf-8") for part in parts)
    if "index" in parts:  # the rule's constant, from its one definition
        text = f"local OLDEST_PER_KEY = {OLDEST_PER_KEY}\n{text}"
    return f"#!lua flags={flags}\n{text}" if flags else text
