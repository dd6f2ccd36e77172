"""A tool output past the offload threshold is saved in the transcript as the preview the model is sent, with the
reference to the private file holding the whole output: whatever the tool (an MCP server's, co's own), however
the turn ends; resume, fork, search and export read that, and the model can still page the whole output."""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from co_cli.session import Conversation
from co_cli.store.export import export_json
from co_cli.tools.mcp.servers import McpServers
from tests.support.mcp_servers import Script, run_with_servers, stdio, turn
from tests.support.turn_core import Core, RecordingView, core, run, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

OFFLOAD = 40_000  # tool_output_offload_chars's default


READ_BIG = ("read_file", {"path": "big.txt", "limit": 5_000})
"""read_file's most: 50,000 characters, past the offload threshold."""


def write_big(core: Core) -> None:
    (core.cwd / "big.txt").write_text("".join(f"row {n:06d} of the file\n" for n in range(20_000)))


def stored_rows(core: Core) -> list[tuple[str, int, int, str]]:
    """(kind, length of text, length of json, text) of every saved message, read from the database itself."""
    with sqlite3.connect(core.loaded.paths.db) as db:
        rows = db.execute("SELECT kind, length(text), length(json), text FROM messages ORDER BY session_id, seq")
        return [(kind, text_len, json_len, text) for kind, text_len, json_len, text in rows]


def tool_returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def ref_in(preview: str) -> str:
    return preview.split("saved as ref=", 1)[1].split(";", 1)[0]


@pytest.mark.parametrize("chars", [OFFLOAD + 1, 3_000_000], ids=["just past the threshold", "3 MB"])
def test_an_mcp_output_is_saved_as_its_preview_and_read_back_whole(core: Core, chars: int) -> None:
    script = Script([("mcp__t__big", {"chars": chars}), "got it", "next"])
    middle = chars // 2

    async def scenario(conv: Conversation, hub: McpServers) -> Any:
        await turn(conv, "big")
        await turn(conv, "and now?")
        return conv.session_id, conv.deps.tool_output_dir

    session_id, out_dir = run_with_servers(core, {"t": stdio(trust=True)}, script, scenario)
    # What the model was sent in the turn, in the next one: the same preview.
    [in_turn] = tool_returns(script.seen[1])
    [next_turn] = tool_returns(script.seen[2])
    assert in_turn == next_turn and len(in_turn) < 3_000
    ref = ref_in(in_turn)
    whole = out_dir / f"{ref}.txt"
    assert len(whole.read_text()) == chars
    assert stat.S_IMODE(whole.stat().st_mode) == 0o600 and stat.S_IMODE(out_dir.stat().st_mode) == 0o700
    # What the transcript holds: the preview and its reference, not the output.
    [(kind, text_len, json_len, text)] = [row for row in stored_rows(core) if row[0] == "tool-return"]
    assert text_len < 3_000 and json_len < 4_000 and f"saved as ref={ref};" in text
    exported = export_json(core.store, session_id)
    assert f"saved as ref={ref};" in exported and whole.read_text()[middle : middle + 60] not in exported
    # Search finds what the preview shows.
    assert [hit.kind for hit in core.store.search.messages("000000 quick brown fox", session_id)] == ["tool-return"]

    # Resumed: the model is sent what the live session would have sent, and can page the whole output.
    resumed_sent: list[list[ModelMessage]] = []

    def resumed_step(messages: list[ModelMessage]) -> Any:
        resumed_sent.append(messages)
        if len(resumed_sent) == 1:
            return ("read_tool_output", {"ref": ref, "offset": middle, "limit": 60})
        return "read"

    info = core.store.sessions.get(session_id)
    assert info is not None
    conv = core.conversation(streaming_model(resumed_step))
    conv.load(info)
    run(conv, "and now?")
    assert tool_returns(resumed_sent[0]) == [next_turn]
    page = tool_returns(resumed_sent[1])[-1]
    assert page.startswith(whole.read_text()[middle : middle + 60])


def test_a_fork_can_still_read_the_whole_output(core: Core) -> None:
    write_big(core)

    def step(messages: list[ModelMessage]) -> Any:
        return "read it" if tool_returns(messages) else READ_BIG

    conv = core.conversation(streaming_model(step))
    run(conv, "read big.txt")
    [preview] = tool_returns(conv.state.context.messages)
    ref = ref_in(preview)
    kinds = {kind: text_len for kind, text_len, _, _ in stored_rows(core)}
    assert kinds["tool-return"] < 3_000  # the preview

    fork = conv.branches.fork()
    assert fork is not None and fork.parent_id is not None
    conv.release()
    parent_dir = core.loaded.paths.tool_outputs / fork.parent_id
    shutil.rmtree(parent_dir)  # the original purged: the fork keeps its own copy
    fork_step_calls: list[int] = []

    def fork_step(messages: list[ModelMessage]) -> Any:
        fork_step_calls.append(1)
        if len(fork_step_calls) == 1:
            return ("read_tool_output", {"ref": ref, "offset": 40_000, "limit": 40})
        return "done"

    forked = core.conversation(streaming_model(fork_step))
    forked.load(fork)
    run(forked, "page it")
    page = tool_returns(forked.state.context.messages)[-1]
    assert "row " in page and "unknown ref" not in page
    assert (forked.deps.tool_output_dir / f"{ref}.txt").exists()


def test_a_failed_turn_saves_its_outputs_bounded_too(core: Core) -> None:
    write_big(core)
    calls: list[int] = []

    def step(messages: list[ModelMessage]) -> Any:
        calls.append(1)
        if len(calls) == 1:
            return READ_BIG
        raise ModelHTTPError(503, "scripted", body="overloaded")

    conv = core.conversation(streaming_model(step))
    assert run(conv, "read it", RecordingView()).status == "failed"
    returned = [row for row in stored_rows(core) if row[0] == "tool-return"]
    assert len(returned) == 1 and returned[0][1] < 3_000 and "saved as ref=" in returned[0][3]


def test_offloading_off_keeps_outputs_whole_up_to_the_ceiling(core: Core) -> None:
    """With tool_output_offload_chars 0 the model is sent outputs whole, and the transcript keeps them whole."""
    write_big(core)

    def step(messages: list[ModelMessage]) -> Any:
        return "ok" if tool_returns(messages) else READ_BIG

    core.loaded.settings.tool_output_offload_chars = 0
    conv = core.conversation(streaming_model(step))
    run(conv, "read it")
    [(_, text_len, _, text)] = [row for row in stored_rows(core) if row[0] == "tool-return"]
    assert text_len > OFFLOAD and "saved as ref=" not in text
    assert json.loads(export_json(core.store, conv.session_id or ""))  # exports as before


def test_outputs_that_cannot_be_saved_are_kept_whole(core: Core) -> None:
    """The offload directory is broken: the turn fails with one line, and the transcript keeps the output."""
    write_big(core)
    core.loaded.paths.tool_outputs.write_text("a file where co keeps a directory")

    def step(messages: list[ModelMessage]) -> Any:
        return "ok" if tool_returns(messages) else READ_BIG

    view = RecordingView()
    outcome = run(core.conversation(streaming_model(step)), "read it", view)
    assert outcome.status == "failed" and "cannot access" in (outcome.error or "")
    [(_, text_len, _, text)] = [row for row in stored_rows(core) if row[0] == "tool-return"]
    assert text_len > OFFLOAD and "row 001000" in text
