"""Confinement of file tools to the working directory."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import ApprovalRequired, RunContext

from co_cli.deps import CoDeps

OUTSIDE_CWD_REASON = "outside the working directory"


def working_dir(deps: CoDeps) -> Path:
    """The working directory, absolute and with symlinks resolved."""
    return deps.cwd.expanduser().resolve()


def resolve_path(cwd: Path, path: str) -> Path:
    """Resolve ``path`` (relative to ``cwd``, ``~`` expanded, symlinks followed) to an absolute path."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = cwd / candidate
    return candidate.resolve()


def is_inside(cwd: Path, resolved: Path) -> bool:
    """Whether ``resolved`` is ``cwd`` itself or lies beneath it (both already resolved)."""
    return resolved == cwd or resolved.is_relative_to(cwd)


def confined_path(ctx: RunContext[CoDeps], path: str) -> Path:
    """Resolve ``path`` for a file tool; outside the working directory it needs the user's approval.

    Raises ``ApprovalRequired`` (metadata: reason and resolved path) unless this call was approved.
    """
    cwd = working_dir(ctx.deps)
    resolved = resolve_path(cwd, path)
    if not is_inside(cwd, resolved) and not ctx.tool_call_approved:
        raise ApprovalRequired(metadata={"reason": OUTSIDE_CWD_REASON, "path": str(resolved)})
    return resolved


def display_path(cwd: Path, resolved: Path) -> str:
    """``resolved`` relative to ``cwd`` when inside it, else absolute."""
    if resolved != cwd and resolved.is_relative_to(cwd):
        return str(resolved.relative_to(cwd))
    return str(resolved)
