"""The one place where the compiled kernel is chosen, or its pure-Python reference.

The kernel (``_kernel*.c``) is built by ``pip install``; each of its
functions computes what a Python twin beside it computes, value for value,
and the module that holds the two binds its name to one of them at import
(``chosen``). ``STREAMFILTER_PURE=1`` in the environment, before streamfilter is
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
from typing import Any, TypeVar

__all__ = ["PURE_VARIABLE", "chosen", "compiled_kernel", "from_kernel", "kernel", "kernel_mode"]

_Twin = TypeVar("_Twin")

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


def chosen(compiled: _Twin, reference: _Twin) -> _Twin:
    """``compiled`` where the kernel is in use, else ``reference``.

    The one choice between a compiled function (or class) and its Python
    twin, made once where the twin is defined, as simplejson's
    ``make_scanner = c_make_scanner or py_make_scanner``: every caller uses
    the bound name, and tests hold the two to each other by their own names
    (``_c_…`` and ``_py_…``)."""
    return compiled if compiled_kernel() is not None else reference


# The kernel module, for the ``_c_…`` twins: only ever reached where ``chosen`` chose them.
kernel: Any = compiled_kernel()


def from_kernel(name: str) -> Any:
    """The kernel's ``name``, to be ``chosen`` as it is; None where there is no kernel."""
    return None if kernel is None else getattr(kernel, name)
