"""Confinement of file tools to the working directory, and co's own files kept out of reach."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import ApprovalRequired, RunContext

from co_cli.config import OwnFiles
from co_cli.deps import CoDeps

OUTSIDE_CWD_REASON = "outside the working directory"
PRIVATE_REASON = "co's own settings or data (API key, input history, sessions)"


class PathError(Exception):
    """A path argument that cannot be used; ``message`` is the error the model gets back."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def working_dir(deps: CoDeps) -> Path:
    """The working directory, absolute and with symlinks resolved."""
    return deps.cwd.expanduser().resolve()


def resolve_path(cwd: Path, path: str) -> Path:
    """Resolve ``path`` (relative to ``cwd``, ``~`` expanded, symlinks followed) to an absolute path.

    Raises ``PathError`` for a path no file can have (a NUL byte, an unknown ``~user``, a name too long).
    """
    if "\0" in path:
        raise PathError(f"Error: invalid path {path!r}: it contains a NUL byte.")
    try:
        candidate = Path(path).expanduser()
    except RuntimeError:  # ~name of a user that does not exist
        raise PathError(f"Error: invalid path {path!r}: no such user's home directory.") from None
    if not candidate.is_absolute():
        candidate = cwd / candidate
    try:
        return candidate.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: a symlink loop
        raise PathError(f"Error: invalid path {path!r}: {getattr(exc, 'strerror', None) or exc}.") from None


def is_inside(cwd: Path, resolved: Path) -> bool:
    """Whether ``resolved`` is ``cwd`` itself or lies beneath it (both already resolved)."""
    return resolved == cwd or resolved.is_relative_to(cwd)


def own_files(deps: CoDeps) -> OwnFiles:
    """co's config and data directories and the project settings file (``config.OwnFiles``).

    They hold the API key, the input history, every session and offloaded outputs: a file tool reaches
    them only with the user's approval, wherever the working directory is, and by a hard link too.
    """
    return OwnFiles.of(deps.paths, deps.settings)


def confined_path(ctx: RunContext[CoDeps], path: str) -> Path:
    """Resolve ``path`` for a file tool; outside the working directory, or inside co's own config and data
    directories, it needs the user's approval.

    Raises ``ApprovalRequired`` (metadata: reason and resolved path) unless this call was approved, and
    ``PathError`` for a path that cannot exist.
    """
    cwd = working_dir(ctx.deps)
    resolved = resolve_path(cwd, path)
    if ctx.tool_call_approved:
        return resolved
    if own_files(ctx.deps).holds(resolved):
        raise ApprovalRequired(metadata={"reason": PRIVATE_REASON, "path": str(resolved)})
    if not is_inside(cwd, resolved):
        raise ApprovalRequired(metadata={"reason": OUTSIDE_CWD_REASON, "path": str(resolved)})
    return resolved


def display_path(cwd: Path, resolved: Path) -> str:
    """``resolved`` relative to ``cwd`` when inside it, else absolute."""
    if resolved != cwd and resolved.is_relative_to(cwd):
        return str(resolved.relative_to(cwd))
    return str(resolved)
