"""The one error tree that streamfilter raises.

    StreamFilterError
    ├── ConfigError            a setting is out of range, or options contradict each other
    │   └── ConfigMismatchError  an index was built with other signature/band settings
    ├── InvalidRecordError     one input record cannot be turned into a post (carries line, reason)
    ├── StoreError             the band store failed (lmdb or redis errors are mapped to this)
    │   └── StoreFullError     the disk (not the map) is full; committed data is intact
    ├── SourceError            a live stream refused us (401, 404…) or stayed down past max_retries
    └── MissingDependencyError an optional extra is not installed; says which pip install fixes it

Errors from lmdb and redis are turned into these at the store boundary, and
those of httpx and wsproto at the live source, so callers never need to
import a third-party library to handle a failure.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConfigMismatchError",
    "InvalidRecordError",
    "MissingDependencyError",
    "SourceError",
    "StoreError",
    "StoreFullError",
    "StreamFilterError",
]


class StreamFilterError(Exception):
    """Root of every error that streamfilter raises on purpose."""


class ConfigError(StreamFilterError, ValueError):
    """A setting is invalid; the message says which one and what to change."""


class ConfigMismatchError(ConfigError):
    """The index on disk was built with settings that shape signatures differently."""

    def __init__(self, location: str, differences: dict[str, tuple[object, object]]) -> None:
        self.location = location
        self.differences = differences
        detail = ", ".join(
            f"{name}: index has {stored!r}, requested {requested!r}"
            for name, (stored, requested) in sorted(differences.items())
        )
        if differences.keys() & _CODE_VERSIONS:
            # no setting brings back another version's normaliser or sketches
            advice = (
                "it was built by another version of streamfilter, whose posts would no longer match this one's: "
                "use a new index (another directory, or another Redis prefix) and replay into it what must stay "
                "catchable"
            )
        else:
            advice = "open it with the stored settings, or use a new index (another directory, or another Redis prefix)"
        super().__init__(f"index at {location} was built with different settings ({detail}); {advice}")


# The fingerprint's entries that only a change of streamfilter's code moves.
_CODE_VERSIONS = frozenset({"normalizer_version", "sketch_version"})


class InvalidRecordError(StreamFilterError, ValueError):
    """A record cannot be turned into a post.

    ``reason`` is a short machine-friendly explanation, ``line`` the 1-based
    input line when the record came from a file or stream.
    """

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.reason = reason
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{reason}")


class StoreError(StreamFilterError):
    """The band store failed; committed data is left as it was."""


class StoreFullError(StoreError):
    """The disk holding the store is full. Free space, then resume."""


class MissingDependencyError(StreamFilterError, ImportError):
    """An optional extra is needed for this feature."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs the optional extra {extra!r}; install it with: pip install 'streamfilter[{extra}]', "
            f"or in a clone of streamfilter: pip install -e '.[{extra}]'"
        )


class SourceError(StreamFilterError):
    """A live source that cannot be followed: refused, not found, or down for good."""
