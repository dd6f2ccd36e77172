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
    from rich.console import Console

    from co_cli.models import ModelChoice
    from co_cli.session import Conversation
    from co_cli.store import SessionInfo, Store
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
    from rich.console import Console

    from co_cli.models import choose_model
    from co_cli.terminal.app import ChatApp

    if not options.save:
        # Nothing of this conversation may stay on disk: the session store, input history and offloaded
        # outputs go to a temporary directory that is removed at exit; long-term memory is off.
        scratch = tempfile.TemporaryDirectory(prefix="co-nosave-")
        atexit.register(scratch.cleanup)
        loaded = replace(loaded, paths=replace(loaded.paths, data_dir=Path(scratch.name)))
        loaded = replace(loaded, settings=loaded.settings.model_copy(update={"memory": False}))
    settings, paths = loaded.settings, loaded.paths
    interactive = options.prompt is None and sys.stdin.isatty() and sys.stdout.isatty()
    console = Console(highlight=False)

    from co_cli.store import Store

    paths.ensure_data_dir()
    store = Store.open(paths.db)
    if options.save:
        store.sessions.purge_expired(settings.trash_retention_days, paths.tool_outputs)
    made: list[McpServers] = []

    def mcp_servers() -> McpServers | None:
        """The configured MCP servers (made once; interactive, in the thread that builds the conversation, so
        the prompt never waits for their imports; ChatApp starts them)."""
        if not made and settings.mcp_servers:
            made.append(_mcp_servers(settings, paths, refused_mcp or {}))
        return made[0] if made else None

    if not interactive and (servers := mcp_servers()) is not None:
        servers.start()
    try:
        if options.pick:
            options = await _picked(store, options, interactive)
            if options.resume is None:
                return 0
        session = _session_to_resume(store, options)
        if session is not None and options.model is None and session.model:
            settings = settings.model_copy(update={"model": session.model})
        source = "session" if session is not None and options.model is None else loaded.sources.get("model", "default")
        choice = choose_model(settings, source)
        from co_cli.terminal.approval_prompt import TerminalApprover

        approver = TerminalApprover(console) if interactive else None

        def build() -> Conversation:
            return _build_conversation(
                settings, loaded, choice, store, session, options, approver, console, mcp_servers()
            )

        if interactive and session is None:
            # Draw the prompt at once; pydantic-ai and the provider SDK load while the user types.
            app = ChatApp(
                build,
                loaded,
                choice=choice,
                store=store,
                saving=options.save,
                interactive=True,
                console=console,
                approver=approver,
            )
            await app.run_interactive()
            return 0
        conv = build()
        if session is not None and (options.fork or options.fork_at is not None):
            await _files_back(store, session.id, options.fork_at, interactive)
        app = ChatApp(
            conv,
            loaded,
            choice=choice,
            store=store,
            saving=options.save,
            interactive=interactive,
            console=console,
            approver=approver,
        )
        try:
            from co_cli.terminal import piped

            if options.prompt is not None:
                return await piped.run_once(app, options.prompt)
            if not interactive:
                if session is not None:
                    app.show_resumed()
                if options.lines or not piped.stdin_is_piped():
                    return await piped.run_lines(app, sys.stdin)
                return await piped.run_piped(app)
            await app.run_interactive()
            return 0
        finally:
            conv.release()
    finally:
        for started in made:
            await started.stop()
        store.close()


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


def _build_conversation(
    settings: Settings,
    loaded: LoadedSettings,
    choice: ModelChoice,
    store: Store,
    session: SessionInfo | None,
    options: ChatOptions,
    approver: TerminalApprover | None,
    console: Console,
    mcp: McpServers | None = None,
) -> Conversation:
    from co_cli.deps import CoDeps
    from co_cli.models import resolve_choice
    from co_cli.session import Conversation

    if approver is not None:
        _install_local_spinner(console)
    resolved = resolve_choice(choice, settings, loaded.paths)
    if session is not None and (options.fork or options.fork_at is not None):
        from co_cli.session.branches import fork_at

        # Only once the model is known to work: no stray forks.
        session = fork_at(store, session.id, options.fork_at, files_root=loaded.paths.tool_outputs)
    deps = CoDeps(settings=settings, paths=loaded.paths, cwd=Path.cwd(), store=store)
    conv = Conversation(
        resolved=resolved,
        deps=deps,
        ask_approval=None if options.approve_all else approver,
        approve_all=options.approve_all,
        mcp=mcp,
    )
    conv.background.attach_extraction(on_change=_redraw_prompt)
    if session is not None:
        if options.force:
            store.locks.acquire(session.id, force=True)  # load() then finds the session already held here
        conv.load(session)
    return conv


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
