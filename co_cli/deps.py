"""Run-time dependencies handed to the agent's tools (``RunContext[CoDeps].deps``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from co_cli.config import Paths, Settings

if TYPE_CHECKING:
    from co_cli.store.sessions import SessionStore


@dataclass
class CoDeps:
    settings: Settings
    paths: Paths
    cwd: Path
    store: SessionStore | None = None
    session_id: str | None = None
    # Shell commands the user allowed, verbatim, for the rest of this session ("a" at the prompt).
    approved_commands: set[str] = field(default_factory=set)
    # Standing instructions pinned in this session: part of every request's instructions, never summarised.
    pins: list[str] = field(default_factory=list)

    @property
    def tool_output_dir(self) -> Path:
        """Private directory for this session's offloaded tool outputs."""
        return self.paths.tool_outputs / (self.session_id or "unsaved")
