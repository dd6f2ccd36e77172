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
