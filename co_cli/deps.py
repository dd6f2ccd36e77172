"""Run-time dependencies handed to the agent's tools (``RunContext[CoDeps].deps``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from co_cli.config import Paths, Settings

if TYPE_CHECKING:
    from co_cli.memory.instructions_files import InstructionsFiles
    from co_cli.memory.retrieval import Scored
    from co_cli.store import Store


@dataclass
class CoDeps:
    settings: Settings
    paths: Paths
    cwd: Path
    store: Store | None = None
    session_id: str | None = None
    # Shell commands the user allowed, verbatim, for the rest of this session ("a" at the prompt).
    approved_commands: set[str] = field(default_factory=set)
    # Standing instructions pinned in this session: part of every request's instructions, never summarised.
    pins: list[str] = field(default_factory=list)
    # Long-term memory: the seq of the prompt being answered (provenance of what the model remembers), the
    # memories the last request was sent, and per-directory facts read once.
    turn_seq: int | None = None
    memory_used: list[Scored] = field(default_factory=list)
    instructions_files: InstructionsFiles | None = None
    project: str | None = None

    @property
    def tool_output_dir(self) -> Path:
        """Private directory for this session's offloaded tool outputs."""
        return self.paths.tool_outputs / (self.session_id or "unsaved")
