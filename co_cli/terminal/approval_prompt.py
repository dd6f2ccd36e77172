"""The terminal's approval question: shows the exact call (an edit as its coloured diff, cut to the screen) and
takes one key: y, n (or Esc), a, and d to see the whole of a long diff.

Only keys typed after the question is drawn count: input typed earlier (say ``y⏎`` while the model was
still answering) is discarded, so nothing is approved that the user has not seen.

The question never takes over SIGINT: the running turn's handler stays in place, so a Ctrl-C sent as a
signal after the answer (while the approved command runs) still stops the turn. At the question itself the
terminal is in raw mode and Ctrl-C arrives as a key, which cancels the turn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.input import Input

    from co_cli.tools.approval import ApprovalRequest

ESCAPE_WAIT = 0.05
"""Seconds to wait after Esc for the rest of an escape sequence (arrow keys) before Esc counts as "no"."""
DIFF_MARGIN_ROWS = 6
"""Rows a diff leaves free on the screen: the question's own lines and the answer."""
DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def discard_typeahead(session: PromptSession[str] | None = None, input: Input | None = None) -> None:
    """Drop input typed before now: the terminal's pending input and prompt-toolkit's saved typeahead."""
    try:
        import termios

        if sys.stdin.isatty():
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass
    target = session.input if session is not None else input
    if target is not None:
        from prompt_toolkit.input.typeahead import clear_typeahead

        clear_typeahead(target)


def key_hints(request: ApprovalRequest) -> list[tuple[str, str]]:
    """The keys the question takes, each with what it does; "a" only where it allows something more (for an
    edit: edits of that file)."""
    hints = [("y", "yes, once"), ("n", "no (Esc)")]
    if request.command is not None:
        hints.append(("a", "yes, and allow this exact command for the rest of the session"))
    elif request.always is not None:
        hints.append(("a", f"yes, and allow {request.always_label} for the rest of the session"))
    return hints


def diff_text(lines: list[str]) -> Text:
    """Lines of a unified diff, coloured (added green, removed red, hunk headers cyan), made safe to print."""
    from co_cli.terminal_text import printable

    text = Text()
    for line in lines:
        style = next((style for mark, style in DIFF_STYLES if line.startswith(mark)), "")
        text.append(printable(line).expandtabs(4), style=style)
        text.append("\n")
    text.rstrip()
    return text


def diff_rows(console: Console) -> int:
    """How many lines of a diff the question shows at first: what fits on the screen with the question."""
    return max(5, console.size.height - DIFF_MARGIN_ROWS)


def answer_line(answer: str, request: ApprovalRequest) -> str:
    """What the user's key did, printed in place of the question."""
    if answer == "a" and request.command is not None:
        return "  ✓ approved; this exact command runs without asking for the rest of the session"
    if answer == "a" and request.diff is not None:
        return f"  ✓ approved; {request.always_label} are made without asking for the rest of the session"
    if answer == "a" and request.always is not None:
        return f"  ✓ approved; {request.always_label} runs without asking for the rest of the session"
    return "  ✓ approved" if answer in ("y", "a") else "  ✗ denied"


def hint_lines(hints: list[tuple[str, str]], width: int) -> list[list[tuple[str, str]]]:
    """The hints laid out in lines of at most ``width`` columns, never broken inside a word: as many hints on a
    line as fit (" · " between them), a hint too long for one line wrapped at its spaces, indented under its
    meaning. Each line is (key, text) pieces: the key of a hint, or "" for the text around it."""
    import textwrap

    lines: list[list[tuple[str, str]]] = []
    line: list[tuple[str, str]] = []
    used = 0
    for key, meaning in hints:
        hint = f"{key} {meaning}"
        if line and used + 3 + len(hint) <= width:
            line += [("", " · "), (key, ""), ("", f" {meaning}")]
            used += 3 + len(hint)
            continue
        if line:
            lines.append(line)
        wrapped = textwrap.wrap(meaning, max(10, width - 2 - len(key) - 1)) or [""]
        line = [("", "  "), (key, ""), ("", f" {wrapped[0]}")]
        used = 2 + len(key) + 1 + len(wrapped[0])
        for more in wrapped[1:]:
            lines.append(line)
            line = [("", " " * (2 + len(key) + 1) + more)]
            used = 2 + len(key) + 1 + len(more)
    if line:
        lines.append(line)
    return lines


class TerminalApprover:
    """Asks the user about one tool call (an ``ApprovalPrompt``): "y" once, "n" deny, "a" always.

    ``before_asking`` clears what the turn shows (its streamed text, the working line) before the question;
    ``after_asking`` gets the answer; ``cancel_turn`` stops the turn (Ctrl-C at the question). The chat app
    sets them when it takes the approver."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.before_asking: Callable[[], None] | None = None
        self.after_asking: Callable[[str], None] | None = None
        self.cancel_turn: Callable[[], None] | None = None

    def _show_diff(self, diff: str | None) -> list[str]:
        """Print the diff's first screenful; the lines left for "d"."""
        if diff is None:
            return []
        lines = diff.splitlines()
        rows = diff_rows(self.console)
        shown, rest = (lines, []) if len(lines) <= rows + 1 else (lines[:rows], lines[rows:])
        self.console.print(diff_text(shown))
        if rest:
            self.console.print(Text(f"  … {len(rest)} more lines (d shows them)", style="dim"))
        return rest

    async def __call__(self, request: ApprovalRequest) -> str:
        from co_cli.tools.approval import describe_call

        if self.before_asking is not None:
            self.before_asking()
        self.console.print(Text(f"Approve {describe_call(request.tool_name, request.args)}", style="bold yellow"))
        if request.reason:
            self.console.print(Text(f"  ({request.reason})", style="yellow"))
        allow_always = request.command is not None or request.always is not None
        rest = self._show_diff(request.diff)
        while True:
            hints = key_hints(request) + ([("d", f"show the {len(rest)} more lines of the diff")] if rest else [])
            answer, cancelled = await read_answer(hints, allow_always=allow_always, show_all=bool(rest))
            if answer != "d":
                break
            self.console.print(diff_text(rest))
            rest = []
        if cancelled and self.cancel_turn is not None:
            self.cancel_turn()
        self.console.print(Text(answer_line(answer, request), style="green" if answer in ("y", "a") else "yellow"))
        if self.after_asking is not None:
            self.after_asking(answer)
        return answer


async def read_answer(hints: list[tuple[str, str]], *, allow_always: bool, show_all: bool = False) -> tuple[str, bool]:
    """One key from the user: ("y" | "n" | "a" | "d", whether the turn is to be cancelled). Ctrl-C cancels the
    turn (and denies); Ctrl-D, Esc and "n" deny; "d" (``show_all``) asks for the whole diff; Enter alone does
    nothing, so a stray Enter approves nothing."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.layout import Layout, Window
    from prompt_toolkit.layout.controls import FormattedTextControl

    bindings = KeyBindings()

    def answer(value: str, *, cancel: bool = False) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            event.app.exit(result=(value, cancel))

        return handler

    for key in ("y", "Y"):
        bindings.add(key)(answer("y"))
    for key in ("n", "N", "escape", "c-d"):
        bindings.add(key)(answer("n"))
    if allow_always:
        for key in ("a", "A"):
            bindings.add(key)(answer("a"))
    if show_all:
        for key in ("d", "D"):
            bindings.add(key)(answer("d"))
    bindings.add("c-c")(answer("n", cancel=True))

    def question() -> StyleAndTextTuples:
        from prompt_toolkit.application import get_app

        parts: StyleAndTextTuples = []
        for number, line in enumerate(hint_lines(hints, get_app().output.get_size().columns - 1)):
            if number:
                parts.append(("", "\n"))
            parts += [("bold", key) if key else ("", text) for key, text in line]
        return parts

    app: Application[tuple[str, bool]] = Application(
        layout=Layout(
            Window(FormattedTextControl(question, show_cursor=False), wrap_lines=True, dont_extend_height=True)
        ),
        key_bindings=bindings,
        erase_when_done=True,
    )
    app.ttimeoutlen = ESCAPE_WAIT
    discard_typeahead(input=app.input)
    result = await app.run_async(handle_sigint=False)
    return result if result is not None else ("n", False)
