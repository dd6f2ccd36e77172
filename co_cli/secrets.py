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
        (
            "a password in a URL",
            re.compile(r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE),
        ),
        (
            "a webhook URL",
            re.compile(
                r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{8,}"
                r"|discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{8,}"
                r"|\.webhook\.office\.com/\S{16,}",
                re.IGNORECASE,
            ),
        ),
        (
            "an authorization header",
            re.compile(
                r"\b(?:authorization\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?|bearer\s+|basic\s+)"
                r"(?=[A-Za-z._~+/\-]*\d)[A-Za-z0-9._~+/\-]{12,}",
                re.IGNORECASE,
            ),
        ),
        (
            "a Hugging Face, npm or PyPI token",
            re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{40,})"),
        ),
        ("a SendGrid key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}")),
    )


_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.\-])[\"']?(?P<name>[A-Za-z0-9_.\-]+)[\"']?\s*(?P<sep>=>|=|:)\s*(?P<quote>[\"']?)"
    r"(?P<value>[^\s\"',;]{3,})"
)
"""Any ``name = value`` (the name is checked apart: one pattern that did both would backtrack quadratically)."""
_SECRET_NAME = re.compile(
    r"password|passwd|passphrase"  # DB_PASSWORD, PGPASSWORD, db.password
    r"|(?:^|[_.\-])(?:secret|token|pwd|pass|auth|credentials?|apikey"
    r"|(?:api|access|secret|private|account|master|signing|encryption|client|auth|app|shared)[_.\-]?key)(?:$|[_.\-])",
    re.IGNORECASE,
)
"""A name that says it holds a credential: GITHUB_TOKEN, MYSQL_PWD, access_token, client_secret, AccountKey,
api-key (not max_tokens, TOKENIZERS_PARALLELISM or bypass)."""


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (``GITHUB_TOKEN``, ``PGPASSWORD``, ``client_secret``)."""
    return bool(_SECRET_NAME.search(name))


_PLACEHOLDER = re.compile(
    r"^(?:\$|<|\{|%|\*{3}|x{3,}$)|^(?:none|null|nil|true|false|yes|no|required|optional|unset|empty|redacted)$",
    re.IGNORECASE,
)


def _assignment(text: str) -> bool:
    """A credential assignment whose value is not a placeholder (``$VAR``, ``<your key>``, ``${{ secrets.X }}``).
    After a bare ``:`` (prose: "auth: uses SSO") the value must look generated: a digit or a symbol in it, or
    16+ characters."""
    for match in _ASSIGNMENT.finditer(text):
        if not _SECRET_NAME.search(match.group("name")):
            continue
        value = match.group("value")
        if _PLACEHOLDER.search(value):
            continue
        if match.group("sep") == ":" and not match.group("quote") and value.isalpha() and len(value) < 16:
            continue
        return True
    return False


_SPOKEN = re.compile(
    r"\b(?P<word>pass(?:word|wd|phrase|code)|pin(?:\s+(?:code|number))?|(?:api|access|secret|private)\s+key|token)"
    r"(?:\s+(?:for|of|on|to|at|used|needed|required|that|which)\s+[\w.@\-]+(?:\s+[\w.@\-]+){0,4})?"
    r"\s*(?P<sep>\bis\b|\bwas\b|=|:)\s*(?P<quote>[\"'“‘`]?)(?P<value>[^\s\"'”’`,;]+)(?P<rest>\s*\S?)",
    re.IGNORECASE,
)
_SET_TO = re.compile(
    r"\b(?:set|changed?|reset|updated?)\s+(?:\w+\s+){0,2}(?P<word>pass(?:word|wd|phrase|code)|pin)"
    r"\s+to\s+(?P<quote>[\"'“‘`]?)(?P<value>[^\s\"'”’`,;]+)",
    re.IGNORECASE,
)
_NOT_A_VALUE_TEXT = """
    a an the my your our their his her its this that these those what which where how and or but so for from
    to of with by in on at as is was be been being not never no now still also just only always usually same
    different required optional needed set stored saved kept managed handled rotated changed reset updated expired
    wrong correct missing empty unknown long short strong weak secure safe valid invalid secret private hidden
    encrypted hashed generated shared given sent used available unset none null redacted here there too very
    somewhere elsewhere inside written typed listed mentioned provided supplied configured ok okay fine"""
_NOT_A_VALUE = frozenset(_NOT_A_VALUE_TEXT.split())
"""Words that end a sentence about a password without being one ("the password is stored ...")."""


def _spoken(text: str) -> bool:
    """A password, PIN or token given in words: "my password is tulip", "the Jenkins password is hunter2",
    "the token for the staging API is abc123", "pin: 4821", "changed my password to tulip". Unless quoted, the
    value must not be an ordinary word of a sentence ("the password is stored in the vault"); after a bare ``:``
    (a label: "The password: field ...") it must end the sentence or hold a digit; a PIN needs three digits."""
    found = [(m.group("word"), m.group("value"), m.group("sep"), m.group("rest"), m.group("quote"))
             for m in _SPOKEN.finditer(text)]  # fmt: skip
    found += [(m.group("word"), m.group("value"), "to", "", m.group("quote")) for m in _SET_TO.finditer(text)]
    for word, raw, sep, rest, quote in found:
        value = raw.rstrip(".!?)")
        if len(value) < 3 or (not quote and value.lower() in _NOT_A_VALUE) or _PLACEHOLDER.search(value):
            continue
        digits = sum(c.isdigit() for c in value)
        if word.lower().startswith("pin") and digits < 3:
            continue
        if sep == ":" and not digits and rest.strip() not in ("", ".", ";", ","):
            continue
        return True
    return False


_HEX_OR_UUID = re.compile(
    r"(?<![A-Za-z0-9])(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-fA-F]{32,})(?![A-Za-z0-9])"
)
_IDENTIFIER_BEFORE = re.compile(
    r"\b(?:commit|commits|sha|sha1|sha256|hash|checksum|digest|revision|rev|id|ids|uuid|identifier|session|"
    r"request|trace|build|run|version|object|blob|tree|image)\b\W*(?:is\s+|was\s+)?\W*$",
    re.IGNORECASE,
)


def _hex_key(text: str) -> bool:
    """A UUID or a run of 32+ hex digits (API keys, webhook secrets), unless the words just before it say what
    identifier it is ("commit 3f9a…", "session id 0190…")."""
    for match in _HEX_OR_UUID.finditer(text):
        if not _IDENTIFIER_BEFORE.search(text[max(0, match.start() - 40) : match.start()]):
            return True
    return False


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
    if _assignment(text):
        return "a password, token or key assignment"
    if _spoken(text):
        return "a password, PIN or token given in words"
    if _hex_key(text):
        return "a hexadecimal key or UUID"
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
