"""Generic JSON: id, text and time read from configurable dotted paths."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import ConfigError, InvalidRecordError
from .._normalize import has_retweet_prefix
from .._post import Post
from .._time import parse_timestamp
from ._base import post_id_of, text_of

__all__ = ["GenericAdapter", "lookup"]

_MISSING = object()


def lookup(record: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for part in path:
        if type(value) is dict or isinstance(value, Mapping):  # a dict, without the ABC's check
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


# Where the fields usually are, tried in order when a field is left at its
# default and the record does not have it.
_USUAL = {
    "id": ("id", "id_str", "uuid", "post_id"),
    "text": ("text", "full_text", "body", "message", "tweet"),
    "created_at": ("created_at", "timestamp", "time", "date", "createdAt"),
}


def _first(record: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> Any:
    return _found(record, paths)[0]


def _found(record: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> tuple[Any, tuple[str, ...]]:
    """The first value found under ``paths``, and its path; (None, ()) for none."""
    for path in paths:
        value = lookup(record, path)
        if value is not None:
            return value, path
    return None, ()


class GenericAdapter:
    """Any JSON object. Missing id or time are allowed; a missing text is not.

    A field left at its default also falls back to the usual names
    (``full_text``, ``body``, ``message`` for the text; ``id_str`` for the id;
    ``timestamp``, ``time``, ``date`` for the time). A field named on the
    command line is read from that path only.
    """

    name = "generic"

    def __init__(self, id_field: str = "id", text_field: str = "text", time_field: str = "created_at") -> None:
        self.id_field = id_field
        self.text_field = text_field
        self.time_field = time_field
        self._id = self._paths(id_field, "id_field")
        self._text = self._paths(text_field, "text_field")
        self._time = self._paths(time_field, "time_field")

    @staticmethod
    def _paths(dotted: str, option: str) -> tuple[tuple[str, ...], ...]:
        return tuple(_path(name, option) for name in _USUAL.get(dotted, (dotted,)))

    def matches(self, record: Mapping[str, Any]) -> bool:
        return _first(record, self._text) is not None

    def readable_id(self, record: Mapping[str, Any]) -> str | None:
        """The id of a record that makes no valid post, read as ``posts``
        reads it, where it is one (``post_id_of``)."""
        try:
            return post_id_of(_first(record, self._id), "id")
        except InvalidRecordError:
            return None

    def posts(self, record: Mapping[str, Any]) -> list[Post]:
        found = _first(record, self._text)
        if found is None:
            tried = " or ".join(".".join(path) for path in self._text)
            empty = [".".join(path) for path in self._text if path[0] in record and _first(record, (path,)) is None]
            if empty:  # there, but null or not text
                verb = "is" if len(empty) == 1 else "are"
                raise InvalidRecordError(f"no text: {' and '.join(empty)} {verb} null or not text (tried {tried})")
            fields = ", ".join(sorted(map(str, record))[:8]) or "none"
            raise InvalidRecordError(
                f"no text field: tried {tried}, and the record has {fields}; name its text with --text-field"
            )
        text = text_of(found, self.text_field)
        post_id = post_id_of(_first(record, self._id), f"id field {self.id_field}")
        time_value, time_path = _found(record, self._time)  # named by the field that holds it ("timestamp")
        timestamp = None if time_value is None else parse_timestamp(time_value, ".".join(time_path))
        return [
            Post(
                post_id,
                text,
                timestamp,
                None,
                has_retweet_prefix(text),
                "generic",
                record,
                _author(record),
            )
        ]


_AUTHOR_FIELDS = ("author", "user", "username", "screen_name", "handle")


def _author(record: Mapping[str, Any]) -> str | None:
    """The account of a generic record: the first of the usual fields that
    holds a name (or an object with one)."""
    for name in _AUTHOR_FIELDS:
        value = record.get(name)
        if value is None:
            continue
        if isinstance(value, Mapping):
            value = next((value[key] for key in ("screen_name", "username", "name", "id") if key in value), None)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return None
