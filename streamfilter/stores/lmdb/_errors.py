"""How the LMDB store words its failures: a full disk, a damaged file, any other error."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path
from typing import NoReturn

from ..._exceptions import StoreError, StoreFullError

__all__ = ["DECODING_ERRORS", "map_error", "raise_failure"]

# What the decoders of a damaged run or record raise
DECODING_ERRORS = (ValueError, UnicodeDecodeError, struct.error, IndexError, KeyError)


def raise_failure(failure: BaseException, cause: BaseException) -> NoReturn:
    """Raise what ``_failed`` made of ``cause``: ``cause`` itself as it was, or another error from it."""
    if failure is cause:
        raise cause
    raise failure from cause


def _free_bytes(path: Path) -> int | None:
    try:
        stats = os.statvfs(path if path.exists() else path.parent)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def map_error(exc: BaseException, context: str, path: Path | None = None) -> StoreError:
    code = getattr(exc, "errno", None)
    message = str(exc).strip() or type(exc).__name__
    free = _free_bytes(path) if path is not None else None
    # LMDB reports a failed write of its pages as EIO on some filesystems
    # (tmpfs among them), so a near-empty disk is read as "full" too.
    if (
        code in (errno.ENOSPC, errno.EDQUOT)
        or "No space left" in message
        or (("Input/output error" in message or code == errno.EIO) and free is not None and free < (8 << 20))
    ):
        where = "" if free is None else f", {free} bytes free"
        return StoreFullError(
            f"{context}: the disk is full ({message}{where}); "
            "committed data is intact: free space, then rerun with --resume"
        )
    if "MDB_CORRUPTED" in message or "MDB_PAGE_NOTFOUND" in message or "MDB_INVALID" in message:
        return StoreError(
            f"{context}: the index is damaged ({message}); it cannot be repaired in place: "
            "replay the stream into a new --db directory"
        )
    return StoreError(f"{context}: {message}")
