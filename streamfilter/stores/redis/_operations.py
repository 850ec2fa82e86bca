"""What a Redis transaction and a Cluster recording use of their store.

``RedisTransaction`` and ``ClusterRecording`` are handed their ``RedisStore``
as this Protocol, so they depend on what they use, not on the store's
module: the store imports them, and nothing of theirs imports it back. The
members are the store's own (``_store``), private to this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..._values import Matches, Sketches
from ._layout import Layout

__all__ = ["RedisOperations"]


class RedisOperations(Protocol):
    """The parts of a ``RedisStore`` its transactions and recordings reach."""

    cluster: bool
    prefix: str
    retry_for: float
    clock_location: str
    _client: Any
    _layout: Layout
    _prefix_bytes: bytes
    _clock_key: bytes
    _config_key: bytes
    _serial_key: bytes
    _filing_key: bytes
    # the registered scripts (redis-py's Script objects)
    _commit: Any
    _filing: Any
    _raise_clock: Any
    _read_batch: Any

    @property
    def location(self) -> str: ...

    def _retrying(self, what: str, operation: Callable[[], Any]) -> Any: ...

    def _on_nodes(
        self,
        what: str,
        script: str,
        keys: Sequence[bytes],
        args_of: Callable[[int], list[Any]] = ...,
        leading: Sequence[Any] = ...,
    ) -> list[Any]: ...

    def _read_fields(
        self, what: str, keys: Sequence[bytes], fields: Sequence[Sequence[bytes]]
    ) -> list[list[bytes | None]]: ...

    def _parts(self) -> dict[int, int]: ...

    def _parts_for(self, posts: Mapping[int, int], entries: int) -> dict[int, tuple[int, int]]: ...

    def _drop_dead(self, parts: Mapping[int, int], clock: float) -> None: ...

    def _commit_progress(self, progress: Mapping[str, int | str] | None) -> None: ...

    def _judge_again(self, sketches: Sketches, depth: int) -> Matches: ...
