"""What the agent's tools may read of the live run: ``CoDeps`` (fixed for the run) and ``SessionState`` (what
changes as the conversation goes on). ``RunContext[CoDeps].deps`` is how a tool gets both."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from co_cli.config import Paths, Settings
from co_cli.context.working import WorkingContext
from co_cli.vocabulary import SessionOrigin, TaskStatus

if TYPE_CHECKING:
    from co_cli.memory.instructions_files import InstructionsFiles
    from co_cli.memory.retrieval import Scored
    from co_cli.store import SessionInfo, Store
    from co_cli.store.file_changes import FileChange
    from co_cli.store.usage import TurnUsage

PinSource = Literal["user", "summary"]


@dataclass(frozen=True)
class Pin:
    """A standing instruction, kept verbatim in the instructions of every request of the session."""

    id: int
    text: str
    source: PinSource


@dataclass(frozen=True)
class Task:
    """An item of the session's task list, kept verbatim in the instructions of every request."""

    text: str
    status: TaskStatus
    created_at: float
    updated_at: float
    """When its status last changed."""


@dataclass
class SessionState:
    """The one mutable record of the live session. The session's collaborators change it; tools read it."""

    info: SessionInfo | None = None
    """The saved session (None until the first prompt creates it)."""
    context: WorkingContext = field(default_factory=WorkingContext)
    """What the model is sent next (before trimming), each message beside its transcript seq."""
    pins: list[Pin] = field(default_factory=list)
    """Standing instructions: part of every request's instructions, never summarised."""
    tasks: list[Task] = field(default_factory=list)
    """The task list (the model's set_tasks and the user's /tasks): part of every request's instructions."""
    tool_seconds: dict[str, float] = field(default_factory=dict)
    """How long each tool call of the running turn ran, by tool call id."""
    approved_commands: set[str] = field(default_factory=set)
    """Shell commands the user allowed, verbatim, for the rest of this session ("a" at the prompt)."""
    approved_tools: set[str] = field(default_factory=set)
    """Tools (an MCP server's, ``mcp:<server>/<tool>``) the user allowed for the rest of this session."""
    shell_sandbox: Literal["auto", "on", "off"] | None = None
    """The user's ``/sandbox`` choice for this session (None: the ``shell_sandbox`` setting)."""
    shell_network: bool | None = None
    """Whether ``/sandbox network`` let sandboxed commands use the network (None: the ``shell_network`` setting)."""
    sandbox_noted: bool = False
    """Whether the user was told, in this session, that commands cannot be sandboxed here."""
    turn_seq: int | None = None
    """The seq of the prompt being answered (provenance of what the model remembers)."""
    last_prompt: str | None = None
    last_usage: TurnUsage | None = None
    """The usage of the last finished turn (for ``/usage``)."""
    memory_used: list[Scored] = field(default_factory=list)
    """The memories the last request was sent (for ``/memory`` and ``/context``)."""
    memory_sent: dict[int, Scored] = field(default_factory=dict)
    """Every memory the running turn's requests were sent, by id, in the order first sent (saved with the turn)."""

    @property
    def session_id(self) -> str | None:
        return self.info.id if self.info else None

    def pin_texts(self) -> list[str]:
        return [pin.text for pin in self.pins]


@dataclass
class CoDeps:
    settings: Settings
    paths: Paths
    cwd: Path
    store: Store
    """The session database (under --no-save a scratch one, removed at exit)."""
    state: SessionState = field(default_factory=SessionState)
    origin: SessionOrigin = "terminal"
    """Who drives the session: under ``co serve`` no one can be asked, so what needs approval is refused and a
    command rule the user keeps does not stand in for the question."""
    clock: Callable[[], float] = time.time
    """Wall-clock time (when tasks change, which done tasks are old enough to leave the list)."""
    keep_file_change: Callable[[FileChange], None] | None = None
    """Commits a change an edit tool is about to make, tied to the running turn (the session's recorder); the
    edit tools change nothing where there is no such place."""

    @property
    def session_id(self) -> str | None:
        return self.state.session_id

    @cached_property
    def instructions_files(self) -> InstructionsFiles:
        """The instructions files of this working directory (read once per conversation)."""
        from co_cli.memory.instructions_files import instructions_files_for

        return instructions_files_for(self.cwd, self.settings, self.paths)

    @cached_property
    def project(self) -> str:
        """What project-scope memories of this working directory are filed under."""
        from co_cli.memory.instructions_files import project_root

        return str(project_root(self.cwd))

    @property
    def memory_on(self) -> bool:
        """Long-term memory is used in this run (the ``memory`` setting; off with ``--no-memory``/``--no-save``)."""
        return bool(self.settings.memory)

    @property
    def tool_output_dir(self) -> Path:
        """Private directory for this session's offloaded tool outputs."""
        return self.paths.tool_outputs / (self.session_id or "unsaved")
