"""A look at an LMDB file's header before it is mapped.

LMDB maps ``data.mdb`` into memory and trusts it: a file cut short (a copy
that stopped, a full disk during ``cp``) makes the first read past its end a
SIGBUS, which kills the process with no message. Its two meta pages say how
many pages the file holds, so a file shorter than that is refused here,
with what to do, before LMDB ever maps it.

The meta page's layout (``MDB_meta`` in LMDB's mdb.c, 64-bit): a 16-byte page
header, then magic (u32), version (u32), address (u64), map size (u64), two
``MDB_db`` records of 48 bytes (the first one's leading u32 is the page
size), the last page number (u64) and the transaction id (u64).
"""

from __future__ import annotations

import mmap
import struct
import time
from pathlib import Path

from ..._exceptions import StoreError

__all__ = ["check_header", "check_index_file"]

_MAGIC = 0xBEEFC0DE
_PAGE_HEADER = 16
_META = struct.Struct("<IIQQI44x48xQQ")  # magic, version, address, map size, page size, last page, txn id
_REMEDY = (
    "restore data.mdb from a backup, or move the directory away and start a new index "
    "(its posts are then judged novel once more)"
)


# LMDB makes lock.mdb, then data.mdb, and writes data.mdb's two meta pages
# under its lock; a process that looks at the file in between, before it
# opens LMDB, finds it empty or short. Such a file is looked at again, for
# at most this many seconds, before it is refused.
_CREATION_WAIT = 2.0


def check_index_file(directory: Path) -> None:
    """``check_header`` of ``directory``'s data.mdb, waiting while another
    process may be creating it: LMDB's lock file is there, and the data file
    is shorter than the two pages a new index starts with. Several replays
    started at once on one new index otherwise refused it as empty."""
    data = directory / "data.mdb"
    deadline = time.monotonic() + _CREATION_WAIT
    while True:
        try:
            check_header(data)
            return
        except StoreError:
            if not _being_created(directory, data) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def _being_created(directory: Path, data: Path) -> bool:
    try:
        return (directory / "lock.mdb").exists() and data.stat().st_size < 2 * mmap.PAGESIZE
    except OSError:
        return False


def check_header(data: Path) -> None:
    """Refuse ``data`` (an LMDB ``data.mdb``) when its header is not LMDB's or
    says the file should be longer than it is; a missing file is fine (a new
    index)."""
    try:
        with data.open("rb") as file:
            head = file.read(_PAGE_HEADER + _META.size)
            size = data.stat().st_size
            if size == 0:
                raise StoreError(
                    f"{data} is empty (0 bytes), so it is no LMDB index: remove it, or choose another --db"
                )
            first = _meta(head, data)
            page_size = first[4]
            if not 512 <= page_size <= 1 << 16 or page_size & (page_size - 1):
                raise StoreError(f"{data} is damaged: its header gives a page size of {page_size}; {_REMEDY}")
            file.seek(page_size)
            second_head = file.read(_PAGE_HEADER + _META.size)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {data}: {exc.strerror or exc}") from exc
    metas = [first]
    if len(second_head) == len(head):
        second = _META.unpack_from(second_head, _PAGE_HEADER)
        if second[0] == _MAGIC:
            metas.append(second)
    # the newer meta page is the one LMDB reads; the file must hold every page it names
    newest = max(metas, key=lambda meta: meta[6])
    needed = (newest[5] + 1) * page_size
    if size < needed:
        raise StoreError(
            f"{data} is truncated: it is {size:,} bytes, and its header says the index holds {needed:,}; "
            f"LMDB would crash reading it. {_REMEDY[0].upper()}{_REMEDY[1:]}"
        )


def _meta(head: bytes, data: Path) -> tuple[int, ...]:
    if len(head) < _PAGE_HEADER + _META.size:
        raise StoreError(f"{data} is too short ({len(head)} bytes) to be an LMDB index; {_REMEDY}")
    meta = _META.unpack_from(head, _PAGE_HEADER)
    if meta[0] != _MAGIC:
        raise StoreError(f"{data} is no LMDB index (its first bytes are not LMDB's header); {_REMEDY}")
    return meta
