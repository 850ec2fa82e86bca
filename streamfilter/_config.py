"""FilterConfig: every setting of a filter, validated, with (bands, rows) derived."""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from ._exceptions import ConfigError
from ._lsh import BandPlan, choose_bands
from ._normalize import NORMALIZER_VERSION
from ._post import RetweetPolicy
from ._shingle import MAX_SHINGLE_SIZE

__all__ = ["FilterConfig", "parse_duration"]

# Bump when word or shingle hashing, MinHash permutations or band keys change
# (CHANGELOG.md says what each changed).
SKETCH_VERSION = 9

# The longest TTL: past it, expiry times overflow what Redis takes (0 is forever).
MAX_TTL_SECONDS = 100 * 31_557_600
_DURATION = regex.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", regex.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``15m``, ``24h``, ``7d`` or ``2w``; ``0`` means forever.

    A number without its unit is refused (``7``: seconds, or days?), save 0."""
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(
            f"cannot read duration {text!r}: use a number with s, m, h, d or w, "
            "such as 90s, 24h, 7d, or 0 for no expiry"
        )
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit and number != 0:
        raise ConfigError(
            f"duration {text!r} has no unit: write {match.group(1)}s, {match.group(1)}m, {match.group(1)}h, "
            f"{match.group(1)}d or {match.group(1)}w (0 for no expiry)"
        )
    return number * _UNIT_SECONDS[unit]


@dataclass(frozen=True)
class FilterConfig:
    """How posts are compared.

    The defaults were measured on real airline tweets with injected variants
    (docs/design/tuning.md).

    - ``jaccard_threshold``: a post is a duplicate when the set of its runs of
      1 to ``shingle_size`` words (its words and word pairs, by default) has at
      least this Jaccard similarity to that of a live earlier post.
    - ``shingle_size``: words per shingle for MinHash and the band keys (the
      candidates), and the longest run of words verification compares.
    - ``num_perm``: MinHash permutations; ``bands * rows`` always equals it.
    - ``bands``/``rows``: leave both None to derive them from the threshold.
    - ``seed``: seeds word hashing, the permutations and so every band key.
      None (the default) leaves it to the index: a new index draws a secret
      seed and pins it, so band keys cannot be computed offline and posts
      crafted to share them with an original cannot be made; an existing
      index keeps its own. Give one to compare two runs verdict for verdict.
    - ``ttl_seconds``: how long, in event time, a post keeps catching copies; 0 = forever.
    - ``retweet_policy``: see RetweetPolicy.
    - ``batch_size``/``max_delay``: internal batching. A live source's posts
      are judged as soon as the filter is free, up to ``batch_size`` at a
      time; a replayed file's batch (``Chunks``) is flushed when full or
      ``max_delay`` seconds after its first line arrived.
    - ``max_candidates_per_band``: newest posts checked per band key, which
      bounds the work of very common band keys.
    - ``sketch_processes``: worker processes that sketch a replayed file's
      lines beside the store stage (0 = sketch in this process); None picks
      one per spare core, at most two, and on two cores a second once the
      sketching holds the replay back. Verdicts are the same either way.
    - ``honour_deletes``: a platform's delete notice (a Twitter ``delete``, a
      Mastodon ``delete`` event, a Bluesky post deleted) makes the filter
      forget that post, once the batch it arrives in is committed, so a
      later copy of it is novel again. False keeps deleted posts in the
      index until they expire. The notice itself is ``skipped`` either way.
    """

    jaccard_threshold: float = 0.5
    shingle_size: int = 2
    num_perm: int = 32
    bands: int | None = None
    rows: int | None = None
    seed: int | None = None
    ttl_seconds: float = 7 * 86400
    retweet_policy: RetweetPolicy = RetweetPolicy.CONTENT
    batch_size: int = 2048
    max_delay: float = 0.002
    max_candidates_per_band: int = 8
    purge_limit: int = 1024
    max_miss_rate: float = 0.02
    sketch_processes: int | None = None
    honour_deletes: bool = True
    plan: BandPlan = field(init=False, repr=False, compare=False)
    """The bands and rows this config runs with, and their miss and false-candidate rates (derived)."""

    def __post_init__(self) -> None:
        if not isinstance(self.retweet_policy, RetweetPolicy):
            try:
                object.__setattr__(self, "retweet_policy", RetweetPolicy(self.retweet_policy))
            except ValueError:
                raise ConfigError(
                    f"retweet_policy must be one of content, drop, keep; got {self.retweet_policy!r}"
                ) from None
        _check(
            0.0 < self.jaccard_threshold <= 1.0,
            f"jaccard_threshold must be in (0, 1], got {self.jaccard_threshold!r}",
        )
        _check(
            isinstance(self.shingle_size, int) and 1 <= self.shingle_size <= MAX_SHINGLE_SIZE,
            f"shingle_size must be an integer from 1 to {MAX_SHINGLE_SIZE}, got {self.shingle_size!r}",
        )
        _check(
            isinstance(self.num_perm, int) and 1 <= self.num_perm <= 1024,
            f"num_perm must be an integer from 1 to 1024, got {self.num_perm!r}",
        )
        _check(
            self.seed is None
            or (isinstance(self.seed, int) and not isinstance(self.seed, bool) and 0 <= self.seed < 2**32),
            f"seed must be None (the index's own) or an integer in [0, 2**32), got {self.seed!r}",
        )
        _check(
            isinstance(self.ttl_seconds, int | float) and 0 <= self.ttl_seconds <= MAX_TTL_SECONDS,
            f"ttl_seconds must be from 0 (never expire) to {MAX_TTL_SECONDS:,} (100 years), got {self.ttl_seconds!r}",
        )
        _check(
            isinstance(self.batch_size, int) and 1 <= self.batch_size <= 65536,
            f"batch_size must be from 1 to 65536, got {self.batch_size!r}",
        )
        _check(self.max_delay >= 0, f"max_delay must be >= 0 seconds, got {self.max_delay!r}")
        _check(self.max_candidates_per_band >= 1, "max_candidates_per_band must be >= 1")
        _check(self.purge_limit >= 1, "purge_limit must be >= 1")
        _check(0.0 < self.max_miss_rate < 1.0, "max_miss_rate must be in (0, 1)")
        _check(
            self.sketch_processes is None
            or (isinstance(self.sketch_processes, int) and 0 <= self.sketch_processes <= 64),
            f"sketch_processes must be None or an integer from 0 to 64, got {self.sketch_processes!r}",
        )
        if self.bands is None and self.rows is None:
            plan = choose_bands(self.jaccard_threshold, self.num_perm, self.max_miss_rate)
        else:
            _check(
                self.bands is not None and self.rows is not None and self.bands * self.rows == self.num_perm,
                f"bands * rows must equal num_perm ({self.num_perm}); got bands={self.bands}, rows={self.rows}. "
                "Give both, or neither to derive them from the threshold",
            )
            assert self.bands is not None and self.rows is not None
            plan = BandPlan(self.bands, self.rows, self.jaccard_threshold)
        object.__setattr__(self, "plan", plan)
        object.__setattr__(self, "bands", plan.bands)
        object.__setattr__(self, "rows", plan.rows)

    def fingerprint(self) -> dict[str, int | str | None]:
        """The settings that shape signatures and band keys; an index pins
        these (a seed of None: the index's own, drawn when it is created)."""
        assert self.bands is not None and self.rows is not None
        return {
            "shingle_size": self.shingle_size,
            "num_perm": self.num_perm,
            "bands": self.bands,
            "rows": self.rows,
            "seed": self.seed,
            "normalizer_version": NORMALIZER_VERSION,
            "sketch_version": SKETCH_VERSION,
        }


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
