"""Self-tests of the test harness.

The scripted server speaks Chat Completions well enough for the OpenAI client path co uses, and the terminal
helpers can drive a prompt_toolkit REPL.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support import co_process
from tests.support.scripted_server import Error, Hang, ScriptedServer, Text, ToolCalls, Usage

allow_model_requests = pytest.mark.allow_model_requests


def make_agent(server: ScriptedServer, api_key: str = "test-key", **kwargs: Any) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    provider = OpenAICompatibleProvider("scripted", base_url=server.base_url, api_key=api_key)
    return Agent(OpenAIChatModel("scripted", provider=provider), model_settings={"max_retries": 0}, **kwargs)


async def stream_run(agent: Any, prompt: str) -> tuple[list[str], Any]:
    """Run ``prompt`` with run_stream_events; return the text deltas and the final AgentRunResult."""
    from pydantic_ai import AgentRunResultEvent
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

    texts: list[str] = []
    result = None
    async with agent.run_stream_events(prompt) as events:
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                texts.append(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                texts.append(event.delta.content_delta)
            elif isinstance(event, AgentRunResultEvent):
                result = event.result
    return texts, result


def post_json(url: str, body: dict[str, Any], timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def chat_body(text: str, stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": "scripted", "messages": [{"role": "user", "content": text}], "stream": stream, **extra}


@allow_model_requests
def test_streamed_text_through_agent(scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("The capital of France is Paris.", chunk_size=5))
    texts, result = asyncio.run(stream_run(make_agent(scripted_server), "capital of France?"))

    assert result.output == "The capital of France is Paris."
    assert len(texts) > 3
    assert "".join(texts) == "The capital of France is Paris."
    (request,) = scripted_server.chat_requests
    assert request.stream
    assert request.texts("user") == ["capital of France?"]


@allow_model_requests
def test_default_reply_echoes_last_user_message(scripted_server: ScriptedServer) -> None:
    agent = make_agent(scripted_server)
    first = agent.run_sync("hello there")
    second = agent.run_sync("and again", message_history=first.all_messages())

    assert first.output == "echo: hello there"
    assert second.output == "echo: and again"
    assert scripted_server.chat_requests[1].texts("user") == ["hello there", "and again"]
    assert "echo: hello there" in scripted_server.chat_requests[1].texts("assistant")


@allow_model_requests
def test_tool_call_is_streamed_executed_and_answered(scripted_server: ScriptedServer) -> None:
    agent = make_agent(scripted_server)
    calls: list[tuple[int, int]] = []

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        calls.append((a, b))
        return a + b

    scripted_server.script(ToolCalls([("add", {"a": 20, "b": 22})], text="Let me add.", chunk_size=3), Text("42"))
    texts, result = asyncio.run(stream_run(agent, "what is 20 + 22?"))

    assert calls == [(20, 22)]
    assert result.output == "42"
    first, second = scripted_server.chat_requests
    assert [t["function"]["name"] for t in first.body["tools"]] == ["add"]
    tool_messages = [m for m in second.messages if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert tool_messages[0]["content"] == "42"
    assistant = next(m for m in second.messages if m["role"] == "assistant")
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 20, "b": 22}
    assert tool_messages[0]["tool_call_id"] == assistant["tool_calls"][0]["id"]


@allow_model_requests
def test_non_streamed_tool_call(scripted_server: ScriptedServer) -> None:
    agent = make_agent(scripted_server)

    @agent.tool_plain
    def shout(word: str) -> str:
        """Upper-case a word."""
        return word.upper()

    scripted_server.script(ToolCalls([("shout", {"word": "hey"})]), Text("done"))
    result = agent.run_sync("shout hey")

    assert result.output == "done"
    assert [m["content"] for m in scripted_server.chat_requests[1].messages if m["role"] == "tool"] == ["HEY"]


@allow_model_requests
def test_error_status_raises_model_http_error(scripted_server: ScriptedServer) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    scripted_server.script(Error(500, "the server broke"))
    with pytest.raises(ModelHTTPError) as info:
        make_agent(scripted_server).run_sync("hi")

    assert info.value.status_code == 500
    assert info.value.body["message"] == "the server broke"
    assert len(scripted_server.chat_requests) == 1


@allow_model_requests
def test_context_length_error_carries_code(scripted_server: ScriptedServer) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    scripted_server.script(Error(400, "too long", type="invalid_request_error", code="context_length_exceeded"))
    with pytest.raises(ModelHTTPError) as info:
        asyncio.run(stream_run(make_agent(scripted_server), "hi"))

    assert info.value.status_code == 400
    assert info.value.body["code"] == "context_length_exceeded"


@allow_model_requests
def test_retryable_error_lets_the_client_retry(scripted_server: ScriptedServer) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    provider = OpenAICompatibleProvider("scripted", base_url=scripted_server.base_url, api_key="k")
    agent = Agent(OpenAIChatModel("scripted", provider=provider), model_settings={"max_retries": 1})
    scripted_server.script(
        Error(429, "slow down", type="rate_limit_error", should_retry=True, headers={"retry-after-ms": "10"})
    )

    assert agent.run_sync("hi").output == "echo: hi"
    assert len(scripted_server.chat_requests) == 2


@allow_model_requests
def test_requests_record_authorization_header(scripted_server: ScriptedServer) -> None:
    make_agent(scripted_server, api_key="sk-secret-123").run_sync("hi")

    (request,) = scripted_server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-secret-123"
    assert request.body["model"] == "scripted"


@allow_model_requests
def test_usage_is_reported(scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("first", usage=Usage(prompt_tokens=1234, completion_tokens=56)), Text("second"))
    agent = make_agent(scripted_server)
    _, streamed = asyncio.run(stream_run(agent, "hi"))
    estimated = agent.run_sync("x" * 400)

    assert streamed.usage.input_tokens == 1234
    assert streamed.usage.output_tokens == 56
    assert scripted_server.chat_requests[0].body["stream_options"] == {"include_usage": True}
    assert estimated.usage.input_tokens >= 100
    assert estimated.usage.output_tokens == 1


@allow_model_requests
def test_responder_answers_before_the_script(scripted_server: ScriptedServer) -> None:
    scripted_server.responder = lambda req: (
        Text("a summary") if "summar" in req["messages"][0]["content"].lower() else None
    )
    scripted_server.script(Text("scripted answer"))
    summariser = make_agent(scripted_server, instructions="Summarise the conversation.")

    assert summariser.run_sync("long talk").output == "a summary"
    assert make_agent(scripted_server).run_sync("question").output == "scripted answer"
    assert scripted_server.pending == 0


@allow_model_requests
def test_custom_default(scripted_server: ScriptedServer) -> None:
    scripted_server.default = lambda req: Text(f"{len(req['messages'])} messages")

    assert make_agent(scripted_server).run_sync("hi").output == "1 messages"


def test_raw_sse_framing(scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("abcdefghij", chunk_size=4))
    status, headers, raw = post_json(
        f"{scripted_server.base_url}/chat/completions",
        chat_body("hi", True, stream_options={"include_usage": True}),
    )

    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    text = raw.decode()
    assert text.endswith("data: [DONE]\n\n")
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") and "\n" not in e for e in events)
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    content = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
    assert content == ["", "abcd", "efgh", "ij", ""]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 2


def test_raw_tool_call_deltas_and_no_usage_unless_asked(scripted_server: ScriptedServer) -> None:
    scripted_server.script(ToolCalls([("f", {"x": "1234567890"}), ("g", "{bad")], chunk_size=6))
    _, _, raw = post_json(f"{scripted_server.base_url}/chat/completions", chat_body("hi", True))

    chunks = [json.loads(e.removeprefix("data: ")) for e in raw.decode().split("\n\n") if e and "[DONE]" not in e]
    assert all(c["choices"] and "usage" not in c for c in chunks)
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    starts = [d for d in deltas if "id" in d]
    assert [(d["index"], d["function"]["name"]) for d in starts] == [(0, "f"), (1, "g")]
    args = {i: "".join(d["function"]["arguments"] for d in deltas if d["index"] == i) for i in (0, 1)}
    assert json.loads(args[0]) == {"x": "1234567890"}
    assert args[1] == "{bad"
    assert len([d for d in deltas if d["index"] == 0]) > 2
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_raw_non_stream_completion_and_models(scripted_server: ScriptedServer) -> None:
    status, _, raw = post_json(f"{scripted_server.base_url}/chat/completions", chat_body("ping", False))
    completion = json.loads(raw)

    assert status == 200
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["message"] == {"role": "assistant", "content": "echo: ping"}
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert completion["usage"]["total_tokens"] == sum(
        completion["usage"][k] for k in ("prompt_tokens", "completion_tokens")
    )
    with urllib.request.urlopen(f"{scripted_server.base_url}/models", timeout=5) as response:
        models = json.loads(response.read())
    assert [m["id"] for m in models["data"]] == ["scripted"]


def test_raw_error_body_and_unknown_path(scripted_server: ScriptedServer) -> None:
    scripted_server.script(Error(401, "bad key", type="invalid_request_error", code="invalid_api_key"))
    status, headers, raw = post_json(f"{scripted_server.base_url}/chat/completions", chat_body("hi", False))
    missing, _, _ = post_json(f"{scripted_server.base_url}/embeddings", {"input": "x"})

    assert status == 401
    assert headers["x-should-retry"] == "false"
    assert json.loads(raw) == {
        "error": {
            "message": "bad key",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    assert missing == 404


def test_delay_between_chunks(scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("abcdef", chunk_size=2, delay=0.05))
    started = time.monotonic()
    post_json(f"{scripted_server.base_url}/chat/completions", chat_body("hi", True))

    assert time.monotonic() - started >= 0.2


def test_hang_times_out_the_client(scripted_server: ScriptedServer) -> None:
    scripted_server.script(Hang(5))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        post_json(f"{scripted_server.base_url}/chat/completions", chat_body("hi", True), timeout=0.2)

    assert time.monotonic() - started < 2


@allow_model_requests
def test_client_disconnect_mid_stream_is_quiet(
    scripted_server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted_server.script(Text("x" * 200, chunk_size=1, delay=0.01))
    request = urllib.request.Request(
        f"{scripted_server.base_url}/chat/completions",
        data=json.dumps(chat_body("hi", True)).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        response.readline()
    time.sleep(0.1)

    assert make_agent(scripted_server).run_sync("still alive?").output == "echo: still alive?"
    assert "Traceback" not in capsys.readouterr().err


def test_wait_for_requests(scripted_server: ScriptedServer) -> None:
    with pytest.raises(TimeoutError):
        scripted_server.wait_for_requests(1, timeout=0.05)
    post_json(f"{scripted_server.base_url}/chat/completions", chat_body("hi", False))

    assert len(scripted_server.wait_for_requests(1)) == 1


def test_model_requests_are_blocked_without_the_marker(scripted_server: ScriptedServer) -> None:
    with pytest.raises(RuntimeError, match="ALLOW_MODEL_REQUESTS"):
        make_agent(scripted_server).run_sync("hi")

    assert scripted_server.requests == []


FAKE_REPL = """
import sys
from prompt_toolkit import PromptSession

session = PromptSession(bottom_toolbar=lambda: "context 3%")
while True:
    try:
        line = session.prompt("co> ")
    except KeyboardInterrupt:
        print("cancelled")
        continue
    except EOFError:
        print("bye")
        break
    for ch in f"answer: {line}":  # printed piecemeal, as a streamed answer is
        sys.stdout.write(ch)
        sys.stdout.flush()
    print()
"""


def test_pty_helpers_drive_a_prompt_toolkit_repl(
    tmp_path: Path, co_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "fake_repl.py"
    script.write_text(FAKE_REPL)
    monkeypatch.setattr(co_process, "CO_COMMAND", [sys.executable, str(script)])
    child = co_process.spawn_co([], co_env, tmp_path, timeout=10)

    assert co_process.expect_prompt(child) == ""
    co_process.send_line(child, "hello co> world")
    assert co_process.expect_prompt(child).endswith("answer: hello co> world\n")
    co_process.ctrl_c(child)
    assert co_process.expect_prompt(child).endswith("cancelled\n")
    co_process.ctrl_d(child)
    child.expect(pexpect.EOF)
    assert "bye" in co_process.transcript(child)
    assert "\x1b" not in co_process.transcript(child)


def test_run_co_pipes_input_and_sets_up_the_environment(
    tmp_path: Path, co_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "show.py"
    script.write_text("import os, sys\nprint(sys.argv[1:], sys.stdin.read().upper(), os.environ['TERM'])\n")
    monkeypatch.setattr(co_process, "CO_COMMAND", [sys.executable, str(script)])

    result = co_process.run_co(["chat", "-p"], co_env, tmp_path, input="piped")

    assert result.returncode == 0
    assert result.stdout == "['chat', '-p'] PIPED xterm-256color\n"


def test_strip_ansi() -> None:
    styled = "\x1b[?2004h\x1b[0;32;1mco>\x1b[0m hi\x1b]8;;http://x\x07link\x1b]8;;\x07\r\n\x1b=\x1b(B"
    assert co_process.strip_ansi(styled) == "co> hilink\n"


def test_co_env_is_hermetic(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CO_CLI_MODEL", "NO_COLOR", "SOME_OTHER_API_KEY"):
        monkeypatch.setenv(name, "leak")
    monkeypatch.setenv("KEEP_ME", "yes")
    env: dict[str, str] = request.getfixturevalue("co_env")

    assert not any(v == "leak" for v in env.values())
    assert env["KEEP_ME"] == "yes"
    for name in ("HOME", "CO_CLI_DATA_DIR", "CO_CLI_CONFIG_DIR"):
        assert Path(env[name]).is_dir()
        assert Path(env[name]).is_relative_to(tmp_path)


def test_co_server_env_points_at_the_server(co_server_env: dict[str, str], scripted_server: ScriptedServer) -> None:
    assert co_server_env["CO_CLI_BASE_URL"] == scripted_server.base_url
    assert co_server_env["CO_CLI_MODEL"] == "scripted"
    assert co_server_env["CO_CLI_API_KEY"] == "test-key"
