"""Commands about the conversation in front of the user: the commands themselves, leaving, starting over,
the model, retrying, and what the context window and the session cost."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from co_cli.terminal.commands.registry import CommandHost, command, commands


@command("help", "", "show the commands")
async def _help(host: CommandHost, arg: str) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    for cmd in commands():
        names = ", ".join(f"/{n}" for n in (cmd.name, *cmd.aliases))
        table.add_row(Text(f"{names} {cmd.args}".rstrip(), style="bold cyan"), cmd.help)
    host.console.print(table)
    host.console.print(
        Text(
            "Enter sends · Esc-Enter or Alt-Enter adds a newline · Ctrl-C cancels a turn · Ctrl-D quits",
            style="dim",
        )
    )
    host.console.print(
        Text(
            "@path sends a file of the working directory with the prompt (Tab completes it) · !command runs a "
            "command; it and its output go with your next prompt",
            style="dim",
        )
    )


@command("quit", "", "leave co (Ctrl-D does the same)", aliases=("exit",))
async def _quit(host: CommandHost, arg: str) -> None:
    host.running = False


@command("new", "", "start a new conversation (the current one stays saved)")
async def _new(host: CommandHost, arg: str) -> None:
    host.conv.new()
    host.info("New conversation.")


@command("clear", "", "clear the screen and start a new conversation")
async def _clear(host: CommandHost, arg: str) -> None:
    host.console.clear()
    await _new(host, arg)


@command("model", "[name]", "show the model, or switch to another for this session")
async def _model(host: CommandHost, arg: str) -> None:
    from co_cli.models import resolve_model

    if not arg:
        r = host.conv.resolved
        host.info(f"Model: {r.label} ({r.choice.reason}); context window {r.context_window:,} ({r.window_source})")
        return
    resolved = resolve_model(host.loaded.settings.model_copy(update={"model": arg}), "command line", host.loaded.paths)
    host.conv.switch_model(resolved)
    host.info(f"Model: {resolved.label} ({resolved.choice.reason}); window {resolved.context_window:,}")


@command("retry", "", "send the last prompt again after an error (to go back past an answer, /rewind)")
async def _retry(host: CommandHost, arg: str) -> None:
    if not host.conv.last_prompt:
        host.error("nothing to retry yet")
        return
    await host.turn(host.conv.last_prompt)


@command("context", "", "how full the context window is, and with what")
async def _context(host: CommandHost, arg: str) -> None:
    from co_cli.terminal.views import render_context

    host.show(render_context(host.conv.window.report(), plain=not host.interactive))


@command("last", "", "show the whole output of the last tool call, in the pager ($PAGER, else less)")
async def _last(host: CommandHost, arg: str) -> None:
    from co_cli.terminal.output import page
    from co_cli.terminal.render import result_preview
    from co_cli.terminal_text import printable

    output = host.conv.window.last_tool_output()
    if output is None:
        host.error("no tool has returned anything in this conversation yet")
        return
    size = result_preview(output.text)[0]
    saved = f", saved as ref={output.ref}" if output.ref else ""
    if not host.interactive:
        host.show(output.text)
        return
    page(host.console, printable(f"{output.tool_name}: {size}{saved}\n\n{output.text}"))


@command("usage", "", "tokens and cost of the last turn and of this session, and its tool calls")
async def _usage(host: CommandHost, arg: str) -> None:
    from co_cli.store import UsageTotals
    from co_cli.terminal.views import usage_lines

    last = host.conv.last_usage
    if last is None:
        host.info("Last turn: none yet in this run.")
    else:
        totals = UsageTotals()
        totals.add(last)
        host.info("Last turn: " + usage_lines({"chat": totals})[0].removeprefix("chat: "))
    session = host.conv.session
    if not host.saving or session is None:
        return
    by_role = host.store.usage.by_role(session.id)
    if not by_role:
        host.info("This session: no usage recorded yet.")
        return
    host.info("This session:")
    for line in usage_lines(by_role):
        host.info(f"  {line}")
    _tool_usage(host, session.id)


def _tool_usage(host: CommandHost, session_id: str) -> None:
    from co_cli.terminal.views import tool_stats_text

    stats = host.store.tool_calls.by_tool(session_id)
    if stats:
        host.info(f"  tools: {tool_stats_text(stats)}")
