"""The chat loop: reads input, runs turns with cancellation, and hands slash commands to the registry."""

from __future__ import annotations

import asyncio
import contextlib
import html
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.text import Text

from co_cli.config import LoadedSettings
from co_cli.errors import CoError
from co_cli.models import ModelChoice, resolve_model
from co_cli.provider_errors import describe_provider_error
from co_cli.repl import commands
from co_cli.repl.render import PlainView, TerminalView, print_error
from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from pydantic_ai import CancellationToken

    from co_cli.repl.conversation import Conversation, TurnOutcome, TurnView
    from co_cli.store.sessions import SessionStore
    from co_cli.tools.approval import ApprovalRequest


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
        store: SessionStore | None,
        interactive: bool,
        console: Console | None = None,
        out: TextIO | None = None,
    ) -> None:
        self._conv: Conversation | None = None
        self._builder: Callable[[], Conversation] | None = None
        self._pending: asyncio.Future[Conversation] | None = None
        if callable(conv):
            self._builder = conv
        else:
            self._conv = conv
        self.choice = choice
        self.loaded = loaded
        self.store = store
        self.interactive = interactive
        self.console = console or Console(highlight=False)
        self.out = out or sys.stdout
        self.running = True
        self.errors = 0
        self._token: CancellationToken | None = None
        self.view: TurnView = TerminalView(self.console) if interactive else PlainView(self.out)
        self._prompt_session = None

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
        return self._conv

    # ----- output helpers ----------------------------------------------------------------------------
    def info(self, message: str) -> None:
        if self.interactive:
            self.console.print(Text(message, style="cyan"))
        else:
            print(message, file=self.out, flush=True)

    def note(self, message: str) -> None:
        """Context for the user; in piped mode on stderr, so stdout holds only answers and command output."""
        if self.interactive:
            self.console.print(Text(message, style="cyan"))
        else:
            print(message, file=sys.stderr, flush=True)

    def error(self, message: str) -> None:
        self.errors += 1
        if self.interactive:
            print_error(self.console, message)
        else:
            print(f"error: {message}", file=sys.stderr, flush=True)

    def banner(self) -> None:
        session = self._conv.session if self._conv else None
        where = f"session {session.id[:8]} · {session.title}" if session else "new session"
        if self.store is None:
            where = "not saving (--no-save)"
        self.info(f"co · {self.choice.spec} ({self.choice.reason}) · {where}")
        if self.interactive:
            self.console.print(Text("Type /help for commands, Ctrl-D to quit.", style="dim"))

    def toolbar(self) -> str:
        if self._conv is None:
            return html.escape(f" {self.choice.spec} │ loading… ")
        r = self._conv.resolved
        session = self._conv.session.id[:8] if self._conv.session else "new"
        pct = self._conv.percent_used()
        return html.escape(f" {r.label} │ session {session} │ context {pct:.0f}% of {r.context_window:,} ")

    # ----- turns -------------------------------------------------------------------------------------
    async def turn(self, prompt: str) -> TurnOutcome:
        from pydantic_ai import CancellationToken

        token = self._token = CancellationToken()
        loop = asyncio.get_running_loop()
        with self._on_sigint(loop, token.cancel):
            outcome = await self.conv.run_turn(prompt, self.view, token)
        if outcome.status == "failed" and outcome.error:
            self.error(outcome.error)
            if self.interactive:
                self.console.print(Text("Your prompt is kept: press Up to edit it, or /retry.", style="dim"))
        return outcome

    @contextlib.contextmanager
    def _on_sigint(self, loop: asyncio.AbstractEventLoop, cancel: Callable[[], object]) -> Iterator[None]:
        """Ctrl-C while a turn (or a compaction) runs cancels that only, not co. SIGTERM and SIGHUP (terminal
        closed) cancel it too, which kills the commands it started, then end co with status 128 + signal."""
        from co_cli.tools.shell import EXIT_SIGNALS, install_exit_handlers

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

    async def ask_approval(self, request: ApprovalRequest) -> str:
        """y = once, n = deny, a = allow this exact command for the rest of the session."""
        from prompt_toolkit import PromptSession

        from co_cli.tools.approval import describe_call

        if isinstance(self.view, TerminalView):
            self.view.pause()
        self.console.print(Text(f"Approve {describe_call(request.tool_name, request.args)}?", style="bold yellow"))
        if request.reason:
            self.console.print(Text(f"  ({request.reason})", style="yellow"))
        session: PromptSession[str] = PromptSession()
        while True:
            try:
                answer = (await session.prompt_async("  [y]es once / [n]o / [a]lways this command: ")).strip().lower()
            except EOFError:
                return "n"
            except KeyboardInterrupt:  # Ctrl-C at the question cancels the whole turn
                if self._token is not None:
                    self._token.cancel()
                return "n"
            if answer in ("y", "yes"):
                return "y"
            if answer in ("n", "no", ""):
                return "n"
            if answer in ("a", "always"):
                return "a"

    # ----- commands the registry calls ----------------------------------------------------------------
    def switch_model(self, spec: str) -> None:
        settings = self.loaded.settings.model_copy(update={"model": spec})
        resolved = resolve_model(settings, "command line")
        self.conv.switch_model(resolved)
        self.info(f"Model: {resolved.label} ({resolved.choice.reason}); window {resolved.context_window:,}")

    async def compact(self, focus: str) -> None:
        before = len(self.conv.working)
        if before == 0:
            self.error("nothing to compact yet")
            return
        task = asyncio.ensure_future(self.conv.compact(focus))
        try:
            with (
                self._on_sigint(asyncio.get_running_loop(), task.cancel),
                self.console.status("Compacting…") if self.interactive else contextlib.nullcontext(),
            ):
                result = await task
        except asyncio.CancelledError:
            self.info("Compaction cancelled; history unchanged.")
            return
        except CoError as exc:
            self.error(exc.message)
            return
        except Exception as exc:
            self.error(f"compaction failed, history unchanged: {describe_provider_error(exc)}")
            return
        self.info(f"Compacted {result.n_replaced} messages: ~{result.tokens_before} -> ~{result.tokens_after} tokens")

    def show_context(self) -> None:
        from co_cli.repl.context_view import render_context

        self.console.print(render_context(self.conv.report())) if self.interactive else print(
            render_context(self.conv.report(), plain=True), file=self.out
        )

    def _need_store(self) -> bool:
        if self.store is None:
            self.error("sessions are not being saved (--no-save)")
            return False
        return True

    def show_sessions(self, query: str) -> None:
        from co_cli.sessions_view import search_table, sessions_table

        if not self._need_store():
            return
        assert self.store is not None
        if query:
            hits = self.store.search(query, limit=20)
            if not hits:
                self.info(f"No sessions match {query!r}.")
                return
            self._print(search_table(hits))
        else:
            sessions = self.store.list(limit=30)
            if not sessions:
                self.info("No saved sessions yet.")
                return
            self._print(sessions_table(sessions))

    def _print(self, renderable: object) -> None:
        if self.interactive:
            self.console.print(renderable)
        else:
            Console(file=self.out, width=120, no_color=True).print(renderable)

    def resume(self, ident: str) -> None:
        if not self._need_store():
            return
        assert self.store is not None
        session = self.store.get(ident)
        if session.id == self.conv.session_id:
            self.info("That is the current session.")
            return
        self.conv.load(session)
        if session.model and session.model != self.conv.resolved.label:
            # Continue with the model the session was using, as `co chat --resume` does.
            try:
                self.conv.switch_model(
                    resolve_model(self.loaded.settings.model_copy(update={"model": session.model}), "session")
                )
            except CoError as exc:
                self.error(f"keeping {self.conv.resolved.label}: the session's model cannot be used ({exc.message})")
        self.show_resumed()

    def show_resumed(self, exchanges: int = 3) -> None:
        session = self.conv.session
        if session is None:
            return
        info = self.store.get(session.id) if self.store else session
        self.note(
            f"Resumed {info.id} · {info.title} · {info.message_count} messages · "
            f"{info.compaction_count} compactions · model {info.model}"
        )
        for role, text in last_exchanges(self.conv.working, exchanges):
            line = " ".join(printable(text).split())
            line = line if len(line) <= 200 else line[:199] + "…"
            if self.interactive:
                self.console.print(Text(f"{role}: {line}", style="dim"))
            else:
                print(f"{role}: {line}", file=sys.stderr)

    def fork(self) -> None:
        if not self._need_store():
            return
        if self.conv.session is None:
            self.error("nothing to fork yet: this conversation has no messages")
            return
        parent = self.conv.session.id
        forked = self.conv.fork()
        if forked:
            self.info(f"Forked {parent[:8]} -> {forked.id}; you are now in the fork.")

    def rename(self, title: str) -> None:
        if not self._need_store():
            return
        if not title:
            self.error("usage: /rename <title>")
            return
        if self.conv.session is None:
            self.error("nothing to rename yet: this conversation has no messages")
            return
        assert self.store is not None
        self.store.rename(self.conv.session.id, title)
        self.conv.session = self.store.get(self.conv.session.id)
        self.info(f"Renamed to: {self.conv.session.title}")

    async def delete(self, ident: str) -> None:
        if not self._need_store():
            return
        if not ident:
            self.error("usage: /delete <id or prefix>")
            return
        assert self.store is not None
        session = self.store.get(ident)
        if self.interactive:
            from prompt_toolkit import PromptSession

            try:
                answer = await PromptSession[str]().prompt_async(f"Delete {session.id} ({session.title})? [y/N] ")
            except (KeyboardInterrupt, EOFError):
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                self.info("Not deleted.")
                return
        current = session.id == self.conv.session_id
        if current:
            self.conv.new()
        self.store.delete(session.id, files_root=self.loaded.paths.tool_outputs)
        self.info(f"Deleted {session.id}." + (" Started a new conversation." if current else ""))

    # ----- loops -------------------------------------------------------------------------------------
    async def handle(self, line: str) -> None:
        await self.ready()
        if line.strip().startswith("/"):
            await commands.dispatch(self, line)
        elif line.strip():
            await self.turn(line)

    async def run_interactive(self) -> None:
        from co_cli.repl.prompt import PROMPT, make_session

        self.banner()
        if self._conv is not None and self._conv.session:
            self.show_resumed()
        session = make_session(self, self.loaded.paths.input_history, self.toolbar)
        watchers: list[asyncio.Task[None]] = []

        def start_build() -> None:
            if self._conv is None and not watchers:
                self._start_build()
                watchers.append(asyncio.ensure_future(self._exit_if_build_fails(session)))

        def after_first_draw() -> None:
            # pre_run runs just before the first redraw; start loading right after it, as the import
            # thread competes with drawing for the GIL.
            asyncio.get_running_loop().call_soon(start_build)

        while self.running:
            try:
                line = await session.prompt_async(PROMPT, pre_run=after_first_draw)
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line
            except EOFError:
                break
            try:
                await self.handle(line)
            except CoError as exc:
                self.error(exc.message)
        for watcher in watchers:
            watcher.cancel()
        if self._conv is not None:
            self._conv.release()

    async def _exit_if_build_fails(self, session: Any) -> None:
        """A model that cannot be built (e.g. a missing key) ends the prompt with its one-line error."""
        try:
            await self.ready()
        except CoError as exc:
            if session.app.is_running:
                session.app.exit(exception=exc)

    async def run_lines(self, lines: TextIO) -> int:
        """Piped stdin: each line is one input; exit at EOF. Returns the exit code."""
        await self.ready()
        failed = False
        for raw in lines:
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            try:
                if line.strip().startswith("/"):
                    await commands.dispatch(self, line)
                else:
                    outcome = await self.turn(line)
                    failed = failed or outcome.status == "failed"
            except CoError as exc:
                self.error(exc.message)
                failed = True
            if not self.running:
                break
        self.conv.release()
        return 1 if failed or self.errors else 0

    async def run_once(self, prompt: str) -> int:
        await self.ready()
        outcome = await self.turn(prompt)
        self.conv.release()
        return 0 if outcome.status == "ok" else 1


def last_exchanges(messages: list, count: int) -> list[tuple[str, str]]:
    """The last few (role, text) pairs of user prompts and assistant answers."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from co_cli.context.window import is_summary_message

    pairs: list[tuple[str, str]] = []
    after_summary = False
    for message in messages:
        if is_summary_message(message):  # a summary is not something the user typed
            after_summary = True
            continue
        if after_summary and isinstance(message, ModelResponse):  # nor is its acknowledgement an answer
            after_summary = False
            continue
        after_summary = False
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    pairs.append(("you", part.content))
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                pairs.append(("co", text))
    return pairs[-2 * count :]
