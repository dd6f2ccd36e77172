"""/context: a bar and the numbers behind it."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from co_cli.context.report import KINDS, ContextReport

BAR_WIDTH = 40


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
    return Group(usage_bar(report.percent, report.threshold), table)
