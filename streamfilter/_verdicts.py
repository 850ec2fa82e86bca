"""A judged batch's verdicts as columns, and their ``--verdicts`` lines.

``Engine.commit`` gives one ``Verdicts`` a batch: the verdict kinds and the
duplicates' matches beside the batch's ``Entries``. The command line writes
its outputs from these columns. A ``Verdict`` object, with its ``Post``, is
built only where a caller takes one, at the API's edge (``check()``,
``check_many()``, ``judge()``, ``filter()``): ``verdicts[at]``, or iterating.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from ._compiled import chosen, kernel
from ._post import Post, Verdict, VerdictKind, json_line
from ._prepared import Entries
from ._values import Rows

__all__ = ["Verdicts", "verdict_lines"]


class Verdicts(Rows[Verdict]):
    """One verdict a row of ``entries``: ``kinds``, and for a duplicate the
    post it copies (``duplicate_of``) and their ``similarity``; ``reasons``
    says why a row passed unjudged, or is invalid or skipped; ``record_ids``
    holds the ids read from invalid records, by row."""

    __slots__ = ("duplicate_of", "entries", "kinds", "reasons", "record_ids", "similarity")

    def __init__(
        self,
        entries: Entries,
        kinds: list[VerdictKind],
        reasons: list[str | None],
        duplicate_of: list[str | None],
        similarity: list[float | None],
        record_ids: dict[int, str] | None = None,
    ) -> None:
        self.entries = entries
        self.kinds = kinds
        self.reasons = reasons
        self.duplicate_of = duplicate_of
        self.similarity = similarity
        self.record_ids = record_ids or {}

    @classmethod
    def joined(cls, entries: Entries, parts: Sequence[Verdicts]) -> Verdicts:
        """The verdicts of a batch, ``entries``, judged in parts (``split_after_deletes``), in order."""
        if len(parts) == 1:
            return parts[0]
        record_ids: dict[int, str] = {}
        offset = 0
        for part in parts:
            record_ids.update({offset + at: record_id for at, record_id in part.record_ids.items()})
            offset += len(part)
        return cls(
            entries,
            [kind for part in parts for kind in part.kinds],
            [reason for part in parts for reason in part.reasons],
            [value for part in parts for value in part.duplicate_of],
            [value for part in parts for value in part.similarity],
            record_ids,
        )

    def __len__(self) -> int:
        return len(self.kinds)

    @property
    def lines(self) -> list[int]:
        return self.entries.lines

    @property
    def raws(self) -> list[object]:
        return self.entries.raws

    def row(self, at: int) -> Verdict:
        entries = self.entries
        return Verdict(
            self.kinds[at],
            entries.lines[at],
            entries.post(at),
            self.duplicate_of[at],
            self.similarity[at],
            self.reasons[at],
            entries.raws[at],
            self.record_ids.get(at),
        )

    def post(self, at: int) -> Post | None:
        return self.entries.post(at)

    def counts(self) -> Mapping[str, int]:
        """How many verdicts of each kind (``VerdictKind``'s values)."""
        if len(self.kinds) == 1:  # a sync call's one verdict, without building a Counter
            return {self.kinds[0]._value_: 1}
        return Counter(kind._value_ for kind in self.kinds)

    def ids(self) -> list[str]:
        """Each verdict's ``Verdict.post_id``: its post's id, an invalid
        record's own id where it was read, else ``line:N``."""
        record_ids = self.record_ids
        return [
            post_id if post_id is not None else record_ids[at] if at in record_ids else f"line:{line}"
            for at, (post_id, line) in enumerate(zip(self.entries.ids, self.entries.lines, strict=True))
        ]

    def json_lines(self) -> bytes:
        """The ``--verdicts`` lines, each ``Verdict.json_line()`` and a newline."""
        return verdict_lines(self.ids(), self.kinds, self.duplicate_of, self.similarity, self.reasons, self.lines)


def _c_verdict_lines(
    ids: list[str],
    kinds: list[VerdictKind],
    duplicate_of: list[str | None],
    similarity: list[float | None],
    reasons: list[str | None],
    lines: list[int],
) -> bytes:
    """``_py_verdict_lines``, in C (``_kernel_verdicts.c``); a batch with a
    lone surrogate, which has no UTF-8, is left to the Python loop."""
    written = kernel.verdict_lines(ids, kinds, duplicate_of, similarity, reasons, lines)
    return _py_verdict_lines(ids, kinds, duplicate_of, similarity, reasons, lines) if written is None else written


def _py_verdict_lines(
    ids: list[str],
    kinds: list[VerdictKind],
    duplicate_of: list[str | None],
    similarity: list[float | None],
    reasons: list[str | None],
    lines: list[int],
) -> bytes:
    """The ``--verdicts`` lines of these columns, each ``json_line`` and a
    newline, in UTF-8; a lone surrogate (in an invalid post's id) goes out as
    JSON's own ``\\udc00`` escape."""
    rows = zip(ids, kinds, duplicate_of, similarity, reasons, lines, strict=True)
    return "".join([json_line(*row) + "\n" for row in rows]).encode("utf-8", "backslashreplace")


verdict_lines = chosen(_c_verdict_lines, _py_verdict_lines)
