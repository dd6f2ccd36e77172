"""What the terminal side of a conversation shows: messages, errors, tables, the banner, the resumed session's
last exchanges and the toolbar, on a terminal with rich or as plain lines to a pipe."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.text import Text

from co_cli.failure_text import HintPlace, retold
from co_cli.models import EMBEDDED_MODEL_NOTE
from co_cli.terminal.render import message_text, plain_message, print_error
from co_cli.terminal_text import counted, printable

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from co_cli.config import LoadedSettings
    from co_cli.models import ModelChoice
    from co_cli.session import Conversation
    from co_cli.store import Store
    from co_cli.terminal.toolbar import Toolbar


class ChatOutput:
    """What the chat shows (``ChatApp`` sets what it reads: the console, the mode, the conversation)."""

    console: Console
    out: TextIO
    interactive: bool
    saving: bool
    """False with --no-save: the store is a scratch one, removed at exit."""
    errors: int
    hints: HintPlace
    choice: ModelChoice
    loaded: LoadedSettings
    store: Store
    _conv: Conversation | None
    _toolbar: Toolbar

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
            found, cwd = self._conv.workspace.instructions_files, self._conv.workspace.cwd
        else:
            from co_cli.memory.instructions_files import instructions_files_for

            cwd = Path.cwd()
            found = instructions_files_for(cwd, self.loaded.settings, self.loaded.paths)
        if found.files and self.interactive:
            names = ", ".join(_short_path(file.path, cwd) for file in found.files)
            self.console.print(Text(printable(f"Instructions from {names}"), style="dim"))
        for skipped in found.skipped:
            self.note(f"warning: instructions file {_short_path(skipped.path, cwd)} skipped: {skipped.reason}")

    def show_resumed(self, exchanges: int = 3) -> None:
        """The resumed session, and its last exchanges as the transcript has them (a compaction may have
        summarised them out of the working context)."""
        session = self._conv.session if self._conv is not None else None
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

    def toolbar(self) -> str:
        """The line under the prompt (``toolbar.Toolbar``)."""
        return self._toolbar.text(self._conv)


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
