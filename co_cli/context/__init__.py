"""Context governance: functions over ``list[ModelMessage]`` and the capability that applies them.

Nothing here knows about the REPL or the session database. Most modules are pure; ``offload`` writes the
files it offloads to, and ``summarize`` calls a model.
"""

from co_cli.context.boundaries import find_head_end, find_tail_start
from co_cli.context.compact import (
    CompactionError,
    CompactionResult,
    NothingToCompact,
    compact_all,
    compact_middle,
    drop_tool_outputs,
)
from co_cli.context.governor import ContextGovernor, GovernorEvent
from co_cli.context.offload import list_offloaded, offload_large_outputs, read_tool_output
from co_cli.context.repair import repair_orphans
from co_cli.context.report import ContextReport, context_report
from co_cli.context.summarize import summarize_messages
from co_cli.context.tokens import (
    TokenEstimate,
    estimate_history,
    estimate_message_tokens,
    estimate_overhead,
    estimate_text_tokens,
)
from co_cli.context.trim import truncate_tool_returns

__all__ = [
    "CompactionError",
    "CompactionResult",
    "ContextGovernor",
    "ContextReport",
    "GovernorEvent",
    "NothingToCompact",
    "TokenEstimate",
    "compact_all",
    "compact_middle",
    "context_report",
    "drop_tool_outputs",
    "estimate_history",
    "estimate_message_tokens",
    "estimate_overhead",
    "estimate_text_tokens",
    "find_head_end",
    "find_tail_start",
    "list_offloaded",
    "offload_large_outputs",
    "read_tool_output",
    "repair_orphans",
    "summarize_messages",
    "truncate_tool_returns",
]
