"""How full the model's context window is: what the next request would send and what fills it (``/context``,
the toolbar)."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage

from co_cli.context.offload import ToolOutput, last_tool_output
from co_cli.context.report import ContextReport, context_report
from co_cli.context.tokens import TokenEstimate
from co_cli.deps import SessionState
from co_cli.session.agent import mcp_schema_tokens
from co_cli.session.engine import Engine
from co_cli.session.instructions import memory_report_tokens
from co_cli.store import Store


class ContextWindow:
    def __init__(self, store: Store, state: SessionState, engine: Engine) -> None:
        self.store = store
        self.state = state
        self.engine = engine
        self._percent_cache: tuple[tuple[int, int, int], float] | None = None

    def sendable(self) -> tuple[list[ModelMessage], TokenEstimate]:
        """What the next request would send (offloaded, trimmed, repaired) and its token estimate."""
        processed = self.engine.governor.process(self.state.context.messages)
        return processed.sendable, processed.estimate

    def percent_used(self) -> float:
        """Context use in percent (cached until the working context changes: the toolbar asks on every key)."""
        messages = self.state.context.messages
        window = self.engine.resolved.context_window
        key = (id(messages), len(messages), window)
        if self._percent_cache is None or self._percent_cache[0] != key:
            percent = 100.0 * self.sendable()[1].total / max(1, window)
            self._percent_cache = (key, percent)
        return self._percent_cache[1]

    def last_tool_output(self) -> ToolOutput | None:
        """The conversation's latest tool output, whole (an offloaded one from its file): ``/last``."""
        return last_tool_output(self.state.context.messages, self.engine.deps.tool_output_dir)

    def report(self) -> ContextReport:
        transcript = 0
        compactions = 0
        if self.state.info is not None:
            info = self.store.sessions.get(self.state.info.id)
            transcript, compactions = info.message_count, info.compaction_count
        deps = self.engine.deps
        resolved = self.engine.resolved
        return context_report(
            self.sendable()[0],
            context_window=resolved.context_window,
            window_source=resolved.window_source,
            threshold=deps.settings.compact_threshold,
            overhead_tokens=self.engine.governor.overhead_tokens,
            transcript_count=transcript or len(self.state.context),
            compactions=compactions,
            offload_dir=deps.tool_output_dir,
            mcp_schema_tokens=mcp_schema_tokens(deps, self.engine.mcp),
            **memory_report_tokens(deps),
        )
