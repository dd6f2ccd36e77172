"""`co chat`: wires settings, store, model and conversation together and picks the input mode."""

from __future__ import annotations

import asyncio
import atexit
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from co_cli.config import LoadedSettings, Paths, Settings, load_settings
from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from co_cli.models import ModelChoice
    from co_cli.session import Conversation
    from co_cli.session.factory import Opening
    from co_cli.store import SessionInfo, Store
    from co_cli.terminal.app import ChatApp
    from co_cli.terminal.approval_prompt import TerminalApprover
    from co_cli.tools.mcp.servers import McpServers


@dataclass(frozen=True)
class ChatOptions:
    model: str | None = None
    prompt: str | None = None
    resume: str | None = None  # an id/prefix, or "@latest"
    fork: bool = False
    approve_all: bool = False
    save: bool = True
    force: bool = False  # take the resumed session over from another co that has it open
    memory: bool | None = None  # False: --no-memory
    fork_at: int | None = None  # with resume: continue in a fork holding the messages up to this one
    pick: bool = False  # choose the session to resume in the full-screen picker
    lines: bool = False  # --lines: each line of stdin is one input, instead of the whole of it one prompt


def run_chat(options: ChatOptions) -> int:
    from co_cli.project_trust import confirm_project_server

    loaded = load_settings(model=options.model, memory=options.memory)
    for warning in loaded.warnings:
        print(printable(f"warning: {warning}"), file=sys.stderr)
    can_ask = options.prompt is None and sys.stdin.isatty() and sys.stdout.isatty()
    confirm_project_server(loaded, ask_on_terminal if can_ask else None)
    refused: dict[str, str] = {}
    if loaded.project_mcp_servers:
        from co_cli.project_trust import confirm_project_mcp_servers

        refused = confirm_project_mcp_servers(loaded, ask_on_terminal if can_ask else None)
        for line in refused.values():
            print(printable(f"warning: {line}"), file=sys.stderr)
    return asyncio.run(_chat(options, loaded, refused))


def ask_on_terminal(question: str) -> str:
    try:
        return input(question)
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        return ""


async def _chat(options: ChatOptions, loaded: LoadedSettings, refused_mcp: dict[str, str] | None = None) -> int:
    """Open the store and the MCP servers, choose the session, talk, and close what was opened."""
    from rich.console import Console

    if not options.save:
        loaded = _scratch(loaded)
    interactive = options.prompt is None and sys.stdin.isatty() and sys.stdout.isatty()
    store = _open_store(loaded, purge=options.save)
    servers = _LazyServers(loaded.settings, loaded.paths, refused_mcp or {})
    if not interactive and (started := servers.get()) is not None:
        started.start()
    try:
        if options.pick:
            options = await _picked(store, options, interactive)
            if options.resume is None:
                return 0
        talk = _Talk(options, loaded, store, Console(highlight=False), interactive, servers)
        return await talk.run(_session_to_resume(store, options))
    finally:
        await servers.stop()
        store.close()


def _scratch(loaded: LoadedSettings) -> LoadedSettings:
    """--no-save: nothing of this conversation may stay on disk. The session store, input history and offloaded
    outputs go to a temporary directory that is removed at exit; long-term memory is off."""
    scratch = tempfile.TemporaryDirectory(prefix="co-nosave-")
    atexit.register(scratch.cleanup)
    loaded = replace(loaded, paths=replace(loaded.paths, data_dir=Path(scratch.name)))
    return replace(loaded, settings=loaded.settings.model_copy(update={"memory": False}))


def _open_store(loaded: LoadedSettings, *, purge: bool) -> Store:
    from co_cli.store import Store

    loaded.paths.ensure_data_dir()
    store = Store.open(loaded.paths.db)
    if purge:
        store.trash.purge_expired(loaded.settings.trash_retention_days, loaded.paths.tool_outputs)
    return store


class _LazyServers:
    """The configured MCP servers, made once when first asked for: interactive, in the thread that builds the
    conversation, so the prompt never waits for their imports (ChatApp starts them)."""

    def __init__(self, settings: Settings, paths: Paths, refused: dict[str, str]) -> None:
        self.settings, self.paths, self.refused = settings, paths, refused
        self.made: list[McpServers] = []

    def get(self) -> McpServers | None:
        if not self.made and self.settings.mcp_servers:
            self.made.append(_mcp_servers(self.settings, self.paths, self.refused))
        return self.made[0] if self.made else None

    async def stop(self) -> None:
        for started in self.made:
            await started.stop()


@dataclass
class _Talk:
    """One `co chat` run once the store is open: builds the conversation through the session factory and hands
    it to the chat loop, the prompt or the pipe."""

    options: ChatOptions
    loaded: LoadedSettings
    store: Store
    console: Console
    interactive: bool
    servers: _LazyServers

    async def run(self, session: SessionInfo | None) -> int:
        from co_cli.models import choose_model
        from co_cli.terminal.approval_prompt import TerminalApprover

        settings = self.loaded.settings
        if session is not None and self.options.model is None and session.model:
            settings = settings.model_copy(update={"model": session.model})
        chosen = "session" if session is not None and self.options.model is None else None
        choice = choose_model(settings, chosen or self.loaded.sources.get("model", "default"))
        approver = TerminalApprover(self.console) if self.interactive else None

        def build() -> Conversation:
            return self._build(settings, choice, session, approver)

        if self.interactive and session is None:
            # Draw the prompt at once; pydantic-ai and the provider SDK load while the user types.
            await self._app(build, choice, approver).run_interactive()
            return 0
        conv = build()
        if session is not None and (self.options.fork or self.options.fork_at is not None):
            await _files_back(self.store, session.id, self.options.fork_at, self.interactive)
        try:
            return await self._drive(self._app(conv, choice, approver), resumed=session is not None)
        finally:
            conv.release()

    def _app(
        self, conv: Conversation | Callable[[], Conversation], choice: ModelChoice, approver: TerminalApprover | None
    ) -> ChatApp:
        from co_cli.terminal.app import ChatApp

        return ChatApp(
            conv,
            self.loaded,
            choice=choice,
            store=self.store,
            saving=self.options.save,
            interactive=self.interactive,
            console=self.console,
            approver=approver,
        )

    async def _drive(self, app: ChatApp, *, resumed: bool) -> int:
        """The chat loop in a terminal; else one prompt (-p), each line of stdin (--lines), or all of it."""
        from co_cli.terminal import piped

        if self.options.prompt is not None:
            return await piped.run_once(app, self.options.prompt)
        if self.interactive:
            await app.run_interactive()
            return 0
        if resumed:
            app.show_resumed()
        if self.options.lines or not piped.stdin_is_piped():
            return await piped.run_lines(app, sys.stdin)
        return await piped.run_piped(app)

    def _build(
        self,
        settings: Settings,
        choice: ModelChoice,
        session: SessionInfo | None,
        approver: TerminalApprover | None,
    ) -> Conversation:
        """The conversation, opened through the session factory once the model is resolved (no stray forks)."""
        from co_cli.models import resolve_choice
        from co_cli.session.factory import FrontEnd, open_conversation

        if approver is not None:
            _install_local_spinner(self.console)
        resolved = resolve_choice(choice, settings, self.loaded.paths)
        approve_all = self.options.approve_all
        front = FrontEnd(
            origin="terminal",
            ask_approval=None if approve_all else approver,
            approve_all=approve_all,
            on_memory_change=_redraw_prompt,
        )
        paths, opening = self.loaded.paths, _opening(session, self.options)
        return open_conversation(settings, paths, self.store, Path.cwd(), resolved, front, opening, self.servers.get())


def _opening(session: SessionInfo | None, options: ChatOptions) -> Opening:
    from co_cli.session.factory import Opening

    if session is None:
        return Opening.new()
    if options.fork or options.fork_at is not None:
        return Opening.forked(session, options.fork_at)
    return Opening.resumed(session, force=options.force)


async def _files_back(store: Store, session_id: str, upto_seq: int | None, interactive: bool) -> None:
    """A fork (``--fork``, ``--fork-at``, the picker's): offer to take the files co changed back too."""
    from co_cli.terminal.files_back import offer_files_back

    async def ask(question: str) -> str | None:
        return ask_on_terminal(question)

    await offer_files_back(
        store, session_id, upto_seq, ask=ask if interactive else None, say=lambda line: print(printable(line))
    )


def _mcp_servers(settings: Settings, paths: Paths, refused: dict[str, str]) -> McpServers:
    from co_cli.tools.mcp.servers import McpServers

    return McpServers(settings.mcp_servers, paths, Path.cwd(), refused)


async def _picked(store: Store, options: ChatOptions, interactive: bool) -> ChatOptions:
    """The options with the session chosen in the picker (resume None when the user left it)."""
    from co_cli.errors import CoError
    from co_cli.terminal.picker import pick_session

    if not interactive:
        raise CoError("--pick needs a terminal; pass the session with --resume <id> (`co sessions list`)", exit_code=2)
    choice = await pick_session(store, cwd=str(Path.cwd()))
    if choice is None:
        return replace(options, resume=None)
    return replace(options, resume=choice.session_id, fork=choice.action == "fork")


def _session_to_resume(store: Store, options: ChatOptions) -> SessionInfo | None:
    from co_cli.errors import SessionNotFound

    if options.resume is None:
        return None
    session = store.sessions.latest() if options.resume == "@latest" else store.sessions.get(options.resume)
    if session is None:
        raise SessionNotFound("no saved sessions to resume yet")
    return session


def _redraw_prompt() -> None:
    """Redraw the prompt (its toolbar counts the memory proposals waiting for review)."""
    from prompt_toolkit.application import get_app_or_none

    app = get_app_or_none()
    if app is not None:
        app.invalidate()


def _install_local_spinner(console: Console) -> None:
    """Show a spinner while the embedded model loads (interactive only)."""
    try:
        from co_cli.local.model import LocalModel
    except ImportError:
        return
    LocalModel.on_load = lambda name: console.status(f"Loading {name}…")
