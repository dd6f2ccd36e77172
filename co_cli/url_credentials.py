"""Credentials inside a URL (``user:pass@``, ``?api-key=...``) masked for display."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

# Query parameters whose value is a credential: api-key, api_key, key, token, access_token, secret, password,
# sig (signed URLs), auth... Matched on the name without '-' and '_', lower-cased.
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session", re.IGNORECASE)
# Fallback for text that urlsplit cannot take apart: userinfo before '@', and secret-looking parameters.
_USERINFO = re.compile(r"(?<=://)[^/?#@\s]*@")
_PARAM = re.compile(r"(?<=[?&;])([^=&;#\s]+)=([^&;#\s]*)")


def _secret_param(name: str) -> bool:
    return bool(_SECRET_PARAM.search(name.replace("-", "").replace("_", "")))


def mask_url_credentials(url: str) -> str:
    """``url`` with the password/user part and the values of credential-like query parameters replaced by
    ``***``; anything else (scheme, host, port, path, other parameters) as it is."""
    if "@" not in url and "=" not in url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_secret_param(name) for name, _ in pairs):
                query = urlencode([(n, MASK if _secret_param(n) else v) for n, v in pairs], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # e.g. a malformed port or IPv6 literal: mask by pattern instead
        masked = _USERINFO.sub(MASK + "@", url)
        return _PARAM.sub(lambda m: f"{m.group(1)}={MASK}" if _secret_param(m.group(1)) else m.group(0), masked)
