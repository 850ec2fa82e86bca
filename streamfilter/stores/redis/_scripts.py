"""The Lua scripts of the Redis store, read from the ``.lua`` files beside this module.

A script is assembled from parts (``record.lua`` reads a post record,
``add_member.lua`` files a post under a band key) and its own body. They keep
the index only: the one batch judge (``_judge``) applies the rules in Python.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["script"]

# name: (flags of the script's shebang line, the parts it is made of, in order)
_SCRIPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "commit": ("", ("add_member", "commit")),
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
