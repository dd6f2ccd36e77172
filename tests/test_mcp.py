"""MCP servers' tools through whole turns, in process: a real stdio MCP server (and a streamable-HTTP one) written
with the ``mcp`` package, the real ``Conversation`` and store, a FunctionModel in place of the provider.

Each test runs in one event loop: the servers live in tasks of the loop that started them, as in ``co chat``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from co_cli.config import McpServer
from co_cli.session import Conversation
from co_cli.tools.approval import NON_INTERACTIVE_DENIED_MESSAGE, USER_DENIED_MESSAGE, ApprovalRequest
from co_cli.tools.mcp.servers import McpServers
from co_cli.tools.mcp.toolset import offered_name, server_of
from tests.support.mcp_servers import (
    Script,
    http_server,
    run_with_servers,
    stdio,
    turn,
)
from tests.support.turn_core import Core, RecordingView, core

__all__ = ["core", "http_server"]

pytestmark = pytest.mark.allow_model_requests


class Asker:
    """The user at the approval question: answers in order, and remembers what was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> str:
        self.asked.append(request)
        return self.answers.pop(0)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def test_tools_are_offered_under_a_name_that_says_their_server(core: Core) -> None:
    script = Script(["hello"])

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "hi")

    run_with_servers(core, {"tracker": stdio()}, script, scenario)
    offered = script.offered[0]
    assert {"mcp__tracker__echo", "mcp__tracker__add", "mcp__tracker__big"} <= set(offered)
    assert "read_file" in offered  # co's own tools stay
    assert server_of("mcp__tracker__echo") == "tracker" and server_of("read_file") is None


def test_a_call_is_asked_and_runs_once_approved(core: Core) -> None:
    script = Script([("mcp__t__echo", {"text": "ping"}), "ok"])
    asker = Asker("y")

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        assert (await turn(conv, "use the tool")).status == "ok"

    run_with_servers(core, {"t": stdio()}, script, scenario, ask=asker)
    assert [r.tool_name for r in asker.asked] == ["mcp__t__echo"]
    assert "MCP server t" in asker.asked[0].reason and asker.asked[0].always_label == "this tool of t"
    assert [r.content for r in returns(script.seen[1])] == ["echo: ping"]


def test_a_denied_call_never_reaches_the_server(core: Core) -> None:
    script = Script([("mcp__t__env_value", {"name": "PATH"}), "ok"])
    asker = Asker("n")

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "use the tool")

    run_with_servers(core, {"t": stdio()}, script, scenario, ask=asker)
    assert [r.content for r in returns(script.seen[1])] == [USER_DENIED_MESSAGE]


def test_a_read_only_hint_never_skips_the_question_and_always_covers_that_tool_only(core: Core) -> None:
    script = Script(
        [("mcp__t__add", {"a": 1, "b": 2}), ("mcp__t__add", {"a": 3, "b": 4}), ("mcp__t__echo", {"text": "x"}), "ok"]
    )
    asker = Asker("a", "n")

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "add")

    run_with_servers(core, {"t": stdio()}, script, scenario, ask=asker)
    # add is annotated read-only by its server: asked anyway; "a" covers add for the session, not echo.
    assert [r.tool_name for r in asker.asked] == ["mcp__t__add", "mcp__t__echo"]
    assert [r.content for r in returns(script.seen[3])] == ["3", "7", USER_DENIED_MESSAGE]


def test_the_users_own_trust_skips_the_question_per_server_or_tool(core: Core) -> None:
    script = Script(
        [("mcp__a__echo", {"text": "1"}), ("mcp__b__echo", {"text": "2"}), ("mcp__b__add", {"a": 1, "b": 1})]
    )
    asker = Asker("n")

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "go")

    servers = {"a": stdio(trust=True), "b": stdio(trusted_tools=["echo"])}
    run_with_servers(core, servers, script, scenario, ask=asker)
    assert [r.tool_name for r in asker.asked] == ["mcp__b__add"]
    assert [r.content for r in returns(script.seen[3])] == ["echo: 1", "echo: 2", USER_DENIED_MESSAGE]


def test_without_anyone_to_ask_a_call_is_denied(core: Core) -> None:
    script = Script([("mcp__t__echo", {"text": "x"}), "ok"])

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "go")

    run_with_servers(core, {"t": stdio()}, script, scenario, ask=None)
    assert [r.content for r in returns(script.seen[1])] == [NON_INTERACTIVE_DENIED_MESSAGE]


def test_a_huge_output_is_offloaded_to_a_file_with_a_preview(core: Core) -> None:
    script = Script([("mcp__t__big", {"chars": 120_000}), "ok"])

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await turn(conv, "big")
        return conv.deps.tool_output_dir

    out_dir = run_with_servers(core, {"t": stdio(trust=True)}, script, scenario)
    [sent] = returns(script.seen[1])
    assert len(sent.content) < 5_000 and "saved as ref=" in sent.content
    [saved] = list(out_dir.glob("*.txt"))
    assert len(saved.read_text()) == 120_000 and (saved.stat().st_mode & 0o777) == 0o600


def test_a_server_that_dies_mid_call_is_one_line_and_the_chat_goes_on(core: Core) -> None:
    script = Script([("mcp__t__crash", {}), "it failed", "second answer"])
    view = RecordingView()

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        first = await turn(conv, "crash it", view)
        second = await turn(conv, "go on", view)
        return first.status, second.status, hub.states["t"].status

    statuses = run_with_servers(core, {"t": stdio(trust=True)}, script, scenario)
    assert statuses == ("ok", "ok", "failed")
    [failed] = returns(script.seen[1])
    assert "MCP server t is not available" in str(failed.content)
    assert [n for n in view.notices if "MCP server t" in n] == [view.notices[0]] and "stopped" in view.notices[0]
    assert not any(server_of(name) for name in script.offered[2])  # its tools are no longer offered


def test_a_server_that_fails_to_start_is_one_line_with_its_own_words(core: Core) -> None:
    script = Script(["fine"])
    view = RecordingView()

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        outcome = await turn(conv, "hi", view)
        return outcome.status, hub.states["bad"].status

    assert run_with_servers(core, {"bad": stdio("--fail-start")}, script, scenario) == ("ok", "failed")
    assert len(view.notices) == 1 and "MCP server bad failed to start" in view.notices[0]
    assert "cannot start: missing configuration" in view.notices[0]  # the server's stderr, from its log
    log = core.loaded.paths.data_dir / "mcp-logs" / "bad.log"
    assert "co-test-server starting" in log.read_text() and (log.stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize("noise", [70_000, 3_000_000, 60_000_000], ids=["past the head", "3 MB", "60 MB"])
def test_a_talkative_server_that_fails_to_start_costs_a_bounded_log_and_bounded_memory(core: Core, noise: int) -> None:
    """Whatever a server writes to stderr, its log stays about a megabyte (the start of the run and the latest
    output), and explaining a failed start reads only what co keeps in memory."""
    import tracemalloc

    import fastmcp.client.transports  # noqa: F401  (imported before measuring: the import is no part of it)
    import pydantic_ai.mcp  # noqa: F401

    async def start() -> tuple[McpServers, int]:
        hub = McpServers({"bad": stdio("--stderr-bytes", str(noise), "--fail-start")}, core.loaded.paths, core.cwd)
        tracemalloc.start()
        try:
            await hub.wait_started()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await hub.stop()
        return hub, peak

    hub, peak = asyncio.run(start())
    [notice] = hub.take_notices()
    assert "MCP server bad failed to start: co-test-server: cannot start: missing configuration" in notice
    log = core.loaded.paths.data_dir / "mcp-logs" / "bad.log"
    saved = log.read_bytes()
    assert saved.startswith(b"co-test-server starting") and saved.endswith(b"missing configuration\n")
    assert len(saved) <= 1_100_000 and (log.stat().st_mode & 0o777) == 0o600
    assert peak < 8_000_000, peak


def test_a_hung_call_is_bounded_by_the_servers_timeout(core: Core) -> None:
    script = Script([("mcp__t__slow", {"seconds": 30}), "ok"])

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        started = time.monotonic()
        await turn(conv, "slow")
        return time.monotonic() - started

    elapsed = run_with_servers(core, {"t": stdio(trust=True, timeout=1)}, script, scenario)
    [answer] = returns(script.seen[1])
    assert "did not answer within 1 s" in str(answer.content) and elapsed < 15


def test_ctrl_c_cancels_a_hung_call(core: Core) -> None:
    script = Script([("mcp__t__slow", {"seconds": 30}), "ok"])

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        token = CancellationToken()
        asyncio.get_running_loop().call_later(1.5, token.cancel)
        started = time.monotonic()
        outcome = await conv.run_turn("slow", RecordingView(), token)
        return outcome.status, time.monotonic() - started

    status, elapsed = run_with_servers(core, {"t": stdio(trust=True)}, script, scenario)
    assert status == "cancelled" and elapsed < 10


def test_stopping_leaves_no_server_process(core: Core) -> None:
    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await hub.wait_started()
        return hub.states["t"].pid

    pid = run_with_servers(core, {"t": stdio()}, Script([]), scenario)
    assert pid is not None
    assert not _alive(pid)


@pytest.mark.parametrize("ending", ["stopped", "died mid-call"])
def test_a_process_the_server_detached_ends_with_it(core: Core, tmp_path: Path, ending: str) -> None:
    """A process the server started in a session of its own (``setsid``) is no member of the server's group; the
    mark in its environment still ties it to the server."""
    from tests.support.processes import assert_dies, process_alive, wait_for_file

    pid_file = tmp_path / "detached.pid"
    script = Script([("mcp__t__crash", {}), "it failed"] if ending == "died mid-call" else [])

    async def scenario(conv: Conversation, hub: McpServers) -> int:
        await hub.wait_started()
        detached = int(await asyncio.to_thread(wait_for_file, pid_file))
        assert process_alive(detached)
        if ending == "died mid-call":
            await turn(conv, "crash it")
            assert hub.states["t"].status == "failed"
            await asyncio.to_thread(assert_dies, detached)  # before co stops anything
        return detached

    detached = run_with_servers(core, {"t": stdio("--detach", str(pid_file), trust=True)}, script, scenario)
    assert_dies(detached)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_streamable_http_server_serves_its_tools(core: Core, http_server: str) -> None:
    script = Script([("mcp__web__echo", {"text": "over http"}), "ok"])
    asker = Asker("y")

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "go")

    run_with_servers(core, {"web": McpServer(url=http_server, headers={"X-Token": "t0k"})}, script, scenario, ask=asker)
    assert "mcp__web__echo" in script.offered[0]
    assert [r.content for r in returns(script.seen[1])] == ["echo: over http"]


def test_a_long_or_odd_tool_name_stays_a_valid_unique_name() -> None:
    long_a, long_b = offered_name("srv", "x" * 80 + "a"), offered_name("srv", "x" * 80 + "b")
    assert len(long_a) == 64 and long_a != long_b
    assert offered_name("srv", "get.file/contents") == "mcp__srv__get_file_contents"


def test_mcp_outputs_are_trimmed_when_old_and_counted_apart_in_context(core: Core) -> None:
    script = Script([("mcp__t__big", {"chars": 3_000}), "ok", "next"])

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await hub.wait_started()
        before = conv.window.report()
        await turn(conv, "big")
        after = conv.window.report()
        await turn(conv, "and now?")
        return before, after

    before, after = run_with_servers(core, {"t": stdio(trust=True)}, script, scenario)
    # An old MCP output is trimmed like any tool's once its turn is over.
    [old] = returns(script.seen[2])
    assert len(old.content) < 2_200 and "truncated, 3000 chars total" in old.content
    assert before.breakdown["mcp schemas"] > 200 and before.breakdown["mcp outputs"] == 0
    assert after.breakdown["mcp outputs"] > 600 and after.breakdown["tool returns"] == 0
    assert after.breakdown["mcp schemas"] == before.breakdown["mcp schemas"]
    assert any("mcp schemas" in line for line in after.lines())


def test_past_the_schema_budget_names_are_sent_and_a_schema_loads_on_demand(core: Core) -> None:
    script = Script(
        [("search_tools", {"queries": ["collection 7"]}), ("mcp__big__search_collection_7", {"query": "bug"}), "ok"]
    )
    asker = Asker("y")

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await turn(conv, "find the bug")
        return conv.window.report().breakdown["mcp schemas"]

    sent = run_with_servers(core, {"big": stdio("--tools", "50")}, script, scenario, ask=asker)
    first, after_search, _ = script.offered
    assert "search_tools" in first and not any(server_of(name) for name in first)
    assert "mcp__big__search_collection_7" in after_search
    instructions = script.seen[0][0].instructions or ""
    assert "- mcp__big__search_collection_49: Search the issue tracker's collection number 49" in instructions
    assert [r.content for r in returns(script.seen[2])][-1] == "tool 7: bug"
    assert 0 < sent < 4_000  # the listing, not the ~56 schemas


def _hub_with_tools(core: Core, tools_per_server: dict[str, int], description: str = "") -> McpServers:
    """Servers that are running as far as the listing can tell, with that many generated tools each."""
    from pydantic_ai.tools import ToolDefinition

    from co_cli.tools.mcp.server_state import ServerState

    hub = McpServers({}, core.loaded.paths, core.cwd)
    schema = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}
    for name, count in tools_per_server.items():
        state = ServerState(name, McpServer(command="unused"), status="running")
        state.toolset = object()  # type: ignore[assignment]
        text = description or "Search the issue tracker's collection number {n} for items matching a query."
        state.tool_defs = [
            ToolDefinition(name=f"search_collection_{n}", description=text.format(n=n), parameters_json_schema=schema)
            for n in range(count)
        ]
        hub.states[name] = state
    return hub


@pytest.mark.parametrize(
    ("tools", "budget"),
    [
        ({"big": 3_000}, 4_000),
        ({"a": 1_000, "b": 1_000, "c": 1_000}, 4_000),
        ({f"s{n}": 100 for n in range(40)}, 4_000),
        ({"big": 3_000}, 1_500),
        ({"big": 5_000}, 30_000),
    ],
    ids=["3000 tools", "3 servers", "40 servers", "small budget", "large budget"],
)
def test_the_listing_sent_past_the_budget_stays_within_it(core: Core, tools: dict[str, int], budget: int) -> None:
    from co_cli.text_tokens import estimate_text_tokens
    from co_cli.tools.mcp.toolset import SEARCH_TOOL_TOKENS, budget_note, listing, sent_schema_tokens

    hub = _hub_with_tools(core, tools)
    sent = listing(hub, budget)
    total = sum(tools.values())
    assert sent.listed + sent.left_out == total and sent.left_out > 0
    assert estimate_text_tokens(sent.text) + SEARCH_TOOL_TOKENS <= budget
    assert sent_schema_tokens(hub, budget) <= budget
    lines = sent.text.splitlines()
    listed = [line.split(":", 1)[0][2:] for line in lines[1:-1]]
    everything = [
        offered_name(server, f"search_collection_{n}") for server, count in tools.items() for n in range(count)
    ]
    assert listed == everything[: sent.listed]  # the first ones, in order
    assert lines[-1].startswith(f"- ... and {sent.left_out:,} more tools (") and "search_tools finds them" in lines[-1]
    cut = {server_of(name) for name in everything[sent.listed :]}
    if len(cut) > 5:
        assert f"of {len(cut) - 5} other servers" in lines[-1]
    assert f"of {sent.listed:,} of the {total:,} tools" in budget_note(hub, budget)


def test_the_listing_budget_counts_wide_characters(core: Core) -> None:
    from co_cli.text_tokens import estimate_text_tokens
    from co_cli.tools.mcp.toolset import SEARCH_TOOL_TOKENS, listing

    hub = _hub_with_tools(core, {"docs": 2_000}, description="検索 {n}: 問題追跡システムの項目を検索します。" * 3)
    sent = listing(hub, 4_000)
    assert sent.left_out > 0 and estimate_text_tokens(sent.text) + SEARCH_TOOL_TOKENS <= 4_000


def test_a_tool_left_out_of_the_listing_still_loads_through_search(core: Core) -> None:
    script = Script(
        [("search_tools", {"queries": ["collection 280"]}), ("mcp__big__search_collection_280", {"query": "x"}), "ok"]
    )

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await turn(conv, "find it")

    run_with_servers(core, {"big": stdio("--tools", "300")}, script, scenario, ask=Asker("y"))
    instructions = script.seen[0][0].instructions or ""
    assert "- mcp__big__search_collection_280:" not in instructions and "more tools (" in instructions
    assert "mcp__big__search_collection_280" in script.offered[1]
    assert [r.content for r in returns(script.seen[2])][-1] == "tool 280: x"


def test_under_the_schema_budget_schemas_are_sent_whole(core: Core) -> None:
    script = Script(["ok"])

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await turn(conv, "hi")

    run_with_servers(core, {"big": stdio("--tools", "50")}, script, scenario, mcp_schema_budget_tokens=0)
    assert "mcp__big__search_collection_7" in script.offered[0] and "search_tools" not in script.offered[0]


def test_slash_mcp_without_servers_says_how_to_add_them(core: Core) -> None:
    from tests.support.chat_app import ChatRun
    from tests.support.turn_core import echo, streaming_model

    run = ChatRun(core, streaming_model(echo))
    printed = run.send("/mcp")
    assert printed.code == 0 and "No MCP servers configured (the mcp_servers setting" in printed.out


def test_a_stdio_server_gets_its_own_env_and_not_the_users_keys(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-servers")
    script = Script([("mcp__t__env_value", {"name": "OPENAI_API_KEY"}), ("mcp__t__env_value", {"name": "NOTES"}), "ok"])

    async def scenario(conv: Conversation, hub: McpServers) -> None:
        await turn(conv, "env")

    run_with_servers(core, {"t": stdio(trust=True, env={"NOTES": "from settings"})}, script, scenario)
    assert [r.content for r in returns(script.seen[2])] == ["<unset>", "from settings"]
