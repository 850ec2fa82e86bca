"""The one place where the compiled kernel is chosen, or its pure-Python reference.

The kernel (``_kernel*.c``) is built by ``pip install``; each of its
functions computes what a Python reference beside it computes, value for
value. ``STREAMFILTER_PURE=1`` in the environment, before streamfilter is
imported, chooses the references; so does a kernel that is not built, and
streamfilter then says so once where it runs from a source tree (a
checkout without ``pip install -e .``). ``streamfilter --version`` names the
mode in use.

Standard library only, so the light modules (the normaliser, JSON, times)
can ask for the kernel without importing numpy.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

__all__ = ["PURE_VARIABLE", "compiled_kernel", "kernel_mode"]

PURE_VARIABLE = "STREAMFILTER_PURE"


@functools.cache
def compiled_kernel() -> ModuleType | None:
    """The compiled kernel, or None: where ``STREAMFILTER_PURE`` asks for the
    references, where the kernel was not built, or where integers are
    big-endian (stored word hashes are little-endian, the kernel reads them as they lie)."""
    if os.environ.get(PURE_VARIABLE, "") not in ("", "0") or sys.byteorder != "little":
        return None
    try:
        from . import _kernel
    except ImportError:
        here = Path(__file__).resolve().parent
        if (here / "_kernel.c").exists():  # a source tree: its sources are there, the build is not
            warnings.warn(
                f"streamfilter is imported from the source tree at {here.parent}, where its compiled kernel "
                "is not built: it runs the pure-Python reference, several times slower. `pip install -e .` "
                f"there builds the kernel; {PURE_VARIABLE}=1 chooses the reference and silences this.",
                RuntimeWarning,
                stacklevel=2,
            )
        return None
    return _kernel  # type: ignore[no-any-return]


def kernel_mode() -> str:
    """``compiled`` or ``pure``: which of the two this process runs."""
    return "compiled" if compiled_kernel() is not None else "pure"
