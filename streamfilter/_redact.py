"""Secrets kept out of messages: a URL's password and token-like query values."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact"]

# query parameters whose values are credentials
_SECRET_NAMES = re.compile(r"(?i)(pass|secret|token|key|auth|sig|credential)")
_QUERY_PAIR = re.compile(r"([^&=]+)=([^&]*)")


def redact(url: str) -> str:
    """``url`` with its password and the values of credential-like query
    parameters replaced by ``***``, for messages and logs; any other text is
    returned as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # a lone userinfo is as often a token as a name
        netloc = f"{user}:***@{host}" if colon else f"***@{host}"
    query = _QUERY_PAIR.sub(
        lambda pair: f"{pair.group(1)}=***" if _SECRET_NAMES.search(pair.group(1)) else pair.group(0), parts.query
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))
