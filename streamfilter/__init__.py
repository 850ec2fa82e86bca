"""streamfilter: filter near-duplicate posts out of social-media streams as they arrive."""

from ._config import FilterConfig, parse_duration
from ._exceptions import (
    ConfigError,
    ConfigMismatchError,
    InvalidRecordError,
    MissingDependencyError,
    SourceError,
    StoreError,
    StoreFullError,
    StreamFilterError,
)
from ._filter import StreamFilter
from ._lsh import BandPlan, candidate_probability, choose_bands
from ._normalize import normalize
from ._post import Post, RetweetPolicy, Verdict, VerdictKind
from .stores import BandStore, LMDBStore, MemoryStore, RedisStore

__version__ = "0.1.0"

__all__ = [
    "BandPlan",
    "BandStore",
    "ConfigError",
    "ConfigMismatchError",
    "FilterConfig",
    "InvalidRecordError",
    "LMDBStore",
    "MemoryStore",
    "RedisStore",
    "MissingDependencyError",
    "Post",
    "RetweetPolicy",
    "SourceError",
    "StoreError",
    "StoreFullError",
    "StreamFilter",
    "StreamFilterError",
    "Verdict",
    "VerdictKind",
    "candidate_probability",
    "choose_bands",
    "normalize",
    "parse_duration",
]
