"""Every member of every campaign, with its text: ``report --members FILE``.

The clusters keep their first ``MAX_MEMBERS`` for the page; an analyst who
wants them all gets them here. Which clusters are campaigns is known only
once the whole stream is read, so each post joined to a cluster goes to a
spool on disk as it is read, and the campaigns' rows are written from it at
the end: memory stays as it was, whatever the campaigns' size.
"""

from __future__ import annotations

import csv
import re
import tempfile
from collections.abc import Collection
from datetime import UTC, datetime

__all__ = ["MemberSpool"]

HEADER = ("campaign", "time", "platform", "account", "post", "text")

# A cell a spreadsheet may read as a formula, written after a quote: one that
# starts with a tab, a CR (OWASP's list) or a null (ASVS 1.2.10), or with =, +,
# - or @, in ASCII or full width, spaces before them or not.
_FORMULA = re.compile(r"[\t\r\x00]|\s*[=+\-@\uff1d\uff0b\uff0d\uff20]")


class MemberSpool:
    """The posts of every cluster, as they join it; ``write_csv`` keeps the campaigns'."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8", newline="")
        self._rows = csv.writer(self._file)

    def add(
        self,
        cluster_id: str,
        timestamp: float | None,
        platform: str | None,
        account: str | None,
        post_id: str | None,
        text: str,
    ) -> None:
        when = "" if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")
        when = when.replace("+00:00", "Z")  # as the JSON's members give it
        self._rows.writerow((cluster_id, when, platform or "", account or "", post_id or "", text))

    def write_csv(self, path: str, campaign_ids: Collection[str]) -> int:
        """The rows of the clusters in ``campaign_ids`` to ``path``, as CSV
        with a header, in the order the posts were read; how many."""
        wanted = set(campaign_ids)
        written = 0
        self._file.seek(0)
        with open(path, "w", encoding="utf-8", newline="") as out:
            rows = csv.writer(out)
            rows.writerow(HEADER)
            for row in csv.reader(self._file):
                if row[0] in wanted:
                    rows.writerow([_neutral(cell) for cell in row])
                    written += 1
        return written

    def close(self) -> None:
        self._file.close()


def _neutral(cell: str) -> str:
    """A cell as written: one that starts like a formula gets a leading quote."""
    return "'" + cell if _FORMULA.match(cell) else cell
