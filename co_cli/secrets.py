"""Credentials: text that looks like a secret never becomes a memory, and a URL's credentials are masked
whenever it is shown.

Every path that stores a memory (the CLI, the agent's tool, the extractor, import) calls ``find_secret``
first; the refusal names the kind of credential and never quotes it.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


@functools.cache
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The credential patterns, compiled on first use (``co --help`` and the listings never need them)."""
    return (
        ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")),
        ("an API key (sk-...)", re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{16,}")),
        ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
        ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
        ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
        ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}")),
        ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
        ("a Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
        ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
        ("a password in a URL", re.compile(r"[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)),
        (
            "a password or key assignment",
            re.compile(
                r"\b(?:password|passwd|pwd|passphrase|secret|api[_\-]?key|access[_\-]?key|auth[_\-]?token|token)"
                r"\s*[=:]\s*['\"]?[^\s'\"]{4,}",
                re.IGNORECASE,
            ),
        ),
    )


# A run of token characters long enough to be a generated secret (base64, base62, hex with letters).
_TOKEN = re.compile(r"[A-Za-z0-9+/_\-=]{32,}")
ENTROPY_BITS_PER_CHAR = 4.3
"""Shannon entropy above which a long token counts as random (a generated base64 key of 32+ characters is
around 4.5; long code identifiers stay near 4.0-4.25; hex such as a commit hash never exceeds 4)."""
MIXED_ENTROPY_BITS_PER_CHAR = 3.9
"""A lower bar for tokens that mix upper case, lower case and at least four digits, as generated keys do and
identifiers rarely do."""


def shannon_entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def _random_token(token: str) -> bool:
    entropy = shannon_entropy(token)
    if entropy > ENTROPY_BITS_PER_CHAR:
        return True
    digits = sum(c.isdigit() for c in token)
    upper = sum(c.isupper() for c in token)
    lower = sum(c.islower() for c in token)
    return entropy > MIXED_ENTROPY_BITS_PER_CHAR and digits >= 4 and upper >= 2 and lower >= 2


def find_secret(text: str) -> str | None:
    """What kind of credential ``text`` seems to hold (e.g. "an AWS access key"), or None."""
    for kind, pattern in _patterns():
        if pattern.search(text):
            return kind
    for match in _TOKEN.finditer(text):
        token = match.group()
        if "/" in token.strip("/") and token.count("/") > 2:  # a path, not a key
            continue
        if _random_token(token):
            return "a long random token"
    return None


def refusal(kind: str) -> str:
    """The one-line message for a refused memory (never the secret itself)."""
    return f"not stored: the text looks like a credential ({kind}); secrets are never kept as memories"


# ----- credentials inside a URL (``user:pass@``, ``?api-key=...``), masked for display -----
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
