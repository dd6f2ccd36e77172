"""User-facing errors: each carries a one-line message and an exit code."""

from __future__ import annotations


class CoError(Exception):
    """An error the user caused or can fix; printed as one line, never as a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class ConfigError(CoError):
    """Malformed settings file or invalid setting value."""

    exit_code = 2


class ModelConfigError(CoError):
    """The model string cannot be resolved to a usable model (unknown, missing key or extra)."""

    exit_code = 2


class ProviderError(CoError):
    """A model provider failed a request (auth, rate limit, server error, timeout, ...)."""

    exit_code = 1


class StoreError(CoError):
    """The session database cannot be used (corrupt, newer schema, read-only, disk full)."""

    exit_code = 3


class SessionNotFound(CoError):
    """An unknown or ambiguous session id or prefix."""

    exit_code = 4

    @classmethod
    def no_such(cls, session_id: str) -> SessionNotFound:
        """The error for a whole session id that names no session."""
        return cls(f"no session {session_id!r}; `co sessions list` shows them")


class SessionBusy(CoError):
    """Another live co process has the session open."""

    exit_code = 5


class SessionTakenOver(CoError):
    """Another co took the session over (``--force``) from this one, which no longer writes to it."""

    exit_code = 5
