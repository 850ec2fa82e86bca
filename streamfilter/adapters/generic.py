"""Generic JSON: id, text and time read from configurable dotted paths."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import ConfigError, InvalidRecordError
from .._normalize import has_retweet_prefix
from .._post import Post
from .._time import parse_timestamp
from ._base import text_of

__all__ = ["GenericAdapter", "lookup"]

_MISSING = object()


def lookup(record: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for part in path:
        if isinstance(value, Mapping):
            value = value.get(part, _MISSING)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
        if value is _MISSING:
            return None
    return value


def _path(dotted: str, option: str) -> tuple[str, ...]:
    parts = tuple(dotted.split("."))
    if not dotted or any(not part for part in parts):
        raise ConfigError(f"{option} must be a dotted path such as 'text' or 'payload.body', got {dotted!r}")
    return parts


class GenericAdapter:
    """Any JSON object. Missing id or time are allowed; a missing text is not."""

    name = "generic"

    def __init__(self, id_field: str = "id", text_field: str = "text", time_field: str = "created_at") -> None:
        self.id_field = id_field
        self.text_field = text_field
        self.time_field = time_field
        self._id = _path(id_field, "id_field")
        self._text = _path(text_field, "text_field")
        self._time = _path(time_field, "time_field")

    def matches(self, record: Mapping[str, Any]) -> bool:
        return lookup(record, self._text) is not None

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        text = text_of(lookup(record, self._text), self.text_field)
        post_id = lookup(record, self._id)
        if post_id is not None and not isinstance(post_id, str | int):
            raise InvalidRecordError(f"id field {self.id_field} is a {type(post_id).__name__}, not a string or number")
        time_value = lookup(record, self._time)
        timestamp = None if time_value is None else parse_timestamp(time_value)
        return [
            Post(
                None if post_id is None else str(post_id),
                text,
                timestamp,
                None,
                has_retweet_prefix(text),
                "generic",
                record,
            )
        ]
