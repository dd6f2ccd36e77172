"""Terminal output: streamed Markdown answers, tool lines, notices and errors."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.text import Text

from co_cli.terminal.working_line import WorkingLine
from co_cli.terminal_text import counted, printable
from co_cli.vocabulary import WAITING_FOR_MODEL

if TYPE_CHECKING:
    from rich.live import Live
    from rich.markdown import Markdown

FENCE = "```"
MEMORY_CHANGE_TOOLS = ("remember", "forget")
"""Tools whose result is shown whole, as one dim line (``remembered m12: ...  (/forget m12)``)."""


def stable_split(text: str, start: int = 0) -> int:
    """Index up to which ``text`` can be rendered for good: the last blank line outside a code fence.

    Blocks before it never change as more tokens arrive, so they are printed once; only the block after
    it is re-rendered while it streams. ``start`` is a known split point to scan from.
    """
    in_fence = False
    split = start
    pos = start
    for line in text[start:].splitlines(keepends=True):
        pos += len(line)
        if not line.endswith("\n"):
            break  # the last, still growing line
        if line.lstrip().startswith(FENCE):
            in_fence = not in_fence
            if not in_fence:
                split = pos  # a closed fence ends a block
        elif not in_fence and not line.strip():
            split = pos
    return split


def chat_markdown(text: str) -> Markdown:
    """Markdown as chat interfaces show a model's answer: a single line break is a line break (plain Markdown
    joins such lines into one paragraph, so a poem or a list of steps without bullets runs together).
    Code blocks are unaffected: their text is not inline markup."""
    from rich.markdown import Markdown

    markdown = Markdown(text)
    for token in markdown.parsed:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type = "hardbreak"
    return markdown


class MarkdownStream:
    """Streams Markdown: finished blocks are printed once, the growing block is shown in a small live area."""

    def __init__(self, console: Console, refresh_per_second: float = 12.0) -> None:
        self.console = console
        self.buffer = ""
        self.done = 0  # characters of buffer already printed for good
        self.live: Live | None = None
        self.refresh_per_second = refresh_per_second

    def feed(self, delta: str) -> None:
        delta = printable(delta)
        if not delta:
            return
        # Imported on the first token, not at startup (markdown-it costs ~40 ms).
        from rich.live import Live

        self.buffer += delta
        split = stable_split(self.buffer, self.done)
        if split > self.done:
            block = self.buffer[self.done : split]
            self.done = split
            self._stop_live()
            if block.strip():
                self.console.print(chat_markdown(block))
        tail = self.buffer[self.done :]
        if tail.strip():
            if self.live is None:
                self.live = Live(
                    chat_markdown(tail),
                    console=self.console,
                    refresh_per_second=self.refresh_per_second,
                    transient=True,
                    vertical_overflow="visible",
                )
                self.live.start()
            else:
                self.live.update(chat_markdown(tail))

    def _stop_live(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def finish(self) -> str:
        """Print what is left and return the whole answer."""
        self._stop_live()
        tail = self.buffer[self.done :]
        if tail.strip():
            self.console.print(chat_markdown(tail))
        text, self.buffer, self.done = self.buffer, "", 0
        return text


def _arg(value: Any) -> str:
    """A string argument as it is (a shell command stays readable); anything else, or a string with line
    breaks or quotes that would be ambiguous, as its repr."""
    if isinstance(value, str) and "\n" not in value and not value.startswith(("'", '"')):
        return value
    return repr(value)


def short_args(args: Any, limit: int = 160) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return args[:limit]
    text = ", ".join(f"{k}={_arg(v)}" for k, v in args.items()) if isinstance(args, dict) else repr(args)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _result_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _size(chars: int) -> str:
    return f"{chars} chars" if chars < 1024 else f"{chars / 1024:.1f} KB"


def summarize_result(content: Any) -> str:
    text = _result_text(content)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > 100:
        first = first[:99] + "…"
    unit = _size(len(text))
    return f"{unit}: {first}" if first else unit


RESULT_LINES = 5
"""How many lines of a tool's output the terminal shows under the call (``/last`` shows it whole)."""
LAST_COMMAND = "/last"


def result_preview(content: Any, max_lines: int = RESULT_LINES) -> tuple[str, list[str], int]:
    """A tool output as the terminal shows it: its size (lines and characters), its first ``max_lines``
    non-blank lines (without control characters; tabs as spaces) and how many non-blank lines are left out."""
    text = _result_text(content)
    lines = [printable(line).expandtabs(4).rstrip() for line in text.splitlines()]
    filled = [line for line in lines if line.strip()]
    size = f"{counted(len(lines), 'line')}, {_size(len(text))}"
    return size, filled[:max_lines], max(0, len(filled) - max_lines)


def parsed_args(args: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict (they may arrive as a JSON string); {} when they are not one."""
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return {}
    return args if isinstance(args, dict) else {}


class TerminalView:
    """A ``TurnView`` for an interactive terminal (rich): the answer streams as Markdown; while co waits,
    the working line says for what."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.stream = MarkdownStream(console)
        self.working_line = WorkingLine(console)
        self._running = ""
        """The last tool call, as the working line names it while the tool runs."""

    def working(self, what: str) -> None:
        if self.stream.live is not None:
            return  # the answer is streaming: it shows that co works
        self.working_line.show(what)

    def text(self, delta: str) -> None:
        if delta and self.working_line.shown:
            self.working_line.hide()
        self.stream.feed(delta)

    def pause(self) -> None:
        """Print what has streamed so far and clear the working line (before an approval question)."""
        self.working_line.hide()
        self.stream.finish()

    def after_question(self, approved: bool) -> None:
        """The approval question was answered: the tool runs, or the model is told it may not."""
        self.working(self._running if approved and self._running else WAITING_FOR_MODEL)

    def tool_call(self, name: str, args: Any) -> None:
        self.working_line.hide()
        self.stream.finish()
        from co_cli.tools.approval import describe_call

        self._running = f"running {describe_call(name, parsed_args(args))}"
        if name not in MEMORY_CHANGE_TOOLS:  # a memory tool's result is the one line shown
            self.console.print(Text(printable(f"⚙ {name}({short_args(args)})"), style="dim"))
        self.working(self._running)

    def tool_result(self, name: str, content: Any) -> None:
        if name in MEMORY_CHANGE_TOOLS and isinstance(content, str):
            self.console.print(Text(printable(content), style="dim"))
        else:
            self._show_output(name, content)
        self.working(WAITING_FOR_MODEL)

    def _show_output(self, name: str, content: Any) -> None:
        """The output's size and first lines, each cut to the terminal's width; ``/last`` shows it whole."""
        size, lines, left_out = result_preview(content)
        width = self.console.width
        cut = any(len(line) + 4 > width for line in lines)
        hint = f" · {LAST_COMMAND} shows it all" if left_out or cut else ""
        rows = [f"  ↳ {printable(name)}: {size}{hint}", *(f"    {line}" for line in lines)]
        if left_out:
            rows.append(f"    … {counted(left_out, 'more line')}")
        for row in rows:
            self.console.print(Text(row, style="dim"), no_wrap=True, overflow="ellipsis", crop=True)

    def notice(self, message: str) -> None:
        self.stream.finish()
        self.console.print(Text(printable(f"• {message}"), style="yellow"))

    def end(self, interrupted: bool = False) -> None:
        self.working_line.hide()
        self.stream.finish()
        if interrupted:
            self.console.print(Text("[interrupted]", style="yellow"))


class PlainView:
    """A ``TurnView`` for pipes and ``-p``: the answer as plain text on ``out``, the rest on ``err``."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, show_tools: bool = True) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.show_tools = show_tools
        self._wrote = False
        self._ends_newline = True
        self.out_closed = False
        """The reader of ``out`` went away (a broken pipe): the turn goes on and is saved, unprinted."""

    def _write(self, text: str) -> None:
        if self.out_closed:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.out_closed = True

    def text(self, delta: str) -> None:
        # The answer is kept exact for a pipe or file (it may be data); a terminal gets it without controls.
        if delta and self.out.isatty():
            delta = printable(delta)
        if delta:
            self._write(delta)
            self._wrote = True
            self._ends_newline = delta.endswith("\n")

    def _newline(self) -> None:
        if self._wrote and not self._ends_newline:
            self._write("\n")
            self._ends_newline = True

    def _err(self, line: str) -> None:
        """A line on ``err``: model- and tool-chosen text in it never carries terminal controls."""
        print(printable(line), file=self.err, flush=True)

    def tool_call(self, name: str, args: Any) -> None:
        self._newline()
        if self.show_tools:
            self._err(f"[tool] {name}({short_args(args)})")

    def tool_result(self, name: str, content: Any) -> None:
        if name in MEMORY_CHANGE_TOOLS and isinstance(content, str):
            self._err(content)  # what was stored is always said, tools shown or not
        elif self.show_tools:
            self._err(f"[tool] {name} -> {summarize_result(content)}")

    def working(self, what: str) -> None:
        """Nothing: a pipe or a log gets no live line."""

    def notice(self, message: str) -> None:
        self._newline()
        self._err(f"note: {message}")

    def end(self, interrupted: bool = False) -> None:
        self._newline()
        if interrupted:
            print("[interrupted]", file=self.err, flush=True)
        self._wrote = False


CODE_SPAN = re.compile(r"`([^`\n]+)`")
"""A command named in one of co's messages (```co sessions list```): shown without the backticks."""


def message_text(message: str, style: str) -> Text:
    """One of co's own messages for the terminal: a command in it is bold, not between literal backticks."""
    message = printable(message)
    text = Text(style=style)
    position = 0
    for span in CODE_SPAN.finditer(message):
        text.append(message[position : span.start()])
        text.append(span.group(1), style="bold")
        position = span.end()
    text.append(message[position:])
    return text


def plain_message(message: str) -> str:
    """One of co's own messages for a pipe: a command in it between single quotes."""
    return CODE_SPAN.sub(r"'\1'", printable(message))


def print_error(console: Console, message: str) -> None:
    console.print(message_text(f"✗ {message}", "bold red"))
