"""How messages say a count: "1 attempt", "3 attempts"."""

from __future__ import annotations

__all__ = ["counted"]


def counted(number: int, one: str, many: str | None = None) -> str:
    """``number`` with thousands separators, then ``one`` or ``many`` (``one`` + "s" by default)."""
    return f"{number:,} {one if number == 1 else many or one + 's'}"
