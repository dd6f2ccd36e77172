"""Usage and cost per turn: stored as reported, priced by genai-prices, unknown shown as unknown (never $0)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.usage import RequestUsage
from typer.testing import CliRunner

from co_cli.session.metering import messages_cost, response_cost
from co_cli.store.tool_calls import ToolStats
from co_cli.store.usage import TurnUsage, UsageTotals
from co_cli.terminal import commands
from co_cli.terminal.views import tool_stats, usage_lines
from co_cli.terminal_text import format_cost
from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, core, long_echo, run, streaming_model, summarizer

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def priced(model: str, inp: int = 1000, out: int = 100) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart("x")], model_name=model, usage=RequestUsage(input_tokens=inp, output_tokens=out)
    )


def test_a_price_already_on_the_response_is_used_and_an_unknown_model_is_looked_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pydantic-ai prices each response as it comes (a provider's own figure first): that price is used, not
    looked up again; a model genai-prices does not know is looked up once per process, not per response."""
    reported = priced("gpt-4o")
    reported.usage.cost = 0.25  # what the provider said it cost, not the list price
    assert response_cost(reported) == 0.25
    looked_up: list[str | None] = []
    original = ModelResponse.cost

    def counted(self: ModelResponse) -> Any:
        looked_up.append(self.model_name)
        return original(self)

    monkeypatch.setattr(ModelResponse, "cost", counted)
    assert response_cost(priced("a-model-nobody-prices-0")) is None
    assert response_cost(priced("a-model-nobody-prices-0")) is None
    assert looked_up == ["a-model-nobody-prices-0"]


def test_a_known_model_is_priced_and_an_unknown_one_is_unknown_not_zero() -> None:
    assert response_cost(priced("gpt-4o")) == pytest.approx(0.0035)
    assert response_cost(priced("no-such-model-anywhere")) is None
    assert messages_cost([priced("gpt-4o"), priced("gpt-4o")]) == pytest.approx(0.007)
    assert messages_cost([priced("gpt-4o"), priced("no-such-model-anywhere")]) is None
    assert format_cost(None) == "unknown"
    unknown = UsageTotals()
    unknown.add(TurnUsage(cost_usd=None))
    assert format_cost(unknown) == "unknown" and not unknown.cost_known
    unknown.add(TurnUsage(cost_usd=0.5))
    assert format_cost(unknown) == "$0.5000 + unknown"


def test_each_turn_saves_its_usage_and_the_session_totals_add_up(core: Core) -> None:
    conv = core.conversation(streaming_model(lambda messages: "a fine answer", name="gpt-4o"))
    assert run(conv, "hello").status == "ok"
    assert run(conv, "again").status == "ok"
    assert conv.session is not None
    last = conv.last_usage
    assert last is not None and last.requests == 1 and last.input_tokens > 0 and last.output_tokens > 0
    assert last.cost_usd is not None and last.cost_usd > 0
    totals = core.store.usage.totals([conv.session.id])[conv.session.id]
    assert totals.rows == 2 and totals.requests == 2 and totals.cost_known
    assert totals.cost_usd == pytest.approx(2 * last.cost_usd, rel=0.2)
    info = core.store.sessions.get(conv.session.id)
    assert info.input_tokens == totals.input_tokens and info.output_tokens == totals.output_tokens


def test_an_unpriced_model_is_recorded_as_unknown(core: Core) -> None:
    conv = core.conversation(streaming_model(lambda messages: "hi"))
    assert run(conv, "hello").status == "ok"
    assert conv.session is not None and conv.last_usage is not None
    assert conv.last_usage.cost_usd is None
    [row] = core.store.db.read("SELECT cost_usd, requests FROM turn_usage WHERE session_id = ?", (conv.session.id,))
    assert tuple(row) == (None, 1)
    assert format_cost(core.store.usage.totals([conv.session.id])[conv.session.id]) == "unknown"


def test_the_summariser_spend_is_its_own_line(core: Core) -> None:
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    for i in range(3):
        run(conv, f"message {i}")
    asyncio.run(conv.compactions.compact(None))
    assert conv.session is not None
    by_role = core.store.usage.by_role(conv.session.id)
    assert list(by_role) == ["chat", "summary"]
    assert by_role["chat"].requests == 3 and by_role["summary"].requests >= 1
    lines = usage_lines(by_role)
    assert lines[0].startswith("chat: 3 requests") and lines[1].startswith("summary: ")
    assert lines[-1].startswith("total: ") and "unknown" in lines[-1]


def test_usage_report_groups_by_model_day_session_and_since(core: Core) -> None:
    store = core.store
    a = store.sessions.create(model="m", cwd="/", title="a").id
    b = store.sessions.create(model="m", cwd="/", title="b").id
    store.usage.record(a, TurnUsage(model="gpt-4o", requests=1, input_tokens=10, output_tokens=5, cost_usd=0.25))
    store.usage.record(b, TurnUsage(model="gpt-4o", requests=2, input_tokens=20, output_tokens=5, cost_usd=0.5))
    store.usage.record(b, TurnUsage(model="local", requests=1, input_tokens=7, cost_usd=None))
    with store.db.transaction() as tx:
        tx.execute("UPDATE turn_usage SET created_at = ? WHERE session_id = ?", (time.time() - 10 * 86400, a))
    by_model = store.usage.report(since=None, by="model")
    assert set(by_model) == {"gpt-4o", "local"}
    assert by_model["gpt-4o"].cost_usd == pytest.approx(0.75) and by_model["gpt-4o"].cost_known
    assert format_cost(by_model["local"]) == "unknown"
    by_session = store.usage.report(since=None, by="session")
    assert by_session[b].requests == 3 and format_cost(by_session[b]) == "$0.5000 + unknown"
    assert len(store.usage.report(since=None, by="day")) == 2
    recent = store.usage.report(since=time.time() - 7 * 86400, by="model")
    assert recent["gpt-4o"].requests == 2


def test_co_usage_command_prints_a_table_and_json(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from co_cli.terminal.usage_cli import app

    sid = core.store.sessions.create(model="m", cwd="/", title="a").id
    core.store.usage.record(sid, TurnUsage(model="gpt-4o", requests=1, input_tokens=10, output_tokens=5, cost_usd=1))
    core.store.usage.record(sid, TurnUsage(model="mystery", requests=1, input_tokens=3, output_tokens=1))
    runner = CliRunner()
    table = runner.invoke(app, ["--by", "model"], env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.output
    assert "gpt-4o" in table.output and "$1.0000" in table.output and "mystery" in table.output
    assert "unknown" in table.output and "$1.0000 + unknown" in table.output
    data = json.loads(runner.invoke(app, ["--json", "--since", "7d"]).output)
    assert data["total"]["cost_usd"] is None and data["total"]["known_cost_usd"] == 1.0
    assert {row["key"] for row in data["rows"]} == {"gpt-4o", "mystery"}
    bad = runner.invoke(app, ["--since", "soon"])
    assert bad.exit_code != 0


def test_tool_stats_count_calls_failures_and_denials_per_tool() -> None:
    from pydantic_ai.messages import ToolCallPart, ToolReturnPart

    from co_cli.store import StoredMessage

    messages: list[ModelMessage] = [
        ModelResponse(parts=[ToolCallPart("run_shell", {}, "1"), ToolCallPart("read_file", {}, "2")]),
        ModelRequest(
            parts=[
                ToolReturnPart("run_shell", "denied", "1", outcome="denied"),
                ToolReturnPart("read_file", "no such file", "2", outcome="retried"),
            ]
        ),
        ModelResponse(parts=[ToolCallPart("read_file", {}, "3")]),
        ModelRequest(parts=[ToolReturnPart("read_file", "ok", "3"), UserPromptPart("thanks")]),
    ]
    stored = [StoredMessage(i, 0.0, "", "", "ok", m) for i, m in enumerate(messages)]
    assert tool_stats(stored) == {"read_file": ToolStats(2, 1, 0), "run_shell": ToolStats(1, 0, 1)}


def test_slash_usage_shows_the_last_turn_and_the_session(core: Core) -> None:
    conv = core.conversation(streaming_model(lambda messages: "hi"))
    run(conv, "hello")
    shown: list[str] = []
    host: Any = SimpleNamespace(conv=conv, store=core.store, saving=True, info=shown.append, error=shown.append)
    asyncio.run(commands.dispatch(host, "/usage"))
    assert shown[0].startswith("Last turn: 1 request ·") and "unknown" in shown[0]
    assert shown[1] == "This session:" and shown[2].strip().startswith("chat: 1 request ·")


def test_toolbar_shows_the_session_cost_only_when_known(core: Core) -> None:
    from co_cli.terminal.app import ChatApp

    def toolbar_after_a_turn(model_name: str) -> str:
        conv = core.conversation(streaming_model(lambda messages: "fine", name=model_name))
        run(conv, "hello")
        app = ChatApp(conv, core.loaded, choice=conv.resolved.choice, store=core.store, interactive=False)
        return app.toolbar()

    priced_bar = toolbar_after_a_turn("gpt-4o")
    assert "│ $0.0" in priced_bar
    assert "$" not in toolbar_after_a_turn("no-such-model-anywhere")


def test_sessions_list_has_tokens_and_cost_columns(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from co_cli.terminal.sessions_cli import app

    conv = core.conversation(streaming_model(lambda messages: "fine", name="gpt-4o"))
    run(conv, "hello")
    old = core.store.sessions.create(model="m", cwd="/", title="before usage rows")
    seq = core.store.messages.begin_turn(old.id, "old prompt")
    core.store.messages.finish_turn(
        old.id, seq, [ModelResponse(parts=[TextPart("old")])], input_tokens=5, output_tokens=2
    )
    monkeypatch.chdir(core.cwd)
    runner = CliRunner()
    table = runner.invoke(app, ["list"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.output
    assert "Tokens" in table.output and "Cost" in table.output and "$0.0" in table.output
    assert "unknown" in table.output  # the session saved without usage rows: tokens known, cost not
    rows = {row["id"]: row for row in json.loads(runner.invoke(app, ["list", "--json"]).output)}
    assert conv.session is not None
    assert rows[conv.session.id]["usage"]["cost_usd"] > 0 and rows[old.id]["usage"] is None


def test_the_embedded_model_costs_nothing_and_an_unknown_one_is_unknown() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    from co_cli.session.metering import response_cost

    usage = RequestUsage(input_tokens=1000, output_tokens=100)
    local = ModelResponse(parts=[TextPart("hi")], usage=usage, model_name="local:SmolLM2", provider_name="llama_cpp")
    unknown = ModelResponse(parts=[TextPart("hi")], usage=usage, model_name="my-model", provider_name="openai")
    assert response_cost(local) == 0.0
    assert response_cost(unknown) is None


def test_usage_after_new_speaks_of_the_new_conversation(core: Core) -> None:
    """/usage after /new (or /clear) showed the previous session's last turn."""
    chat = ChatRun(core, streaming_model(lambda messages: "hi"))
    printed = chat.send("hello", "/new", "/usage")
    assert printed.code == 0, printed.err
    assert printed.lines[-1] == "Last turn: none yet in this run."


def test_memory_extraction_spend_is_saved_as_memory_not_summary(core: Core) -> None:
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    run(conv, "first")
    # what the extraction worker calls between turns (its model getter is the engine's memory model)
    request = [ModelRequest(parts=[UserPromptPart("Extract the facts worth remembering.")])]
    asyncio.run(conv.engine.memory_model.request(request, None, ModelRequestParameters()))
    run(conv, "second")
    assert conv.session is not None
    by_role = core.store.usage.by_role(conv.session.id)
    assert list(by_role) == ["chat", "memory"] and by_role["memory"].requests == 1


def test_the_memory_worker_is_metered_as_memory(core: Core) -> None:
    settings = core.loaded.settings.model_copy(update={"memory_extract": "propose"})
    core.loaded = replace(core.loaded, settings=settings)
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    worker = conv.background.attach_extraction()
    assert worker is not None and worker.model() is conv.engine.memory_model
    assert conv.engine.memory_model.role == "memory"  # type: ignore[attr-defined]


def test_markdown_export_says_unknown_for_an_unknown_price(core: Core) -> None:
    from co_cli.store.export import export_markdown

    conv = core.conversation(streaming_model(lambda messages: "hi"))
    run(conv, "hello")
    assert conv.session is not None
    exported = export_markdown(core.store, conv.session.id)
    assert "; cost unknown" in exported and "$0.0000" not in exported
