"""Runs without a prompt to type at: ``-p`` (one turn, with what is piped to it), a pipe (the whole of stdin is
one prompt), and ``--lines`` (each line of stdin its own input, prompt or slash command)."""

from __future__ import annotations

import io
import re
import sys
from typing import TYPE_CHECKING, BinaryIO, TextIO

from co_cli.errors import CoError
from co_cli.terminal import commands
from co_cli.terminal.attachments import send
from co_cli.terminal_text import counted

if TYPE_CHECKING:
    from co_cli.terminal.app import ChatApp

WINDOW_SHARE = 2
"""Piped text takes at most 1/WINDOW_SHARE of the model's context window: the rest is for the conversation,
the instructions and the answer."""
BYTES_PER_TOKEN = 4
"""How many bytes of text a token is taken to hold when the limit is turned into bytes (English prose and code
run at about four)."""
FIRST_BYTE_WAIT = 3.0
"""With -p, how long co waits for the first byte (or the end) of a pipe before it sends the prompt alone: a
program that starts co with a pipe it never writes to nor closes would otherwise wait for ever."""


def stdin_is_piped() -> bool:
    """Whether stdin is a pipe or a file: open, on a file descriptor, and not a terminal."""
    if sys.stdin is None:
        return False
    try:
        sys.stdin.fileno()
    except (OSError, ValueError):  # replaced by an object that is no file (io.UnsupportedOperation is an OSError)
        return False
    return not sys.stdin.isatty()


def piped_limit(context_window: int) -> int:
    """The most bytes co takes from a pipe: half the context window, at four bytes a token."""
    return context_window // WINDOW_SHARE * BYTES_PER_TOKEN


def read_piped(stream: BinaryIO, app: ChatApp) -> str:
    """Everything piped to co, as text (line endings made ``\\n``); CoError (one line) past the limit or for
    input that is not UTF-8 text. Nothing past the limit is read."""
    resolved = app.conv.resolved
    limit = piped_limit(resolved.context_window)
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise CoError(
            f"piped input is over {limit:,} bytes, the limit for {resolved.label} (half its "
            f"{resolved.context_window:,}-token context window, at ~{BYTES_PER_TOKEN} bytes a token): "
            f"pipe less of it (e.g. through `head -c {limit}`)",
            exit_code=2,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CoError(f"piped input is not UTF-8 text (byte {exc.start:,} is not): pipe text", exit_code=2) from None
    return text.replace("\r\n", "\n")


def has_input_within(stream: BinaryIO, seconds: float) -> bool:
    """Whether ``stream`` has a byte (or its end) to read within ``seconds``; True where that cannot be asked."""
    import select

    try:
        ready, _, _ = select.select([stream.fileno()], [], [], seconds)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a file descriptor, or no select for it here
        return True
    return bool(ready)


def with_piped(prompt: str, text: str) -> str:
    """The prompt, then the piped text in a fenced block headed by its size. The fence is longer than any run of
    backticks in the text, so the text cannot close it."""
    body = text.rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    size = f"{counted(body.count(chr(10)) + 1, 'line')}, {counted(len(text.encode()), 'byte')}"
    return f"{prompt}\n\nPiped input ({size}):\n{fence}\n{body}\n{fence}"


def _stdin_bytes() -> BinaryIO:
    assert sys.stdin is not None
    return sys.stdin.buffer


async def run_once(app: ChatApp, prompt: str, stdin: BinaryIO | None = None) -> int:
    """``-p``: one turn, the prompt with what is piped to co (``stdin``; by default stdin when it is not a
    terminal); the exit code."""
    await app.ready()
    app.hints = "print"
    if stdin is None and stdin_is_piped():
        stdin = _stdin_bytes()
        if not has_input_within(stdin, FIRST_BYTE_WAIT):
            app.note(
                f"Nothing came through the pipe on stdin within {FIRST_BYTE_WAIT:.0f} s: the prompt is sent alone "
                "(`< /dev/null` skips this wait)."
            )
            stdin = None
    piped = read_piped(stdin, app) if stdin is not None else ""
    if piped.strip():
        prompt = with_piped(prompt, piped)
    app.show_instructions_files()
    outcome = await send(app, prompt)
    return await _finish(app, 0 if outcome is not None and outcome.status == "ok" else 1)


async def run_piped(app: ChatApp, stdin: BinaryIO | None = None) -> int:
    """A pipe without ``-p``: the whole of stdin is one prompt, as if pasted at the prompt; a single line that
    starts with ``/`` is a slash command. The exit code."""
    await app.ready()
    app.hints = "print"
    text = read_piped(stdin if stdin is not None else _stdin_bytes(), app).strip("\n")
    app.show_instructions_files()
    if not text.strip():
        app.note("Nothing was piped to co: no prompt sent.")
        return await _finish(app, 0)
    failed = False
    try:
        if "\n" not in text and text.strip().startswith("/"):
            await commands.dispatch(app, text)
        else:
            outcome = await send(app, text)
            failed = outcome is None or outcome.status == "failed"
    except CoError as exc:
        app.error(exc.message)
        failed = True
    return await _finish(app, 1 if failed or app.errors else 0)


async def run_lines(app: ChatApp, lines: TextIO) -> int:
    """``--lines`` (or typed at a terminal while stdout is not one): each line is one input, prompt or slash
    command; exit at EOF. The exit code."""
    await app.ready()
    app.show_instructions_files()
    failed = False
    for raw in lines:
        line = raw.rstrip("\r\n")  # a line ending of either kind is not part of the prompt
        if not line.strip():
            continue
        try:
            if line.strip().startswith("/"):
                await commands.dispatch(app, line)
            else:
                outcome = await send(app, line)
                failed = failed or outcome is None or outcome.status == "failed"
        except CoError as exc:
            app.error(exc.message)
            failed = True
        if not app.running:
            break
    return await _finish(app, 1 if failed or app.errors else 0)


async def _finish(app: ChatApp, code: int) -> int:
    await app.finish_background()
    app.conv.release()
    return code
