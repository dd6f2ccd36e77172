"""Turn any failure of a model request (or of the local work around it) into one clear line for the user."""

from __future__ import annotations

import errno
import socket
import ssl
from typing import Literal

HintPlace = Literal["repl", "print", "api"]
"""Where an error is read: at co's prompt, where slash commands work; after a run without a prompt (``-p``, a
pipe); or by a client of ``co serve``'s API."""

RETOLD: dict[str, dict[HintPlace, str]] = {
    "/retry to send it again": {
        "print": "run it again (`co chat -c` continues this session)",
        "api": "send the request again",
    },
    "/retry to try again": {"print": "run it again", "api": "send the request again"},
    "/retry when it is up": {
        "print": "run it again when it is up (`co chat -c` continues this session)",
        "api": "send the request again when it is up",
    },
    "then /retry": {"print": "then run it again", "api": "then send the request again"},
    "with /retry": {"print": "by running it again", "api": "by sending the request again"},
    "try /compact": {
        "print": "continue with `co chat -c` and /compact",
        "api": "send fewer or shorter messages, or start a new chat",
    },
    "(/model)": {"print": "(-m or the model setting)", "api": "(the request's model)"},
}
"""The hints of the lines below that name a slash command, and what works instead where none can be typed."""

# OS errors that mean the network, not this machine, failed.
NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EHOSTDOWN,
        errno.ENETRESET,
    }
)
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EPIPE})
LOCAL_HINTS = {
    errno.ENOSPC: "free some disk space, then /retry",
    errno.EDQUOT: "free some disk space, then /retry",
    errno.EACCES: "check its permissions, then /retry",
    errno.EPERM: "check its permissions, then /retry",
    errno.EROFS: "the file system is read-only",
}


def _detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and body.get("message"):
        text = str(body["message"])
    elif isinstance(body, str) and body.strip():
        text = body
    else:
        text = str(getattr(exc, "message", "") or exc)
    text = " ".join(text.split())
    return text[:200] + ("…" if len(text) > 200 else "")


def _single_cause(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one, else ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def is_network_error(exc: OSError) -> bool:
    if isinstance(exc, BrokenPipeError):  # a closed output pipe (sockets' errors reach co wrapped by the SDK)
        return False
    return isinstance(exc, ConnectionError | socket.gaierror | socket.herror | ssl.SSLError) or (
        exc.errno in NETWORK_ERRNOS
    )


def describe_local_error(exc: OSError) -> str:
    """What failed on this machine: "cannot write /path: No space left on device; free some disk space…"."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    verb = "write" if exc.errno in WRITE_ERRNOS else "access"
    target = exc.filename if exc.filename is not None else exc.filename2
    if target is None:
        if isinstance(exc, BrokenPipeError):
            message = f"cannot write the output: {reason}"
        else:
            message = f"cannot write: {reason}" if verb == "write" else f"local error: {reason}"
    else:
        shown = target.decode(errors="replace") if isinstance(target, bytes) else str(target)
        message = f"cannot {verb} {shown}: {reason}"
    hint = LOCAL_HINTS.get(exc.errno or 0)
    return f"{message}; {hint}" if hint else message


def is_context_overflow(exc: BaseException) -> bool:
    from pydantic_ai.exceptions import ModelAPIError, ModelContextWindowExceededError

    if isinstance(exc, ModelContextWindowExceededError):
        return True
    if isinstance(exc, ModelAPIError):
        blob = f"{exc.provider_error_code} {exc.body} {exc}".lower()
        return "context_length_exceeded" in blob or "maximum context length" in blob
    return False


def describe_provider_error(exc: BaseException) -> str:
    """One line that says what went wrong and, where it helps, what to do."""
    from pydantic_ai import exceptions as ex

    from co_cli.errors import CoError

    exc = _single_cause(exc)
    if isinstance(exc, CoError):
        return exc.message
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError) and not is_network_error(exc):
        return describe_local_error(exc)
    model = getattr(exc, "model_name", "") or "the model"
    status = getattr(exc, "status_code", None)
    code = f"HTTP {status}: " if status else ""
    if is_context_overflow(exc):
        return f"{model}: context length exceeded ({code}{_detail(exc)}); try /compact"
    if isinstance(exc, ex.ModelAuthenticationError):
        return f"{model}: authentication failed ({code}{_detail(exc)}); check the API key"
    if isinstance(exc, ex.ModelRateLimitError | ex.ModelQuotaExceededError):
        wait = getattr(exc, "retry_after", None)
        hint = f"retry in {wait:.0f}s with /retry" if wait else "wait a moment, then /retry"
        return f"{model}: rate limited ({code}{_detail(exc)}); {hint}"
    if isinstance(exc, ex.ModelNotFoundError):
        return f"{model}: model not found ({code}{_detail(exc)}); check the model name (/model)"
    if isinstance(exc, ex.ModelTimeoutError | ex.ModelRequestTimeout):
        return f"{model}: request timed out; /retry to send it again"
    if isinstance(exc, ex.ModelConnectionError):
        return f"{model}: cannot reach the server ({_detail(exc)}); /retry when it is up"
    if isinstance(exc, ex.ModelServerError | ex.ModelUnavailableError):
        return f"{model}: provider error ({code}{_detail(exc)}); /retry to send it again"
    if isinstance(exc, ex.ModelAPIError):
        return f"{model}: request failed ({code}{_detail(exc)})"
    if isinstance(exc, ex.UnexpectedModelBehavior):
        return f"{model}: unexpected response ({_detail(exc)}); /retry to try again"
    if isinstance(exc, ex.UsageLimitExceeded):
        return f"usage limit reached: {_detail(exc)}"
    if isinstance(exc, ex.UserError):
        return f"configuration problem: {_detail(exc)}"
    if isinstance(exc, TimeoutError):
        return "request timed out; /retry to send it again"
    if isinstance(exc, ConnectionError | OSError):
        return f"connection failed: {_detail(exc)}; /retry when it is up"
    return f"{type(exc).__name__}: {_detail(exc)}"


def retold(message: str, where: HintPlace) -> str:
    """``message`` with its slash-command hints replaced by what works ``where`` it is read."""
    if where == "repl":
        return message
    for hint, instead in RETOLD.items():
        message = message.replace(hint, instead[where])
    return message
