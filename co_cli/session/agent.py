"""The chat agent around the chosen model (its tools, capabilities and instructions), and the summariser."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from co_cli.config import Paths, Settings
from co_cli.context.tokens import estimate_overhead
from co_cli.deps import CoDeps
from co_cli.models import request_time_limits
from co_cli.session.instructions import instructions_text, memory_section

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.models import Model

    from co_cli.tools.mcp.servers import McpServers


LEAN_WINDOW_TOKENS = 8192
"""A context window this small or smaller gets the lean instructions and tools (``is_lean``)."""


def is_lean(context_window: int) -> bool:
    """Whether a model with this window gets co's lean instructions and tool set, so that the first question
    leaves most of the window free (0: the window is unknown, the full set)."""
    return 0 < context_window <= LEAN_WINDOW_TOKENS


def build_agent(
    model: Model,
    *,
    capabilities: list[Any],
    request_timeout: float = 120.0,
    mcp: McpServers | None = None,
    lean: bool = False,
) -> Agent[CoDeps, str]:
    from pydantic_ai import Agent, RunContext

    def instructions(ctx: RunContext[CoDeps]) -> str:
        memory = memory_section(ctx.deps, ctx.prompt)
        return instructions_text(ctx.deps, lean=lean) + (f"\n\n{memory}" if memory else "")

    toolsets: list[Any] = list(co_toolsets(lean))
    if mcp is not None and len(mcp):
        from co_cli.tools.mcp.toolset import McpToolset

        toolsets.append(McpToolset(mcp))
    return Agent(
        model,
        deps_type=CoDeps,
        output_type=str,
        instructions=instructions,
        toolsets=toolsets,
        capabilities=capabilities,
        model_settings=request_time_limits(model, request_timeout),
    )


@functools.cache
def co_toolsets(lean: bool = False) -> tuple[Any, ...]:
    """co's own tools, built once per process: their schemas are made from the functions' signatures and
    docstrings (about 20 ms), and the toolsets keep no state of a run, so every agent shares them. ``lean``:
    only ``LEAN_TOOL_NAMES``, described in a sentence each."""
    from co_cli.tools import build_toolset, lean_tool_defs
    from co_cli.tools.history import build_history_toolset
    from co_cli.tools.memory import build_memory_toolset
    from co_cli.tools.tasks import build_tasks_toolset

    if lean:
        return tuple(
            t.prepared(lambda ctx, defs: lean_tool_defs(defs)) for t in (build_toolset(), build_history_toolset())
        )
    return (build_toolset(), build_history_toolset(), build_memory_toolset(), build_tasks_toolset())


def summarizer_model(settings: Settings, paths: Paths | None = None) -> Model | None:
    """The model that writes summaries: ``summarization_model`` if set, else None (the chat model).

    A 'provider:model' string is used as such even when base_url is set; a bare name goes to that server.
    """
    spec = settings.summarization_model.strip()
    if not spec:
        return None
    from co_cli.models import build_model, choose_model

    if ":" in spec or spec in ("local", "test"):
        settings = settings.model_copy(update={"base_url": ""})
    settings = settings.model_copy(update={"model": spec})
    return build_model(choose_model(settings, "summarization_model setting"), settings, paths)


@functools.cache
def tool_defs_tokens(lean: bool = False) -> int:
    """Tokens the chat agent's tool schemas add to every request (they never change in a process)."""
    return estimate_overhead("", build_agent_tool_defs(lean))


def build_agent_tool_defs(lean: bool = False) -> list[Any]:
    """Tool definitions of the chat agent (for counting their tokens); ``lean``: the small window's set."""
    from co_cli.tools import build_toolset
    from co_cli.tools.history import build_history_toolset
    from co_cli.tools.memory import memory_function_toolset
    from co_cli.tools.tasks import build_tasks_toolset

    defs = []
    for toolset in (build_toolset(), build_history_toolset(), memory_function_toolset(), build_tasks_toolset()):
        for tool in toolset.tools.values():
            defs.append(tool.tool_def)
    if lean:
        from co_cli.tools import lean_tool_defs

        return lean_tool_defs(defs)
    return defs


def overhead_tokens(deps: CoDeps, mcp: McpServers | None = None, *, lean: bool = False) -> int:
    """Tokens every request carries besides the history: the instructions and the tool schemas (the MCP
    servers' as they are sent now)."""
    instructions = estimate_overhead(instructions_text(deps, lean=lean), [])
    return instructions + tool_defs_tokens(lean) + mcp_schema_tokens(deps, mcp)


def mcp_schema_tokens(deps: CoDeps, mcp: McpServers | None) -> int:
    """Tokens the running MCP servers' tools add to every request, as sent (whole, or past the schema budget
    their names and one-line descriptions)."""
    if mcp is None or not len(mcp):
        return 0
    from co_cli.tools.mcp.toolset import sent_schema_tokens

    return sent_schema_tokens(mcp, deps.settings.mcp_schema_budget_tokens)
