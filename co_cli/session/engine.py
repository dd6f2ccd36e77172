"""The model side of the live session: the chat agent, the summariser (metered) and the context governor.

Rebuilt when the model changes and when another session starts (the governor holds a session's compaction
cache and summariser failures; its overhead counts the session's pins).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic_ai import Agent
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.models import Model

from co_cli.context.governor import ContextGovernor, GovernorEvent
from co_cli.context.policy import GovernorConfig
from co_cli.context.user_quotes import Said, said_key
from co_cli.deps import CoDeps
from co_cli.models import ResolvedModel
from co_cli.session.agent import build_agent, is_lean, overhead_tokens, summarizer_model
from co_cli.session.metering import UsageMeter
from co_cli.session.tool_stats import tool_timer
from co_cli.store import ReadPart
from co_cli.store.usage import TurnUsage
from co_cli.tools.approval import NON_INTERACTIVE_DENIED_MESSAGE, ApprovalPrompt, make_approval_handler
from co_cli.tools.mcp.servers import McpServers


class Engine:
    def __init__(
        self,
        resolved: ResolvedModel,
        deps: CoDeps,
        *,
        ask_approval: ApprovalPrompt | None,
        approve_all: bool,
        on_governor_event: Callable[[GovernorEvent], None],
        mcp: McpServers | None = None,
        denied: str = NON_INTERACTIVE_DENIED_MESSAGE,
    ) -> None:
        self.resolved = resolved
        self.denied = denied
        """What the model is told of a call that needs approval when nobody can be asked."""
        self.mcp = mcp
        """The MCP servers whose tools the agent offers (None: none configured)."""
        self.deps = deps
        self.ask_approval = ask_approval
        self.approve_all = approve_all
        self.on_governor_event = on_governor_event
        self._meter: UsageMeter | None = None
        self._memory_meter: UsageMeter | None = None
        self.build()
        if mcp is not None:
            mcp.listeners.append(self.recount)  # a server started or stopped: its schemas count or not

    def build(self) -> None:
        settings = self.deps.settings
        self.summarizer: Model | None = summarizer_model(settings, self.deps.paths)
        self.governor = ContextGovernor(
            GovernorConfig.from_settings(settings, self.resolved.context_window),
            summarizer=self.summary_model,
            offload_dir=lambda: self.deps.tool_output_dir,
            overhead_tokens=overhead_tokens(self.deps, self.mcp, lean=self.lean),
            on_event=self.on_governor_event,
            said=self.said,
        )
        handler = make_approval_handler(
            self.ask_approval, approve_all=self.approve_all, deps_getter=lambda: self.deps, denied=self.denied
        )
        self.agent: Agent[CoDeps, str] = build_agent(
            self.resolved.model,
            capabilities=[self.governor, HandleDeferredToolCalls(handler=handler), tool_timer()],
            request_timeout=settings.request_timeout,
            mcp=self.mcp,
            lean=self.lean,
        )

    def switch(self, resolved: ResolvedModel) -> None:
        self.resolved = resolved
        self.build()

    def set_summarizer(self, model: Model) -> None:
        """Summarise with ``model`` from now on (metered like the configured one)."""
        self.summarizer = model
        self.governor.summarizer = self.summary_model

    def recount(self) -> None:
        """The instructions (pins, tasks) or the MCP tools changed: count what every request carries again."""
        self.governor.pipeline.overhead_tokens = overhead_tokens(self.deps, self.mcp, lean=self.lean)

    @property
    def lean(self) -> bool:
        """The model's window is small: co's lean instructions and tools (``agent.is_lean``)."""
        return is_lean(self.resolved.context_window)

    @property
    def summary_model(self) -> Model:
        """The summariser (``summarization_model``, else the chat model), metered: its spend is saved apart."""
        model = self.summarizer or self.resolved.model
        if self._meter is None:
            self._meter = UsageMeter(model, "summary")
        self._meter.wrapped = model
        return self._meter

    def said(self) -> Said:
        """What the model read in each of this session's messages one at a time (memory extraction), by the
        message's text (the user's words, and the prompt as saved when it carried files or command output): what
        compaction acts on for those messages."""
        session_id = self.deps.session_id
        if session_id is None:
            return {}
        said: dict[str, Sequence[ReadPart]] = {}
        for r in self.deps.store.readings.of_session(session_id):
            for text in (r.text, r.stored or ""):
                if text:
                    said[said_key(text)] = r.parts
        return said

    @property
    def memory_model(self) -> Model:
        """The summariser as memory extraction uses it: metered apart, so its spend is saved as "memory"."""
        model = self.summarizer or self.resolved.model
        if self._memory_meter is None:
            self._memory_meter = UsageMeter(model, "memory")
        self._memory_meter.wrapped = model
        return self._memory_meter

    @property
    def summary_model_name(self) -> str:
        model = self.summary_model
        return getattr(model, "model_name", str(model))

    @property
    def summarizer_is_embedded(self) -> bool:
        """The summariser runs in co's own process (a GGUF on the embedded engine): it shares the CPU with the
        chat model, and one engine answers one request at a time."""
        return type(self.summarizer or self.resolved.model).__name__ == "LocalModel"

    @property
    def summarizer_is_bundled(self) -> bool:
        """The summariser is the small model co ships (``local``): too small to read a message for memories."""
        return self.summarizer_is_embedded and bool(getattr(self.summarizer or self.resolved.model, "bundled", False))

    def drain_summary_usage(self) -> TurnUsage | None:
        """What the summariser spent since the last drain (one usage row), or None."""
        return self._meter.drain() if self._meter else None

    def drain_memory_usage(self) -> TurnUsage | None:
        """What memory extraction spent since the last drain (one usage row), or None."""
        return self._memory_meter.drain() if self._memory_meter else None
