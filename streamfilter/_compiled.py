"""Where the compiled kernel is found (``_kernel*.c``, built by ``pip install``).

Standard library only, so the light modules (the normaliser, JSON, times)
can ask for the kernel without importing numpy.
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["compiled_kernel"]


def compiled_kernel() -> ModuleType | None:
    """The compiled kernel, or None where it was not built (or where integers
    are big-endian: stored word hashes are little-endian, the kernel reads them as they lie)."""
    if sys.byteorder != "little":
        return None
    try:
        from . import _kernel
    except ImportError:
        return None
    return _kernel  # type: ignore[no-any-return]
