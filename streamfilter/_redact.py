"""Secrets kept out of messages: a URL's password, token-like query, path-parameter and fragment values."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact"]

# query parameters whose values are credentials
_SECRET_NAMES = re.compile(r"(?i)(pass|secret|token|key|auth|sig|credential|jwt|bearer|session|code)")
_QUERY_PAIR = re.compile(r"([^&=?#]+)=([^&#]*)")
# a path segment's parameter (";jsessionid=..."), as servlet containers put a session in a URL
_PATH_PARAMETER = re.compile(r"(?<=;)([^;=/?#]+)=([^;/?#]*)")
# what a URL that urlsplit refuses may still carry: userinfo before an "@"
_RAW_USERINFO = re.compile(r"(?<=//)[^/?#@]*@")


def redact(url: str) -> str:
    """``url`` with its password and the values of credential-like query
    parameters replaced by ``***``, for messages and logs; so are those of
    its path parameters (``;jsessionid=…``) and of its fragment
    (``#access_token=…``, as OAuth's implicit flow puts them), and a
    fragment that names no parameter is replaced whole: a client never sends
    its fragment, so it tells a reader of the log nothing. A URL that cannot
    be parsed (``http://u:pw@[::1/x``) is redacted as text: whatever sits
    before an ``@`` after ``//``, every credential-like ``name=value``, and
    its fragment as above.
    Control characters are shown escaped, so a header or URL cannot forge a
    line of the log."""
    try:
        parts = urlsplit(url)
    except ValueError:
        text, hash_sign, fragment = url.partition("#")
        text = _PATH_PARAMETER.sub(_redact_pair, _RAW_USERINFO.sub("***@", text))
        return _printable(_QUERY_PAIR.sub(_redact_pair, text) + hash_sign + _redacted_fragment(fragment))
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # a lone userinfo is as often a token as a name
        netloc = f"{user}:***@{host}" if colon else f"***@{host}"
    path = _PATH_PARAMETER.sub(_redact_pair, parts.path)
    query = _QUERY_PAIR.sub(_redact_pair, parts.query)
    fragment = _redacted_fragment(parts.fragment)
    return _printable(urlunsplit(parts._replace(netloc=netloc, path=path, query=query, fragment=fragment)))


def _redacted_fragment(fragment: str) -> str:
    if "=" in fragment:
        return _QUERY_PAIR.sub(_redact_pair, fragment)
    return "***" if fragment else ""  # names no parameter: what it holds is unknown


def _redact_pair(pair: re.Match[str]) -> str:
    return f"{pair.group(1)}=***" if _SECRET_NAMES.search(pair.group(1)) else pair.group(0)


def _printable(text: str) -> str:
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
