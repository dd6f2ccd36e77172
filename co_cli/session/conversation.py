"""One live conversation: a small facade over the collaborators that run it.

No terminal I/O here: the REPL, ``-p`` and piped mode all drive this same class. What changes as the
conversation goes on is in ``SessionState`` (``deps.state``); every write to the saved session goes through
the ``Recorder``. Commands use the collaborators: ``conv.pins.add(text)``, ``conv.tasks.add(text)``,
``conv.compactions.preview(focus)``, ``conv.branches.fork(n)``, ``conv.window.report()``; what the
conversation works with (its directory, project, instructions files, memory, MCP servers) is
``conv.workspace``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelMessage

from co_cli.context.working import WorkingContext
from co_cli.deps import CoDeps, Pin, SessionState, Task
from co_cli.models import ResolvedModel
from co_cli.session.attachments import Attachments
from co_cli.session.background import Background
from co_cli.session.branches import Branches
from co_cli.session.compaction import Compactions
from co_cli.session.engine import Engine
from co_cli.session.pins import Pins
from co_cli.session.rebuild import live_context
from co_cli.session.recorder import Recorder
from co_cli.session.tasks import Tasks, from_stored
from co_cli.session.turn import TurnOutcome, Turns, TurnView
from co_cli.session.window import ContextWindow
from co_cli.session.workspace import Workspace
from co_cli.tools.approval import NON_INTERACTIVE_DENIED_MESSAGE, ApprovalPrompt
from co_cli.tools.mcp.servers import McpServers
from co_cli.vocabulary import SessionOrigin

if TYPE_CHECKING:
    from co_cli.store import SessionInfo
    from co_cli.store.usage import TurnUsage


class Conversation:
    def __init__(
        self,
        resolved: ResolvedModel,
        deps: CoDeps,
        ask_approval: ApprovalPrompt | None = None,
        approve_all: bool = False,
        mcp: McpServers | None = None,
        origin: SessionOrigin = "terminal",
        denied: str = NON_INTERACTIVE_DENIED_MESSAGE,
    ) -> None:
        store = deps.store
        self.deps = deps
        self.store = store
        self.state: SessionState = deps.state
        self.recorder = Recorder(
            store, self.state, deps.cwd, model_label=lambda: self.engine.resolved.label, origin=origin
        )
        deps.keep_file_change = self.recorder.file_change
        self.engine = Engine(
            resolved,
            deps,
            ask_approval=ask_approval,
            approve_all=approve_all,
            on_governor_event=lambda event: self.turns.on_governor_event(event),
            mcp=mcp,
            denied=denied,
        )
        self.pins = Pins(
            self.state,
            self.recorder,
            on_change=self.engine.recount,
            context_window=lambda: self.engine.resolved.context_window,
        )
        self.tasks = Tasks(self.state, self.recorder, deps.settings, lambda: deps.clock(), self.engine.recount)
        self.compactions = Compactions(self.state, self.engine, self.recorder, self.pins, self._rebuilt)
        self.background = Background(store, self.state, self.engine, self.recorder)
        self.turns = Turns(self.state, self.engine, self.recorder, self.compactions, self.pins, self.background)
        self.branches = Branches(store, self.state, self.load, deps.paths.tool_outputs)
        self.window = ContextWindow(store, self.state, self.engine)
        self.attachments = Attachments(deps)
        self.workspace = Workspace(deps, self.engine.mcp)

    # ----- what the conversation is -----------------------------------------------------------------------
    @property
    def resolved(self) -> ResolvedModel:
        return self.engine.resolved

    @property
    def session(self) -> SessionInfo | None:
        """The saved session (None until the first prompt)."""
        return self.state.info

    @property
    def session_id(self) -> str | None:
        return self.state.session_id

    @property
    def context(self) -> WorkingContext:
        return self.state.context

    @property
    def working(self) -> list[ModelMessage]:
        """What the model is sent next (before trimming)."""
        return self.state.context.messages

    @property
    def last_prompt(self) -> str | None:
        return self.state.last_prompt

    @property
    def last_usage(self) -> TurnUsage | None:
        return self.state.last_usage

    # ----- which session ----------------------------------------------------------------------------------
    def new(self) -> None:
        """Start a new conversation (the current one stays saved)."""
        self.recorder.held.detach()
        self._reset(WorkingContext(), [], [])

    def load(self, session: SessionInfo) -> None:
        """Continue a saved session: rebuild its working context exactly as the live session had it."""
        self.recorder.held.open(session)
        stored = self.store.pins.active(session.id)
        pins = [Pin(p.id, p.text, "summary" if p.source == "summary" else "user") for p in stored]
        saved = self.store.tasks.latest(session.id)
        self._reset(self._rebuilt(), pins, from_stored(saved.items) if saved else [])

    def _reset(self, context: WorkingContext, pins: list[Pin], tasks: list[Task]) -> None:
        self.state.context = context
        self.state.last_usage = None  # /usage speaks of this conversation's last turn
        self.state.approved_commands.clear()  # "always" was said for the other session
        self.state.approved_tools.clear()
        self.state.shell_sandbox = self.state.shell_network = None  # /sandbox was said for the other session
        self.attachments.clear()  # a command's output was for this conversation's next prompt
        self.pins.set(pins, notify=False)  # the engine is rebuilt next, counting them
        self.tasks.set(tasks, notify=False)
        self.engine.build()

    def _rebuilt(self) -> WorkingContext:
        assert self.state.info is not None
        return live_context(self.store, self.recorder, self.state.info.id)

    def release(self) -> None:
        self.recorder.held.release()

    def switch_model(self, resolved: ResolvedModel) -> None:
        self.engine.switch(resolved)
        self.recorder.set_model(resolved.label)

    def rename(self, title: str) -> SessionInfo:
        return self.recorder.rename(title)

    # ----- turns ------------------------------------------------------------------------------------------
    async def run_turn(
        self, prompt: str, view: TurnView, token: CancellationToken, instructions: str = "", words: str | None = None
    ) -> TurnOutcome:
        return await self.turns.run(prompt, view, token, instructions, words)

    async def close(
        self, timeout: float = 15.0, *, drain: float | None = 15.0, notice: Callable[[str], None] | None = None
    ) -> None:
        """Finish the background work (the session's title, at most ``timeout`` seconds), then drain the memory
        worker: what the last turns queued for extraction is done, at most ``drain`` seconds (None: until it is
        done or interrupted); ``notice`` is told when that takes a while. Interrupted or late, the extraction
        stays queued for the next co. The session stays held until ``release()``."""
        await self.background.finish(timeout)
        worker = self.background.memory_worker
        if worker is None:
            return
        try:
            await asyncio.wait_for(worker.drain(notice), drain)
        except (TimeoutError, KeyboardInterrupt, asyncio.CancelledError):
            await worker.stop()
