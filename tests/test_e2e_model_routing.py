"""End to end: a provider-prefixed model goes to its provider, never to the configured base_url server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.co_process import run_co
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.e2e


def test_a_named_provider_is_not_sent_to_base_url(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = run_co(["chat", "-m", "anthropic:claude-sonnet-4-5", "-p", "hi"], co_server_env, workdir)
    assert result.returncode == 2
    assert (
        result.stderr
        == "error: cannot use model 'anthropic:claude-sonnet-4-5': set ANTHROPIC_API_KEY in the environment\n"
    )
    assert scripted_server.requests == []

    piped = run_co(["chat", "--lines"], co_server_env, workdir, input="/model openai:gpt-4o\nhello\n")
    assert "OPENAI_API_KEY" in piped.stderr
    assert all("gpt-4o" not in str(r.body) for r in scripted_server.requests)


def test_a_model_named_without_its_provider_goes_to_the_provider_pydantic_ai_knows(
    co_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """``gpt-4o`` is OpenAI's (here the scripted server stands in for it through OPENAI_BASE_URL): the request goes
    to OpenAI's Responses API, as ``openai:gpt-4o`` does, with the OpenAI key."""
    env = {**co_env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": scripted_server.base_url}
    run_co(["chat", "-m", "gpt-4o", "-p", "hi"], env, workdir)  # the scripted server speaks chat completions only
    [sent] = [r for r in scripted_server.requests if r.method == "POST"]
    assert (sent.path, sent.body["model"]) == ("/v1/responses", "gpt-4o")
    assert sent.headers["authorization"] == "Bearer sk-test"
    unknown = run_co(["chat", "-m", "no-such-model-x", "-p", "hi"], env, workdir)
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == [
        "error: unknown model 'no-such-model-x': use 'provider:model' (e.g. 'openai:gpt-5-mini', 'ollama:qwen2.5'), "
        "'local', or 'test'; pydantic-ai knows no provider for this name"
    ]


def test_with_a_base_url_a_name_without_provider_is_the_servers(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    for name in ("gpt-4o", "qwen2.5:7b-unknown"):
        result = run_co(["chat", "-m", name, "-p", "hi"], co_server_env, workdir)
        assert result.returncode == 0, result.stderr
    assert [r.body["model"] for r in scripted_server.chat_requests] == ["gpt-4o", "qwen2.5:7b-unknown"]
