"""Where a conversation works and with what, fixed for its run: the working directory, that directory's project
and instructions files, long-term memory (when it is on) and the MCP servers. The front ends read it (the
toolbar, ``/memory``, ``/mcp``, ``/sessions``, the note naming the instructions files read)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from co_cli.deps import CoDeps
from co_cli.tools.mcp.servers import McpServers

if TYPE_CHECKING:
    from co_cli.memory.instructions_files import InstructionsFiles
    from co_cli.store.memories import Memories


class Workspace:
    """What a conversation works with: read-only, each read from the run's ``CoDeps`` when asked."""

    def __init__(self, deps: CoDeps, mcp: McpServers | None) -> None:
        self._deps = deps
        self.mcp = mcp
        """The MCP servers whose tools the model is offered (None when none are configured)."""

    @property
    def cwd(self) -> Path:
        """The working directory the conversation's tools work in."""
        return self._deps.cwd

    @property
    def project(self) -> str:
        """What this working directory's project-scope memories are filed under."""
        return self._deps.project

    @property
    def instructions_files(self) -> InstructionsFiles:
        """The instructions files this conversation reads (and those it skipped, with why)."""
        return self._deps.instructions_files

    @property
    def memories(self) -> Memories | None:
        """Long-term memory, or None when it is off in this run."""
        return self._deps.store.memories if self._deps.memory_on else None
