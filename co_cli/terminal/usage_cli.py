"""``co usage``: tokens, requests and cost across sessions, grouped by model, day, session or role; or the tool
calls, failures, denials and tool time per tool (``--by tool``)."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from co_cli.errors import CoError
from co_cli.terminal_text import counted, printable

if TYPE_CHECKING:
    from co_cli.store import GroupBy, ToolStats, UsageTotals

app = typer.Typer(name="usage", add_completion=False)

_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([mhdw])")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class By(StrEnum):
    model = "model"
    day = "day"
    session = "session"
    role = "role"
    tool = "tool"


def parse_since(text: str, now: float | None = None) -> float:
    """'7d', '12h', '30m', '2w' (that long ago) or a date 'YYYY-MM-DD' (local midnight) -> seconds since the epoch."""
    now = time.time() if now is None else now
    value = text.strip().lower()
    span = _SPAN.fullmatch(value)
    if span:
        return now - float(span.group(1)) * _UNIT_SECONDS[span.group(2)]
    try:
        return datetime.strptime(value, "%Y-%m-%d").timestamp()
    except ValueError:
        raise CoError(
            f"--since takes a span like 7d, 12h, 30m, 2w or a date YYYY-MM-DD (got {text!r})", exit_code=2
        ) from None


def _row_json(key: str, totals: UsageTotals) -> dict[str, object]:
    return {
        "key": key,
        **totals.counts(),
        "known_cost_usd": totals.cost_usd,
        "unpriced_turns": totals.unpriced,
    }


@app.callback(invoke_without_command=True)
def usage(
    since: Annotated[
        str | None, typer.Option("--since", help="Only usage since then: 7d, 12h, 30m, 2w or YYYY-MM-DD.")
    ] = None,
    by: Annotated[
        By,
        typer.Option("--by", help="Group by model, day, session or role; 'tool': calls, failures and time per tool."),
    ] = By.model,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (cost_usd is null when unknown).")] = False,
) -> None:
    """Tokens, requests and cost across every session (the trash included: money spent stays spent).

    A cost genai-prices does not know is shown as unknown, never as $0."""
    from co_cli.config import load_settings
    from co_cli.store import Store, UsageTotals
    from co_cli.terminal_text import format_cost, format_tokens

    start = parse_since(since) if since is not None else None
    paths = load_settings().paths
    if by == By.tool:
        _tool_usage(paths.db, start, since, as_json)
        return
    if not paths.db.exists():
        groups: dict[str, UsageTotals] = {}
    else:
        with Store.open(paths.db, reads_only=True) as store:
            groups = store.usage.report(since=start, by=cast("GroupBy", by.value))
    total = UsageTotals()
    for totals in groups.values():
        total.merge(totals)
    if as_json:
        rows = [_row_json(key, totals) for key, totals in groups.items()]
        typer.echo(json.dumps({"by": by.value, "since": start, "rows": rows, "total": _row_json("total", total)}))
        return
    from rich.table import Table
    from rich.text import Text

    from co_cli.terminal.output import output_console

    console = output_console()
    if not groups:
        console.print("No usage recorded" + (f" since {since}." if since else " yet."), markup=False, highlight=False)
        return
    table = Table(box=None, header_style="bold", pad_edge=False, show_footer=True)
    table.add_column(by.value.capitalize(), footer="total", overflow="fold")
    for name in ("Requests", "Input", "Output", "Cache read", "Cache write"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("Cost", justify="right", no_wrap=True, footer=format_cost(total))
    for key, totals in groups.items():
        table.add_row(
            Text(printable(key)),
            str(totals.requests),
            format_tokens(totals.input_tokens),
            format_tokens(totals.output_tokens),
            format_tokens(totals.cache_read_tokens),
            format_tokens(totals.cache_write_tokens),
            format_cost(totals),
        )
    console.print(table)
    if total.unpriced:
        console.print(
            f"{counted(total.unpriced, 'turn')} used models genai-prices has no price for: their cost is unknown.",
            style="dim",
            markup=False,
            highlight=False,
        )


def _tool_usage(db: Path, start: float | None, since: str | None, as_json: bool) -> None:
    """``co usage --by tool``: every session's tool calls summed per tool."""
    from co_cli.store import Store, ToolStats

    stats: dict[str, ToolStats] = {}
    if db.exists():
        with Store.open(db, reads_only=True) as store:
            stats = store.tool_calls.report(since=start)
    total = ToolStats()
    for tool in stats.values():
        total.merge(tool)
    if as_json:
        rows = [{"key": name, **tool.counts()} for name, tool in stats.items()]
        typer.echo(
            json.dumps({"by": "tool", "since": start, "rows": rows, "total": {"key": "total", **total.counts()}})
        )
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if not stats:
        console.print("No tool calls recorded" + (f" since {since}." if since else " yet."), markup=False)
        return
    table = Table(box=None, header_style="bold", pad_edge=False, show_footer=True)
    table.add_column("Tool", footer="total", overflow="fold")
    for name, footer in (
        ("Calls", str(total.calls)),
        ("Failed", str(total.failed)),
        ("Denied", str(total.denied)),
        ("Time", f"{total.seconds:.1f} s"),
    ):
        table.add_column(name, justify="right", no_wrap=True, footer=footer)
    for name, tool in stats.items():
        table.add_row(
            Text(printable(name)), str(tool.calls), str(tool.failed), str(tool.denied), f"{tool.seconds:.1f} s"
        )
    console.print(table)
