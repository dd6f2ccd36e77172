"""What the user hands a prompt besides their words, from the terminal: ``@path`` (a file of the working
directory sent with the prompt) and ``!command`` (run at once, its output sent with the next prompt). The
session keeps and composes them (``session/attachments.py``); this side says what happened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from co_cli.session import TurnOutcome
    from co_cli.terminal.commands import CommandHost


async def send(host: CommandHost, line: str) -> TurnOutcome | None:
    """A prompt the user typed, with the files it names (``@path``) and the output of the commands run since
    the last one (``!command``); None when a file may not be sent (one line says why)."""
    from co_cli.tools.paths import PathError

    try:
        composed = host.conv.attachments.compose(line)
    except PathError as exc:
        kept = " (press Up to edit it)" if host.interactive else ""
        host.error(f"{exc.message.removeprefix('Error: ')}: nothing was sent{kept}")
        return None
    for name in composed.unknown:
        host.note(f"@{name} names no file in the working directory: sent as typed")
    if composed.files and host.interactive:
        attached = ", ".join(f"@{name}" for name in composed.files)
        host.console.print(Text(printable(f"Attached {attached}"), style="dim"))
    return await host.turn(composed.text, words=composed.words)


async def run_command(host: CommandHost, command: str) -> None:
    """``!command``: run what the user typed (no question: they typed it), show its output, and keep both for
    the next prompt. Esc or Ctrl-C stops it, and nothing of it is kept."""
    if not command:
        host.error("usage: !command (runs it in the working directory; its output goes with your next prompt)")
        return
    output = await host.cancellable(host.conv.attachments.run_command(command), f"running {command}")
    if output is None:
        host.note("Stopped; nothing of it goes to the model.")
        return
    host.show(output)
    host.console.print(Text("↳ the command and its output go with your next prompt", style="dim"))
