"""A small context window (8k tokens or less) gets co's lean instructions and tool set, so the first question
leaves most of the window free; a large window gets the full set."""

from __future__ import annotations

from collections.abc import AsyncIterator

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.deps import CoDeps
from co_cli.models import ModelChoice, ResolvedModel
from co_cli.session import Conversation
from co_cli.session.agent import is_lean
from co_cli.tools import LEAN_TOOL_NAMES
from tests.support.turn_core import Core, core, run

__all__ = ["core"]


def first_request(core: Core, window: int) -> tuple[AgentInfo, Conversation]:
    seen: list[AgentInfo] = []

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(info)
        yield "Paris."

    model = FunctionModel(stream_function=answer)
    choice = ModelChoice(spec="scripted", reason="test")
    resolved = ResolvedModel(model=model, choice=choice, context_window=window, window_source="test")
    deps = CoDeps(settings=core.loaded.settings, paths=core.loaded.paths, cwd=core.cwd, store=core.store)
    conv = Conversation(resolved=resolved, deps=deps)
    run(conv, "What is the capital of France?")
    return seen[0], conv


def test_a_small_window_gets_the_lean_set_and_a_large_one_the_full_set(core: Core) -> None:
    small, small_conv = first_request(core, 4096)
    large, large_conv = first_request(core, 128_000)

    assert {tool.name for tool in small.function_tools} == set(LEAN_TOOL_NAMES)
    assert all(tool.description and "\n" not in tool.description for tool in small.function_tools)
    assert not any(
        "description" in prop
        for tool in small.function_tools
        for prop in tool.parameters_json_schema["properties"].values()
    )
    full_names = {tool.name for tool in large.function_tools}
    assert set(LEAN_TOOL_NAMES) < full_names and {"grep", "list_dir", "search_conversation_history"} <= full_names
    assert len(small.instructions or "") < len(large.instructions or "") / 2

    small_overhead = small_conv.engine.governor.overhead_tokens
    large_overhead = large_conv.engine.governor.overhead_tokens
    assert small_overhead < large_overhead / 2
    assert small_overhead < 4096 // 4  # the first question leaves most of a 4k window free


def test_lean_is_for_windows_of_8k_or_less() -> None:
    assert is_lean(4096) and is_lean(8192)
    assert not is_lean(8193) and not is_lean(200_000)
    assert not is_lean(0)  # an unknown window: the full set
