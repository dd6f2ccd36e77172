"""search_conversation_history and read_tool_output: what context governance moved out of view stays reachable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelResponse, TextPart

from co_cli.context.offload import offload_large_outputs
from co_cli.deps import CoDeps
from co_cli.store import Store
from co_cli.tools.history import build_history_toolset, read_tool_output, search_conversation_history
from tests.support.deps import ctx_for, in_session, make_deps


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CoDeps:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)
    return make_deps(tmp_path)


def test_search_finds_text_of_this_session_only(deps: CoDeps) -> None:
    store = Store.open(deps.paths.db)
    mine = store.sessions.create(model="test", cwd="/", title="mine")
    other = store.sessions.create(model="test", cwd="/", title="other")
    seq = store.messages.begin_turn(mine.id, "the deploy key lives in vault path secret/ops/kestrel")
    store.messages.finish_turn(mine.id, seq, [ModelResponse(parts=[TextPart("noted")])])
    seq = store.messages.begin_turn(other.id, "kestrel in another conversation")
    store.messages.finish_turn(other.id, seq, [ModelResponse(parts=[TextPart("ok")])])
    deps.store = store
    in_session(deps, mine.id)
    out = search_conversation_history(ctx_for(deps), "kestrel")
    assert "secret/ops/kestrel" in out.replace("«", "").replace("»", "")
    assert "another conversation" not in out
    assert "No matches" in search_conversation_history(ctx_for(deps), "pelican")
    store.close()


def test_search_before_the_conversation_has_messages(deps: CoDeps) -> None:
    assert "no messages" in search_conversation_history(ctx_for(deps), "anything")


def test_read_tool_output_pages_an_offloaded_output(deps: CoDeps) -> None:
    from pydantic_ai.messages import ModelRequest, ToolCallPart, ToolReturnPart

    in_session(deps, "s1")
    big = "\n".join(f"line {i}" for i in range(20000))
    history = [
        ModelResponse(parts=[ToolCallPart("run_shell", {"command": "seq"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("run_shell", big, tool_call_id="c1")]),
    ]
    processed = offload_large_outputs(history, 1000, deps.tool_output_dir)
    preview = processed[1].parts[0].content
    assert isinstance(preview, str) and "ref=" in preview
    ref = preview.split("ref=", 1)[1].split(";", 1)[0].split("]", 1)[0].strip()
    page = read_tool_output(ctx_for(deps), ref, offset=0, limit=200)
    assert "line 0" in page
    assert set(build_history_toolset().tools) == {"search_conversation_history", "read_tool_output"}
