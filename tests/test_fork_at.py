"""Fork from any message and rewind: the fork's working context is what the live session had at that point."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from co_cli.config import load_settings
from co_cli.errors import CoError
from co_cli.message_view import user_text
from co_cli.session.rebuild import check_fork_point, rebuild_context, rewind_point
from co_cli.store import Store
from tests.support.turn_core import Core, core, dumped, long_echo, run, streaming_model, summarizer

__all__ = ["core"]  # the fixture, imported for pytest

pytestmark = pytest.mark.allow_model_requests


def test_a_fork_at_each_turn_end_has_exactly_what_the_live_session_had(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CO_CLI_MAX_HISTORY_MESSAGES", "6")
    monkeypatch.setenv("CO_CLI_COMPACT_MIN_SPAN_TOKENS", "0")
    core.loaded = load_settings(cwd=core.cwd)
    conv = core.conversation(streaming_model(long_echo), summarizer=summarizer())
    snapshots: list[tuple[int, object]] = []
    for i in range(8):
        assert run(conv, f"message {i} " + "with padding words " * 10).status == "ok"
        last = conv.context.seqs[-1]
        assert last is not None
        snapshots.append((last, dumped(conv.working)))
    assert conv.session is not None
    sid = conv.session.id
    records = core.store.compactions.list(sid)
    assert len(records) >= 2
    points = [seq for seq, _ in snapshots]
    # Points inside what a later compaction covered (it must not apply there), and right after one's range.
    assert any(p < r.upto_seq for r in records for p in points)
    assert any(r.upto_seq in points for r in records)
    conv.release()
    for seq, live in snapshots:
        assert dumped(rebuild_context(core.store, sid, seq).context.messages) == live, f"at #{seq}"
        fork = core.store.fork(sid, seq)
        assert fork.parent_id == sid and fork.fork_seq == seq
        resumed = core.conversation(streaming_model(long_echo), summarizer=summarizer())
        resumed.load(fork)
        assert dumped(resumed.working) == live, f"fork at #{seq}"
        resumed.release()
    # The original is untouched by all this.
    assert len(core.store.compactions.list(sid)) == len(records)
    assert core.store.sessions.get(sid).message_count == points[-1] + 1


def tool_session(store: Store) -> str:
    """#0 prompt, #1 answer, #2 prompt, #3 tool call, #4 tool result, #5 answer, #6 failed prompt."""
    sid = store.sessions.create(model="test", cwd="/w", title="tools").id
    seq = store.messages.begin_turn(sid, "hi")
    store.messages.finish_turn(
        sid, seq, [ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("hey")])]
    )
    seq = store.messages.begin_turn(sid, "read it")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("read it")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "a"}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", "contents", "c1")]),
        ModelResponse(parts=[TextPart("it says contents")]),
    ]
    store.messages.finish_turn(sid, seq, messages)
    seq = store.messages.begin_turn(sid, "this one fails")
    store.messages.finish_turn(sid, seq, [], status="failed")
    return sid


def test_a_fork_inside_a_tool_call_or_a_failed_turn_is_refused_with_the_safe_points(core: Core) -> None:
    sid = tool_session(core.store)
    transcript = core.store.messages.transcript(sid)
    for seq in (1, 5, -1):
        check_fork_point(transcript, seq)
    with pytest.raises(CoError, match=r"#3 is a tool call whose result follows it.*#1 \(before that turn\) or #5"):
        check_fork_point(transcript, 3)
    with pytest.raises(CoError, match=r"#4 is a tool's result, before the answer that uses it"):
        check_fork_point(transcript, 4)
    with pytest.raises(CoError, match=r"#2 is a prompt whose answer follows it.*#1.*#5"):
        check_fork_point(transcript, 2)  # a plain prompt was blamed on "a tool call or its result"
    with pytest.raises(CoError, match=r"#6 is in a failed turn; a fork continues after an answer: fork at #5"):
        check_fork_point(transcript, 6)
    with pytest.raises(CoError, match="no message #7"):
        check_fork_point(transcript, 7)
    with pytest.raises(CoError, match="#0 is a prompt.*-1 \\(an empty conversation\\) or #1"):
        check_fork_point(transcript, 0)


def test_conversation_fork_at_refuses_a_mid_tool_point_and_creates_nothing(core: Core) -> None:
    sid = tool_session(core.store)
    conv = core.conversation(streaming_model(long_echo))
    conv.load(core.store.sessions.get(sid))
    with pytest.raises(CoError):
        conv.branches.fork(3)
    assert conv.session_id == sid and core.store.sessions.count() == 1
    forked = conv.branches.fork(1)
    assert forked is not None and conv.session_id == forked.id
    assert [user_text(m) for m in conv.working if isinstance(m, ModelRequest)] == ["hi"]


def test_rewind_defaults_to_before_the_last_answered_prompt(core: Core) -> None:
    sid = tool_session(core.store)
    transcript = core.store.messages.transcript(sid)
    assert rewind_point(transcript) == 1  # the last prompt that was not a failed one is #2
    assert rewind_point(transcript, 5) == 5
    with pytest.raises(CoError):
        rewind_point(transcript, 4)
    with pytest.raises(CoError, match="nothing to rewind"):
        rewind_point([])


def test_rewind_continues_in_a_fork_and_the_original_stays(core: Core) -> None:
    seen: list[list[str]] = []

    def remember(messages: list[ModelMessage]) -> str:
        seen.append([t for m in messages if (t := user_text(m)) is not None])
        return f"answer {len(seen)}"

    conv = core.conversation(streaming_model(remember))
    for prompt in ("one", "two", "three"):
        assert run(conv, prompt).status == "ok"
    assert conv.session is not None
    original = conv.session.id
    before = [(m.seq, m.text) for m in core.store.messages.transcript(original)]
    forked = conv.branches.rewind()
    assert forked is not None and forked.parent_id == original and forked.fork_seq == 3
    assert run(conv, "three again").status == "ok"
    assert seen[-1] == ["one", "two", "three again"]
    assert [(m.seq, m.text) for m in core.store.messages.transcript(original)] == before
    assert [m.text for m in core.store.messages.transcript(forked.id)][-2:] == ["three again", "answer 4"]
