"""The chat loop: reads input, runs turns with cancellation, and hands slash commands to the registry."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from rich.console import Console
from rich.text import Text

from co_cli.config import LoadedSettings
from co_cli.errors import CoError
from co_cli.failure_text import HintPlace, retold
from co_cli.models import EMBEDDED_MODEL_NOTE, ModelChoice
from co_cli.terminal import commands
from co_cli.terminal.attachments import run_command, send
from co_cli.terminal.render import PlainView, TerminalView, message_text, plain_message, print_error
from co_cli.terminal.toolbar import Toolbar
from co_cli.terminal.turn_input import TurnInput
from co_cli.terminal.working_line import WorkingLine
from co_cli.terminal_text import counted, printable
from co_cli.vocabulary import MEMORY_EXTRACTION, WAITING_FOR_MODEL

if TYPE_CHECKING:
    from pydantic_ai import CancellationToken
    from pydantic_ai.messages import ModelMessage

    from co_cli.session import Conversation, TurnOutcome, TurnView
    from co_cli.store import SessionInfo, Store
    from co_cli.terminal.approval_prompt import TerminalApprover
    from co_cli.tools.mcp.servers import McpServers

T = TypeVar("T")


class ChatApp:
    """The terminal side of a conversation.

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
            if self._conv.mcp is not None:
                start_mcp_servers(self, self._conv.mcp)
        return self._conv

    async def finish_background(self) -> None:
        """Before exit: the session's title, and the memory extraction of the last turns (interrupted, that
        stays queued for the next co)."""
        if self._conv is None:
            return
        if self._orphans is not None:
            with contextlib.suppress(Exception):
                await self._orphans
        await self._conv.finish_background()
        worker = self._conv.background.memory_worker
        if worker is None:
            return
        line = WorkingLine(self.console, hint="Ctrl-C leaves it for the next co")
        try:  # a wait of more than half a second is shown: on the working line in a terminal
            await worker.drain((lambda _: line.show(MEMORY_EXTRACTION)) if self.interactive else self.note)
        except (KeyboardInterrupt, asyncio.CancelledError):
            await worker.stop()
        finally:
            line.hide()

    # ----- output helpers ----------------------------------------------------------------------------
    def info(self, message: str) -> None:
        if self.interactive:
            self.console.print(message_text(message, "cyan"))
        else:
            print(plain_message(message), file=self.out, flush=True)

    def note(self, message: str) -> None:
        """Context for the user; in piped mode on stderr, so stdout holds only answers and command output."""
        if self.interactive:
            self.console.print(message_text(message, "cyan"))
        else:
            print(plain_message(message), file=sys.stderr, flush=True)

    def error(self, message: str) -> None:
        self.errors += 1
        message = retold(message, self.hints)
        if self.interactive:  # provider error bodies come from the server: printed without controls
            print_error(self.console, message)
        else:
            print(f"error: {plain_message(message)}", file=sys.stderr, flush=True)

    def banner(self) -> None:
        """The model and where the conversation goes; a resumed session is named by the Resumed line after it."""
        session = self._conv.session if self._conv else None
        where = "" if session else " · new session"
        if not self.saving:
            where = " · not saving (--no-save)"
        self.info(f"co · {self.choice.spec} ({self.choice.reason}){where}")
        if self.interactive and self.choice.spec == "local":
            self.console.print(Text(EMBEDDED_MODEL_NOTE, style="yellow"))
        if self.interactive:
            self.console.print(Text("Type /help for commands, Ctrl-D to quit.", style="dim"))

    def show_instructions_files(self) -> None:
        """At start: one line naming the instructions files read (interactive only), one per file skipped."""
        if self._conv is not None:
            found, cwd = self._conv.instructions_files, self._conv.cwd
        else:
            from co_cli.memory.instructions_files import instructions_files_for

            cwd = Path.cwd()
            found = instructions_files_for(cwd, self.loaded.settings, self.loaded.paths)
        if found.files and self.interactive:
            names = ", ".join(_short_path(file.path, cwd) for file in found.files)
            self.console.print(Text(printable(f"Instructions from {names}"), style="dim"))
        for skipped in found.skipped:
            self.note(f"warning: instructions file {_short_path(skipped.path, cwd)} skipped: {skipped.reason}")

    def toolbar(self) -> str:
        """The line under the prompt (``toolbar.Toolbar``)."""
        return self._toolbar.text(self._conv)

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

    def cancel_turn(self) -> None:
        if self._token is not None:
            self._token.cancel()

    @contextlib.contextmanager
    def _stoppable(self, cancel: Callable[[], object]) -> Iterator[None]:
        """While a turn or a compaction runs: Ctrl-C (and SIGTERM, SIGHUP: ``_on_sigint``) and, in a terminal, Esc
        call ``cancel``; keys typed meanwhile are kept for the next prompt."""
        with self._on_sigint(asyncio.get_running_loop(), cancel), self.keys.reading(cancel):
            yield

    @contextlib.contextmanager
    def _on_sigint(self, loop: asyncio.AbstractEventLoop, cancel: Callable[[], object]) -> Iterator[None]:
        """Ctrl-C while a turn (or a compaction) runs cancels that only, not co. SIGTERM and SIGHUP (terminal
        closed) cancel it too, which kills the commands it started, then end co with status 128 + signal."""
        from co_cli.tools.processes import EXIT_SIGNALS, install_exit_handlers

        # asyncio signal handlers exist only on Unix and only in the main thread; elsewhere Ctrl-C stays default.
        installed = sys.platform != "win32" and threading.current_thread() is threading.main_thread()
        ending: list[int] = []

        def end(signum: int) -> None:
            ending.append(signum)
            cancel()

        if installed:
            loop.add_signal_handler(signal.SIGINT, cancel)
            for sig in EXIT_SIGNALS:
                loop.add_signal_handler(sig, end, sig)
        try:
            yield
        finally:
            if installed:
                for sig in (signal.SIGINT, *EXIT_SIGNALS):
                    loop.remove_signal_handler(sig)
                install_exit_handlers()  # between turns, SIGTERM/SIGHUP still kill what commands left running
            if ending:
                if self._conv is not None:
                    self._conv.release()  # the session is free for the next co at once
                raise SystemExit(128 + ending[0])

    # ----- what commands use (see commands.CommandHost) ------------------------------------------------
    def show(self, renderable: object) -> None:
        """Print a table or other renderable (plain, without colour, when not in a terminal). A string is text
        from a user, a model, a tool or a file: printed as it is, never read as markup, without control
        characters."""
        if isinstance(renderable, str):
            renderable = printable(renderable)
            if not self.interactive:
                print(renderable, file=self.out, flush=True)
                return
            renderable = Text(renderable)
        if self.interactive:
            self.console.print(renderable)
        else:
            Console(file=self.out, width=120, no_color=True).print(renderable)

    async def confirm(self, question: str) -> bool:
        """A yes/no question (no by default); in piped mode there is nobody to ask and the answer is yes."""
        if not self.interactive:
            return True
        answer = await self.ask(f"{question} [y/N] ")
        return (answer or "").strip().lower() in ("y", "yes")

    async def ask(self, question: str, default: str = "") -> str | None:
        """One line of answer from the user (the line starts as ``default``); None when nobody can be asked
        (piped mode) or the user pressed Ctrl-C or Ctrl-D."""
        if not self.interactive:
            self.note(f"{question}(no terminal to ask: discarded)")
            return None
        from prompt_toolkit import PromptSession

        try:
            return await PromptSession[str]().prompt_async(question, default=default)
        except (KeyboardInterrupt, EOFError):
            return None

    async def cancellable(self, work: Coroutine[Any, Any, T], status: str) -> T | None:
        """Run ``work`` under the working line saying ``status``; Esc or Ctrl-C cancels it (None) and not co."""
        task = asyncio.ensure_future(work)
        line = WorkingLine(self.console)
        try:
            with self._stoppable(task.cancel):
                if self.interactive:
                    line.show(status)
                return await task
        except asyncio.CancelledError:
            return None
        finally:
            line.hide()

    def show_resumed(self, exchanges: int = 3) -> None:
        """The resumed session, and its last exchanges as the transcript has them (a compaction may have
        summarised them out of the working context)."""
        session = self.conv.session
        if session is None:
            return
        info = self.store.sessions.get(session.id)
        compacted = f" · {counted(info.compaction_count, 'compaction')}" if info.compaction_count else ""
        self.note(
            f"Resumed {info.id} · {info.title or 'untitled'} · {counted(info.message_count, 'message')}"
            f"{compacted} · model {info.model}"
        )
        recent = self.store.messages.messages(info.id, after_seq=info.message_count - 1 - RECAP_MESSAGES)
        for role, text in last_exchanges(recent, exchanges):
            lines = preview_lines(f"{role}: {printable(text)}")
            if self.interactive:
                self.console.print(Text("\n".join(lines), style="dim"))
            else:
                print("\n".join(lines), file=sys.stderr)

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


def _short_path(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when inside it, with ``~`` for the home directory otherwise."""
    cwd = cwd.resolve()
    if path.is_relative_to(cwd):
        return str(path.relative_to(cwd))
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


RECAP_MESSAGES = 40
"""How many of the last saved messages the resume recap looks through for its exchanges."""

PREVIEW_LINES = 6
PREVIEW_LINE_CHARS = 200


def last_exchanges(messages: Sequence[ModelMessage], count: int) -> list[tuple[str, str]]:
    """The last few (role, text) pairs of user prompts and assistant answers; co's own summaries and
    acknowledgements are neither."""
    from co_cli.message_view import answer_text, user_text
    from co_cli.synthetic import is_ack

    pairs: list[tuple[str, str]] = []
    for message in messages:
        if is_ack(message):
            continue
        typed = user_text(message)
        if typed is not None:
            pairs.append(("you", typed))
            continue
        answer = answer_text(message)
        if answer.strip():
            pairs.append(("co", answer))
    return pairs[-2 * count :]


def preview_lines(text: str) -> list[str]:
    """A message for the resume preview: its line breaks kept (blank lines dropped), at most a few lines,
    each cut to a readable width."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    shown = [line if len(line) <= PREVIEW_LINE_CHARS else line[: PREVIEW_LINE_CHARS - 1] + "…" for line in lines]
    if len(shown) > PREVIEW_LINES:
        shown = [*shown[: PREVIEW_LINES - 1], shown[PREVIEW_LINES - 1] + " …"]
    return shown or [text.strip()]


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
