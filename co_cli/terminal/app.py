"""The chat loop: reads input, runs turns with cancellation, and hands slash commands to the registry."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.text import Text

from co_cli.config import LoadedSettings
from co_cli.errors import CoError
from co_cli.failure_text import HintPlace
from co_cli.models import ModelChoice
from co_cli.terminal import commands
from co_cli.terminal.app_input import ChatInput
from co_cli.terminal.attachments import run_command, send
from co_cli.terminal.render import PlainView, TerminalView, message_text
from co_cli.terminal.toolbar import Toolbar
from co_cli.terminal.turn_input import TurnInput
from co_cli.terminal.working_line import WorkingLine
from co_cli.vocabulary import MEMORY_EXTRACTION, WAITING_FOR_MODEL

if TYPE_CHECKING:
    from pydantic_ai import CancellationToken

    from co_cli.session import Conversation, TurnOutcome, TurnView
    from co_cli.store import SessionInfo, Store
    from co_cli.terminal.approval_prompt import TerminalApprover
    from co_cli.tools.mcp.servers import McpServers


class ChatApp(ChatInput):
    """The terminal side of a conversation: the loop that reads input, runs turns and hands slash commands to
    the registry (what it shows is ``ChatOutput``'s, what it asks and the keys during work ``ChatInput``'s).

    ``conv`` may still be under construction (importing pydantic-ai and the provider SDK takes about a
    second): the prompt is drawn at once and the first input waits for it.
    """

    def __init__(
        self,
        conv: Conversation | Callable[[], Conversation],
        loaded: LoadedSettings,
        *,
        choice: ModelChoice,
        store: Store,
        interactive: bool,
        saving: bool = True,
        console: Console | None = None,
        out: TextIO | None = None,
        approver: TerminalApprover | None = None,
    ) -> None:
        self._conv: Conversation | None = None
        self._builder: Callable[[], Conversation] | None = None
        self._pending: asyncio.Future[Conversation] | None = None
        self._background_started = False
        self._orphans: asyncio.Future[int] | None = None
        """Ending what a co killed with SIGKILL left running (a thread, started once the conversation is built)."""
        if callable(conv):
            self._builder = conv
        else:
            self._conv = conv
        self.choice = choice
        self.loaded = loaded
        self.store = store
        self.saving = saving
        """False with --no-save: the store is a scratch one, removed at exit."""
        self.interactive = interactive
        self.console = console or Console(highlight=False)
        self.out = out or sys.stdout
        self.running = True
        self.errors = 0
        self._token: CancellationToken | None = None
        self._toolbar = Toolbar(choice.spec, store)
        self.view: TurnView = TerminalView(self.console) if interactive else PlainView(self.out)
        self.keys = TurnInput(self.view, interactive=interactive)
        if approver is not None:
            approver.before_asking = self.keys.before_question
            approver.after_asking = self.keys.after_question
            approver.cancel_turn = self.cancel_turn
        self._in_turn = False
        self.hints: HintPlace = "repl"
        """Where the user reads errors: at the prompt (slash commands work), or after a run without one (-p, a
        pipe), whose errors name what works there instead."""

    @property
    def conv(self) -> Conversation:
        assert self._conv is not None, "conversation not ready"
        return self._conv

    def _start_build(self) -> asyncio.Future[Conversation]:
        """Build the conversation in a thread (imports pydantic-ai and the provider SDK)."""
        if self._pending is None:
            assert self._builder is not None
            self._pending = asyncio.ensure_future(asyncio.to_thread(self._builder))
        return self._pending

    async def ready(self) -> Conversation:
        if self._conv is None:
            self._conv = await self._start_build()
        if not self._background_started:
            self._background_started = True
            self._conv.background.start_extraction()  # what an earlier co left queued
            from co_cli.tools.processes import end_orphans  # pydantic-ai is loaded by now

            self._orphans = asyncio.ensure_future(asyncio.to_thread(end_orphans))  # and what it left running
            if self._conv.workspace.mcp is not None:
                start_mcp_servers(self, self._conv.workspace.mcp)
        return self._conv

    async def finish_background(self) -> None:
        """Before exit: the session's title, and the memory extraction of the last turns (interrupted, that
        stays queued for the next co)."""
        if self._conv is None:
            return
        if self._orphans is not None:
            with contextlib.suppress(Exception):
                await self._orphans
        line = WorkingLine(self.console, hint="Ctrl-C leaves it for the next co")
        try:  # a wait of more than half a second is shown: on the working line in a terminal
            notice = (lambda _: line.show(MEMORY_EXTRACTION)) if self.interactive else self.note
            await self._conv.close(drain=None, notice=notice)
        finally:
            line.hide()

    # ----- turns -------------------------------------------------------------------------------------
    async def turn(self, prompt: str, words: str | None = None) -> TurnOutcome:
        from pydantic_ai import CancellationToken

        token = self._token = CancellationToken()
        self.view.working(WAITING_FOR_MODEL)
        self._in_turn = True
        try:
            with self._stoppable(token.cancel):
                outcome = await self.conv.run_turn(prompt, self.view, token, words=words)
        finally:
            self._in_turn = False
        if outcome.status == "ok" and (cost := self.conv.background.cost_notice(prompt)):
            self.note(cost)
        if outcome.status == "failed" and outcome.error:
            self.error(outcome.error)
            if self.interactive:
                self.console.print(Text("Your prompt is kept: press Up to edit it, or /retry.", style="dim"))
        return outcome

    # ----- loops -------------------------------------------------------------------------------------
    async def handle(self, line: str) -> None:
        loading = WorkingLine(self.console, hint="")
        if self._conv is None and self.interactive:
            loading.show(f"loading {self.choice.spec}")  # the first input came before the model was ready
        try:
            await self.ready()
        finally:
            loading.hide()
        if line.strip().startswith("/"):
            await commands.dispatch(self, line)
        elif self.interactive and line.lstrip().startswith("!"):
            await run_command(self, line.lstrip()[1:].strip())
        elif line.strip():
            await send(self, line)

    async def run_interactive(self) -> None:
        from co_cli.terminal.prompt import PROMPT, hand_over_typeahead, make_session

        self.banner()
        self.show_instructions_files()
        if self._conv is not None and self._conv.session:
            self.show_resumed()
        session = make_session(self, self.loaded.paths.input_history, self.toolbar)
        watchers: list[asyncio.Task[None]] = []

        def start_build() -> None:
            if self._conv is not None and not self._background_started:
                asyncio.ensure_future(self.ready())  # a resumed conversation: its MCP servers start now
            if self._conv is None and not watchers:
                self._start_build()
                watchers.append(asyncio.ensure_future(self._exit_if_build_fails(session)))

        def after_first_draw() -> None:
            # pre_run runs just before the first redraw; start loading right after it, as the import
            # thread competes with drawing for the GIL.
            asyncio.get_running_loop().call_soon(start_build)

        while self.running:
            hand_over_typeahead(session, self.keys.take_typed())
            try:
                line = await session.prompt_async(PROMPT, pre_run=after_first_draw)
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line
            except EOFError:
                break
            try:
                await self.handle(line)
            except CoError as exc:
                if self._conv is None:
                    raise  # the model could not be set up: co ends with its one line, whatever was typed
                self.error(exc.message)
        for watcher in watchers:
            watcher.cancel()
        if self._conv is not None:
            await self.finish_background()
            self._conv.release()
            hint = come_back_hint(self.store, self._conv.session, self.saving)
            if hint:
                self.console.print(message_text(hint, "dim"))

    async def _exit_if_build_fails(self, session: Any) -> None:
        """Once the conversation is built, the toolbar is redrawn (it said "loading…"), with no key pressed; a
        model that cannot be built (e.g. a missing key) ends the prompt with its one-line error."""
        try:
            await self.ready()
        except CoError as exc:
            if session.app.is_running:
                session.app.exit(exception=exc)
            return
        if session.app.is_running:
            session.app.invalidate()


def come_back_hint(store: Store, session: SessionInfo | None, saving: bool) -> str | None:
    """On leaving a saved conversation: how to continue it."""
    if session is None or not saving:
        return None
    return f"To continue: `co chat -c` (the latest), or `co chat --resume {store.sessions.short_id(session.id)}`"


def start_mcp_servers(app: ChatApp, servers: McpServers) -> None:
    """Start the MCP servers in the background. A server that fails to start or dies is one line: in the turn's
    view while a turn runs, else above the prompt (or on stderr, without a terminal)."""

    def notice(message: str) -> None:
        if app._in_turn:
            servers.notices.append(message)  # the turn shows it in its place
            return
        if app.interactive:
            from prompt_toolkit.application import get_app_or_none, run_in_terminal

            prompt = get_app_or_none()
            if prompt is not None and prompt.is_running:
                run_in_terminal(lambda: app.note(message))
                return
        app.note(message)

    for message in servers.take_notices():
        app.note(message)
    servers.on_notice = notice
    servers.start()
