"""search_conversation_history and read_tool_output: what context governance moved out of view stays reachable."""

from __future__ import annotations

import asyncio
import os
import threading
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
    out = asyncio.run(search_conversation_history(ctx_for(deps), "kestrel"))
    assert "secret/ops/kestrel" in out.replace("«", "").replace("»", "")
    assert "another conversation" not in out
    assert "No matches" in asyncio.run(search_conversation_history(ctx_for(deps), "pelican"))
    store.close()


def test_a_query_repeating_a_word_finds_what_the_word_finds(deps: CoDeps) -> None:
    store = Store.open(deps.paths.db)
    mine = store.sessions.create(model="test", cwd="/", title="mine")
    for text in ("kestrel nests high", "no bird here", "Kestrel, pelican and kestrel-like birds"):
        seq = store.messages.begin_turn(mine.id, text)
        store.messages.finish_turn(mine.id, seq, [ModelResponse(parts=[TextPart("ok")])])
    deps.store = store
    in_session(deps, mine.id)
    once = asyncio.run(search_conversation_history(ctx_for(deps), "kestrel"))
    for query in ("kestrel " * 2000, "Kestrel KESTREL kestrel. kestrel, " * 300, "(kestrel) " * 20_000):
        repeated = asyncio.run(search_conversation_history(ctx_for(deps), query))
        assert repeated.splitlines()[1:] == once.splitlines()[1:]
        assert len(repeated.splitlines()[0]) < 300  # the query is not echoed back whole
    assert once.startswith("2 match(es)") and len(once.splitlines()) == 3
    store.close()


SLOW_QUERY = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"
)


@pytest.mark.timeout(60)
def test_a_cancelled_history_search_ends_and_frees_the_store(deps: CoDeps, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a long search: the query stops, so the store is free for saving the cancelled turn."""
    store = Store.open(deps.paths.db)
    mine = store.sessions.create(model="test", cwd="/", title="mine")
    deps.store = store
    in_session(deps, mine.id)
    started = threading.Event()

    def slow_search(query: str, session_id: str | None = None, limit: int = 20, stop=None):  # type: ignore[no-untyped-def]
        started.set()
        return store.db.read(SLOW_QUERY, stop=stop)

    monkeypatch.setattr(store.search, "messages", slow_search)

    async def start_and_cancel() -> None:
        task = asyncio.ensure_future(search_conversation_history(ctx_for(deps), "kestrel"))
        await asyncio.to_thread(started.wait, 10)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(start_and_cancel())
    assert store.db.lock.acquire(timeout=3), "the abandoned search still holds the store"
    store.db.lock.release()
    store.close()


def test_search_before_the_conversation_has_messages(deps: CoDeps) -> None:
    assert "no messages" in asyncio.run(search_conversation_history(ctx_for(deps), "anything"))


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
