"""Rich rendering of sessions, search hits, transcripts and the context window, shared by ``co sessions`` and
the REPL."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from co_cli.store import SNIPPET_CLOSE, SNIPPET_OPEN, compactions_by_position
from co_cli.terminal_text import counted, format_cost, format_tokens, printable

if TYPE_CHECKING:
    from co_cli.context.report import ContextReport
    from co_cli.store import CompactionRecord, SearchHit, SessionInfo, Store, StoredMessage, ToolStats, UsageTotals
    from co_cli.tools.mcp.toolset import ServerSummary

TOOL_OUTPUT_SHOWN_CHARS = 1500
BAR_WIDTH = 40

_KIND_LABELS = {
    "user": ("You", "bold green"),
    "assistant": ("Assistant", "bold blue"),
    "tool-call": ("Tool call", "bold yellow"),
    "tool-return": ("Tool result", "bold magenta"),
    "summary": ("Summary", "bold cyan"),
    "system": ("System", "bold white"),
}


def format_time(timestamp: float, now: float | None = None) -> str:
    """Recent times relative ("5 min ago"), older ones as a local date and time; "?" for a value that is no
    time (infinite, NaN, out of range or not a number: a database written by something else must still list)."""
    now = time.time() if now is None else now
    try:
        age = now - float(timestamp)
        if 0 <= age < 60:
            return "just now"
        if 0 <= age < 3600:
            return f"{int(age // 60)} min ago"
        if 0 <= age < 86400:
            return f"{int(age // 3600)} h ago"
        return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def sessions_table(
    sessions: Sequence[SessionInfo],
    usage: dict[str, UsageTotals] | None = None,
    deleted: Sequence[float] = (),
    short_ids: Mapping[str, str] | None = None,
    *,
    shown_ids: Mapping[str, str] | None = None,
    width: int | None = None,
) -> Text:
    """One line per session, most recently updated first (as given), in aligned columns; with ``usage``, tokens
    and cost columns (a session without usage rows was saved before co recorded them: its cost is unknown);
    with ``deleted``, when each went to the trash. A fork names its parent by ``short_ids`` (``parent_short_ids``);
    a session started elsewhere than the terminal says where ("via serve").

    ``shown_ids`` names each session as co shows it (``short_ids``; the whole id without it). With ``width`` (a
    terminal's) a title that would pass it is wrapped at its spaces under the Title column, or on the lines
    below the row when that column starts too far right: never cut mid-word by the terminal.

    Lines, not a rich ``Table``: a table measures and wraps every cell, 2 ms a row (20 s for 10,000 sessions);
    without ``width`` these lines are never wrapped or padded by co (a pipe gets them whole)."""
    now = time.time()
    header = ["ID", *(["Deleted"] if deleted else []), "Updated", "Msgs"]
    header += ["Tokens", "Cost"] if usage is not None else []
    header += ["Model", "Title"]
    right = {"Msgs", "Tokens", "Cost"}
    rows: list[list[str]] = []
    dim_cost: list[bool] = []
    for index, info in enumerate(sessions):
        cells = [printable((shown_ids or {}).get(info.id, info.id))]
        if deleted:
            cells.append(format_time(deleted[index], now))
        cells += [format_time(info.updated_at, now), str(info.message_count)]
        if usage is not None:
            totals = usage.get(info.id)
            tokens = totals.tokens if totals else info.input_tokens + info.output_tokens
            cells += [format_tokens(tokens), format_cost(totals)]
            dim_cost.append(totals is None)
        title = printable(info.title) or "untitled"
        if info.parent_id:
            title += f"  ⑂ {printable((short_ids or {}).get(info.parent_id, info.parent_id))}"
        if info.origin != "terminal":
            title += f"  via {info.origin}"
        cells += [printable(info.model), title]
        rows.append(cells)
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]

    def line(cells: list[str], styles: dict[int, str]) -> Text:
        text = Text()
        for i, (name, cell) in enumerate(zip(header, cells, strict=True)):
            if i:
                text.append(" ")
            last = i == len(header) - 1
            shown = cell.rjust(widths[i]) if name in right else cell if last else cell.ljust(widths[i])
            if last and width is not None:
                shown = _wrapped_title(shown, len(text), width)
            text.append(shown, style=styles.get(i, ""))
        return text

    lines = [line(header, dict.fromkeys(range(len(header)), "bold"))]
    cost_column, model_column = header.index("Cost") if usage is not None else -1, len(header) - 2
    for index, cells in enumerate(rows):
        styles = {0: "cyan", model_column: "dim"}
        if usage is not None and dim_cost[index]:
            styles[cost_column] = "dim"
        lines.append(line(cells, styles))
    return Text("\n").join(lines)


TITLE_MIN_COLUMNS = 24
"""Below this many columns left for the Title, a listing puts the title on the lines under its row."""


def _wrapped_title(title: str, start: int, width: int) -> str:
    """``title`` starting at column ``start`` of a ``width``-column terminal, wrapped at its spaces."""
    import textwrap

    if start + len(title) <= width:
        return title
    if width - start >= TITLE_MIN_COLUMNS:
        return ("\n" + " " * start).join(textwrap.wrap(title, width - start))
    return "".join("\n    " + line for line in textwrap.wrap(title, max(TITLE_MIN_COLUMNS, width - 4)))


def parent_short_ids(store: Store, sessions: Sequence[SessionInfo]) -> dict[str, str]:
    """How a listing names the sessions its forks came from."""
    return store.sessions.short_ids({info.parent_id for info in sessions if info.parent_id})


def trash_table(items: Sequence[tuple[SessionInfo, float]], short_ids: Mapping[str, str] | None = None) -> Text:
    """The trash: each session with when it was deleted."""
    return sessions_table([info for info, _ in items], deleted=[when for _, when in items], short_ids=short_ids)


def highlighted_snippet(snippet: str) -> Text:
    """A search snippet with the matched terms (between SNIPPET_OPEN and SNIPPET_CLOSE) in bold."""
    text = Text()
    rest = printable(snippet.replace("\n", " "))
    while SNIPPET_OPEN in rest:
        before, _, after = rest.partition(SNIPPET_OPEN)
        match, _, rest = after.partition(SNIPPET_CLOSE)
        text.append(before)
        text.append(match, style="bold yellow")
    text.append(rest)
    return text


def search_table(hits: Sequence[SearchHit]) -> Table:
    """One row per matching message, best first (as given)."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("Session", style="cyan", no_wrap=True)
    table.add_column("#", justify="right")
    table.add_column("Kind", style="dim", no_wrap=True)
    table.add_column("When", no_wrap=True)
    table.add_column("Match", overflow="fold")
    now = time.time()
    for hit in hits:
        session = Text(printable(hit.session_id), style="cyan")
        if hit.title:
            session.append("\n" + printable(hit.title)[:40], style="dim")
        table.add_row(
            session,
            str(hit.seq),
            Text(printable(hit.kind)),
            format_time(hit.created_at, now),
            highlighted_snippet(hit.snippet),
        )
    return table


def search_lines(hits: Sequence[SearchHit], shown_ids: Mapping[str, str]) -> Group:
    """The hits for a terminal of any width: a line naming the session (as co shows its id), the message and
    the title, and the snippet indented under it; rich wraps both at their spaces."""
    now = time.time()
    rows: list[RenderableType] = []
    for hit in hits:
        head = Text(printable(shown_ids.get(hit.session_id, hit.session_id)), style="cyan")
        head.append(f"  #{hit.seq} {printable(hit.kind)} · {format_time(hit.created_at, now)}", style="dim")
        if hit.title:
            head.append("  " + printable(hit.title))
        rows += [head, Padding(highlighted_snippet(hit.snippet), (0, 0, 0, 4))]
    return Group(*rows)


MESSAGE_SHOWN_CHARS = 20_000
"""What ``co sessions show`` prints of one prompt, answer or summary unless ``--full`` (a pasted 5 MB prompt
took 12 s to print whole, an imported 50 MB one minutes)."""
FULL_HINT = "`co sessions show --full` or `co sessions export` has them all"


def _shorten(text: str, limit: int | None = TOOL_OUTPUT_SHOWN_CHARS) -> str:
    """The text without control characters, cut at ``limit`` characters (None: whole) with a note; only what is
    shown is cleaned."""
    if limit is None or len(text) <= limit:
        return printable(text).rstrip()
    return f"{printable(text[:limit]).rstrip()}\n… ({len(text) - limit:,} more characters; {FULL_HINT})"


def _message_body(stored: StoredMessage, limit: int | None) -> list[RenderableType]:
    from rich.markdown import Markdown

    from co_cli.message_view import views

    body: list[RenderableType] = []
    for view in views(stored.message):
        if view.kind == "user":
            body.append(Text(_shorten(view.text, limit)))
        elif view.kind == "system":
            if stored.kind == "system":
                body.append(Text(_shorten(view.text, limit), style="dim"))
        elif view.kind == "text":
            if view.text.strip():
                body.append(Markdown(_shorten(view.text, limit)))
        elif view.kind == "tool-call":
            line = Text("→ ", style="yellow")
            line.append(printable(view.tool_name or "?"), style="bold yellow")
            line.append(f"({_shorten(view.text or '{}', 500)})", style="yellow")
            body.append(line)
        elif view.kind == "tool-return":
            label = Text(f"← {printable(view.tool_name or '?')}", style="magenta")
            if view.outcome not in (None, "success"):
                label.append(f" ({view.outcome})", style="red")
            body.append(label)
            body.append(Padding(Text(_shorten(view.text), style="dim"), (0, 0, 0, 2)))
        elif view.kind == "retry":
            body.append(Text(_shorten(view.text, limit), style="dim red"))
        elif view.kind == "compaction" and view.text:
            body.append(Text(_shorten(view.text, limit), style="italic"))
    return body


def render_transcript(
    stored_messages: Sequence[StoredMessage], compactions: Sequence[CompactionRecord] = (), *, full: bool = False
) -> RenderableType:
    """Every message under a role heading; tool outputs shortened, failed turns marked, each compaction shown
    where it happened. Prompts and answers are cut at ``MESSAGE_SHOWN_CHARS``, summaries shorter, unless
    ``full``."""
    limit = None if full else MESSAGE_SHOWN_CHARS

    placed = compactions_by_position(compactions)
    items: list[RenderableType] = []
    for stored in stored_messages:
        label, style = _KIND_LABELS.get(stored.kind, (printable(stored.kind), "bold"))
        heading = Text(f"{label} ", style=style)
        heading.append(f"#{stored.seq} · {format_time(stored.created_at)}", style="dim")
        if stored.status != "ok":
            heading.append(f"  [{printable(stored.status)}]", style="bold red")
        items.append(heading)
        items.append(Padding(Group(*_message_body(stored, limit)), (0, 0, 1, 2)))
        for record in placed.get(stored.seq, []):
            items.append(Text(printable(f"⟲ {record.describe()}"), style="bold cyan"))
            summary = _shorten(record.summary, None if full else TOOL_OUTPUT_SHOWN_CHARS)
            items.append(Padding(Text(summary, style="italic cyan"), (0, 0, 1, 2)))
    if not items:
        items.append(Text("(no messages)", style="dim"))
    return Group(*items)


def tool_stats(stored_messages: Sequence[StoredMessage]) -> dict[str, ToolStats]:
    """Calls, failures and denials per tool over a transcript (for sessions saved before co recorded each tool
    call; their time is unknown, 0)."""
    from co_cli.session.tool_stats import tool_calls_of
    from co_cli.store import summed

    return summed(tool_calls_of([stored.message for stored in stored_messages], {}))


def tool_stats_text(stats: dict[str, ToolStats]) -> str:
    """'run_shell 3 (1 failed, 1 denied; 2.1 s), read_file 2 (0.0 s)': each tool's calls, how many failed or
    were denied, and the time they ran."""
    shown = []
    for name, tool in stats.items():
        notes = [f"{count} {word}" for count, word in ((tool.failed, "failed"), (tool.denied, "denied")) if count]
        timing = f"{tool.seconds:.1f} s"
        shown.append(f"{printable(name)} {tool.calls} ({', '.join(notes) + '; ' if notes else ''}{timing})")
    return ", ".join(shown)


def usage_lines(totals_by_role: dict[str, UsageTotals]) -> list[str]:
    """One line per kind of spend (chat, summary, memory, title), then the total when there are several."""
    from co_cli.store import UsageTotals

    lines: list[str] = []
    overall = UsageTotals()
    for role, totals in totals_by_role.items():
        lines.append(
            f"{role}: {counted(totals.requests, 'request')} · {format_tokens(totals.input_tokens)} in "
            f"(cache read {format_tokens(totals.cache_read_tokens)}, write {format_tokens(totals.cache_write_tokens)})"
            f" · {format_tokens(totals.output_tokens)} out · {format_cost(totals)}"
        )
        overall.merge(totals)
    if len(totals_by_role) > 1:
        requests = counted(overall.requests, "request")
        lines.append(f"total: {requests} · {format_tokens(overall.tokens)} tokens · {format_cost(overall)}")
    return lines


def usage_bar(percent: float, threshold: float, width: int = BAR_WIDTH) -> Text:
    filled = min(width, round(width * percent / 100))
    mark = min(width - 1, round(width * threshold))
    style = "green" if percent < threshold * 100 * 0.75 else "yellow" if percent < threshold * 100 else "red"
    bar = Text()
    for i in range(width):
        char = "█" if i < filled else ("│" if i == mark else "░")
        bar.append(char, style=style if i < filled else "dim")
    bar.append(f" {percent:.1f}%")
    return bar


def render_context(report: ContextReport, plain: bool = False) -> RenderableType | str:
    """/context: a bar and the numbers behind it (plain lines when not in a terminal)."""
    from co_cli.context.report import KINDS  # the context package imports pydantic-ai: `co sessions` needs none

    if plain:
        return "\n".join(report.lines())
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("used", f"~{report.tokens_used:,} tokens ({report.token_source})")
    table.add_row("window", f"{report.context_window:,} tokens ({report.window_source})")
    table.add_row("auto-compaction", f"at {report.threshold:.0%} = {report.threshold_tokens:,} tokens")
    table.add_row("messages", f"{report.message_count} in context · {report.transcript_count} in transcript")
    table.add_row("compactions", str(report.compactions))
    for kind in KINDS:
        table.add_row(f"  {kind}", f"~{report.breakdown.get(kind, 0):,}")
    for i, item in enumerate(report.largest, 1):
        table.add_row(f"largest #{i}", f"{item.kind}: {item.label} (~{item.tokens:,})")
    if report.offloaded_count:
        table.add_row("offloaded", f"{report.offloaded_count} outputs ({report.offloaded_chars:,} chars) on disk")
    if report.user_words:
        table.add_row("your words", report.user_words)
    return Group(usage_bar(report.percent, report.threshold), table)


MCP_DESCRIPTION_CHARS = 60


def mcp_table(servers: Sequence[ServerSummary]) -> Table:
    """The MCP servers: transport, status (and why, when not running), each tool and what its schema costs in
    tokens on every request (``/mcp``, ``co mcp list``)."""
    table = Table("server / tool", "transport", "status", "tokens", "", box=None, pad_edge=False)
    for server in servers:
        tokens = f"{server.tokens:,}" if server.tools else ""
        detail = Text(printable(server.detail), style="yellow")
        table.add_row(Text(printable(server.name), style="bold"), server.transport, server.status, tokens, detail)
        for tool in server.tools:
            description = printable(tool.description)
            if len(description) > MCP_DESCRIPTION_CHARS:
                description = description[: MCP_DESCRIPTION_CHARS - 1] + "…"
            table.add_row(Text("  " + printable(tool.name)), "", "", f"{tool.tokens:,}", Text(description, style="dim"))
    return table
