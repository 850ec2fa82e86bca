"""How messages say a count ("1 attempt", "3 attempts"), a type ("an int64") and a value."""

from __future__ import annotations

__all__ = ["a_type", "counted", "shown"]

_SHOWN_CHARS = 40


def counted(number: int, one: str, many: str | None = None) -> str:
    """``number`` with thousands separators, then ``one`` or ``many`` (``one`` + "s" by default)."""
    return f"{number:,} {one if number == 1 else many or one + 's'}"


def a_type(value: object) -> str:
    """The name of ``value``'s type with its article: "a float", "an int64"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def shown(value: object) -> str:
    """``value`` as a reason quotes it: a long number or string cut in the middle."""
    text = _digits(value) if isinstance(value, int) else repr(value)
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:16]}…{text[-8:]} ({len(text):,} characters)"


def _digits(number: int) -> str:
    try:
        return repr(number)
    except ValueError:  # more digits than Python converts
        return f"{'-' if number < 0 else ''}(a number of over 4,300 digits)"
