"""End to end: context governance through the real `co` against the scripted OpenAI-compatible server.

Summariser requests are told apart from chat requests by the summariser's own system instructions, so a
test can answer them (or fail them) through the server's ``responder`` hook.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.scripted_server import (
    JSON,
    Error,
    RecordedRequest,
    Reply,
    ScriptedServer,
    Text,
    ToolCalls,
    last_user_text,
    message_text,
)
from tests.support.summariser_requests import (
    SUMMARY_RE,
    chat_turns,
    is_summariser_request,
    long_prompt,
    summariser_answers,
    summariser_calls,
    summariser_reply,
    summary_messages,
)

pytestmark = pytest.mark.e2e

DIGEST_HEADING = "Digest of the earlier conversation"

SUMMARY_TEXT = "GOAL-SUMMARY: the user is walking through numbered steps of a checklist."
STATIC_MARKER_RE = re.compile(
    r"\[Earlier conversation trimmed — (\d+) messages removed to stay within context budget\]"
)
COMPACTED_RE = re.compile(r"Compacted \(summary, manual\): (\d+) messages, ~([\d,]+) -> ~([\d,]+) tokens")
LATEST_HEADING = "The user's latest request, verbatim:"


# ----- helpers ---------------------------------------------------------------------------------------


def summariser_fails(body: JSON) -> Reply | None:
    return Error(500, "summariser is down") if is_summariser_request(body) else None


def tool_texts(request: RecordedRequest) -> list[str]:
    return [message_text(m) for m in request.messages if m.get("role") == "tool"]


def size(request: RecordedRequest) -> int:
    return len(json.dumps(request.messages))


def only_session(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    result = run_co(["sessions", "list", "--json"], env, cwd)
    assert result.returncode == 0, result.stderr
    sessions = json.loads(result.stdout)
    assert len(sessions) == 1
    return dict(sessions[0])


def export_json(env: dict[str, str], cwd: Path, session_id: str) -> dict[str, Any]:
    result = run_co(["sessions", "export", session_id, "--format", "json"], env, cwd)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def exported_parts(document: dict[str, Any], part_kind: str) -> list[dict[str, Any]]:
    return [
        part
        for entry in document["messages"]
        for part in entry["message"]["parts"]
        if part.get("part_kind") == part_kind
    ]


def python_command(code: str) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


# ----- 1. automatic compaction, persisted and resumed ------------------------------------------------


def test_long_conversation_auto_compacts_persists_and_resumes(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.responder = summariser_answers(SUMMARY_TEXT)
    env = {**co_server_env, "CO_CLI_MAX_HISTORY_MESSAGES": "10"}
    prompts = [long_prompt(i) for i in range(1, 9)]
    result = run_co(["chat", "--lines"], env, workdir, input="\n".join(prompts) + "\n")
    assert result.returncode == 0, result.stderr
    assert f"echo: {prompts[-1]}" in result.stdout

    turns = chat_turns(scripted_server)
    assert [last_user_text(t.body or {}) for t in turns] == prompts
    first = next(i for i, t in enumerate(turns) if summary_messages(t))
    assert first > 0
    compacted = turns[first]
    assert size(compacted) < size(turns[first - 1])
    summary = summary_messages(compacted)[0]
    assert SUMMARY_TEXT in summary
    assert int(SUMMARY_RE.match(summary).group(1)) >= 2  # type: ignore[union-attr]
    assert compacted.messages[-1] == {"role": "user", "content": prompts[first]}
    # the first exchange is kept; what was summarised is no longer sent as messages, but the user's own words
    # are kept verbatim beside the summary
    assert {"role": "user", "content": prompts[0]} in compacted.messages
    assert {"role": "user", "content": prompts[1]} not in compacted.messages
    assert f"\n- {prompts[1]}" in summary
    assert summariser_calls(scripted_server)
    assert re.search(
        r"Compacted \(summary, auto past \d+ messages\): \d+ messages, .*/uncompact undoes it", result.stderr
    )

    info = only_session(env, workdir)
    assert info["compaction_count"] >= 1
    shown = run_co(["sessions", "show", info["id"]], env, workdir)
    assert shown.returncode == 0, shown.stderr
    count = info["compaction_count"]
    assert re.search(rf"· {count} compaction{'s' if count > 1 else ''}( ·|\n)", shown.stdout)
    document = export_json(env, workdir, info["id"])
    assert len(document["compactions"]) == info["compaction_count"]
    assert all(c["trigger"] == "auto" and SUMMARY_TEXT in c["summary"] for c in document["compactions"])
    # the transcript keeps every message, summarised or not
    assert [p["content"] for p in exported_parts(document, "user-prompt")] == prompts

    live_last = turns[-1]
    resume_env = {**env, "CO_CLI_MAX_HISTORY_MESSAGES": "0"}  # no further compaction: compare exactly
    resumed = run_co(["chat", "-c"], resume_env, workdir, input="after resume\n")
    assert resumed.returncode == 0, resumed.stderr
    assert "echo: after resume" in resumed.stdout
    first_resumed = chat_turns(scripted_server)[len(turns)]
    expected = [
        *live_last.messages,
        {"role": "assistant", "content": f"echo: {prompts[-1]}"},
        {"role": "user", "content": "after resume"},
    ]
    assert first_resumed.messages == expected
    assert summary_messages(first_resumed) == summary_messages(live_last)


# ----- 2. /compact with a focus ---------------------------------------------------------------------


def test_manual_compact_with_focus(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.responder = summariser_answers(SUMMARY_TEXT)
    first, second = long_prompt(1), long_prompt(2)
    lines = [first, second, "/compact some focus", "what now?", "/context"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr

    calls = summariser_calls(scripted_server)
    assert len(calls) == 1
    assert "Focus the summary on: some focus" in calls[0].all_text
    assert first in calls[0].all_text and second in calls[0].all_text
    match = COMPACTED_RE.search(result.stdout)
    assert match, result.stdout
    assert int(match.group(1)) == 4
    assert int(match.group(2).replace(",", "")) > int(match.group(3).replace(",", ""))

    after = chat_turns(scripted_server)[-1]
    assert after.messages[-1] == {"role": "user", "content": "what now?"}
    summary = summary_messages(after)
    assert len(summary) == 1 and SUMMARY_TEXT in summary[0]
    assert summary[0].startswith("[Summary of 4 earlier messages]")
    assert summary[0].endswith(f"{LATEST_HEADING}\n{second}")
    assert {"role": "user", "content": first} not in after.messages
    assert f"\n- {first}\n" in summary[0]  # the user's own words, verbatim beside the summary
    assert "compactions: 1" in result.stdout  # /context after it

    document = export_json(co_server_env, workdir, only_session(co_server_env, workdir)["id"])
    assert [(c["trigger"], c["focus"]) for c in document["compactions"]] == [("manual", "some focus")]


# ----- 3. a failing summariser ---------------------------------------------------------------------


def test_failing_summariser_falls_back_to_the_extractive_digest(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """The summariser is down: the middle becomes a digest that keeps every user message (never a bare
    marker, which would drop them)."""
    scripted_server.responder = summariser_fails
    env = {**co_server_env, "CO_CLI_MAX_HISTORY_MESSAGES": "10"}
    prompts = [long_prompt(i) for i in range(1, 9)]
    result = run_co(["chat", "--lines"], env, workdir, input="\n".join(prompts) + "\n")
    assert result.returncode == 0, result.stderr
    assert f"echo: {prompts[-1]}" in result.stdout
    assert summariser_calls(scripted_server)

    turns = chat_turns(scripted_server)
    first = next(i for i, t in enumerate(turns) if DIGEST_HEADING in t.all_text)
    assert first > 0
    digested = turns[first]
    assert size(digested) < size(turns[first - 1])
    digest = summary_messages(digested)[0]
    covered = int(SUMMARY_RE.match(digest).group(1))  # type: ignore[union-attr]
    assert covered >= 2
    assert all(f"step {i}:" in digest for i in range(2, 2 + covered // 2))  # every summarised user message
    assert not STATIC_MARKER_RE.search(digested.all_text)
    assert digested.messages[-1] == {"role": "user", "content": prompts[first]}
    assert "Summariser failed" in result.stderr and "extractive digest" in result.stderr


def test_failing_manual_compact_leaves_history_unchanged(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.responder = summariser_fails
    first, second = long_prompt(1), long_prompt(2)
    lines = [first, second, "/compact", "still there?"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 1, result.stderr  # the /compact line failed
    assert "compaction failed, history unchanged" in result.stderr
    assert "Compacted" not in result.stdout
    assert len(summariser_calls(scripted_server)) == 1

    before, after = chat_turns(scripted_server)[-2:]
    assert after.messages == [
        *before.messages,
        {"role": "assistant", "content": f"echo: {second}"},
        {"role": "user", "content": "still there?"},
    ]
    assert only_session(co_server_env, workdir)["compaction_count"] == 0


# ----- 4. /context ---------------------------------------------------------------------------------


def test_context_command_in_terminal(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = {**co_server_env, "CO_CLI_CONTEXT_WINDOW": "20000"}
    scripted_server.script(
        ToolCalls([("run_shell", {"command": python_command("print('z' * 3000)")})]),
        Text("printed many z"),
    )
    child = spawn_co(["chat", "--approve-all"], env=env, cwd=workdir)
    try:
        expect_prompt(child)
        send_line(child, "print a lot of z please")
        assert "printed many z" in expect_prompt(child)
        send_line(child, "/context")
        out = expect_prompt(child)
        send_line(child, "/quit")
        child.expect(pexpect.EOF, timeout=10)
    finally:
        if child.isalive():
            child.terminate(force=True)

    percent = re.search(r"[█░│]+ (\d+\.\d)%", out)
    assert percent, out
    assert 0 < float(percent.group(1)) < 80
    used = re.search(r"used\s+~([\d,]+) tokens \((reported|estimated)\)", out)
    assert used, out
    assert int(used.group(1).replace(",", "")) > 750  # the 3000-char output is in context
    assert re.search(r"window\s+20,000 tokens \(context_window setting\)", out)
    assert re.search(r"auto-compaction\s+at 80% = 16,000 tokens", out)
    assert re.search(r"messages\s+4 in context · 4 in transcript", out)
    assert re.search(r"compactions\s+0", out)
    for kind in ("instructions+tools", "user", "assistant", "tool returns", "summaries"):
        assert re.search(rf"  {re.escape(kind)}\s+~[\d,]+", out), kind
    largest = re.search(r"largest #1\s+(.+)", out)
    assert largest and largest.group(1).startswith("tool returns: run_shell"), out
    assert "largest #3" in out


def test_context_command_plain(co_server_env: dict[str, str], workdir: Path) -> None:
    lines = [long_prompt(1), "/context"]
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"Context: [\d,]+ / 128,000 tokens \(\d+\.\d%, (reported|estimated)\); window size: assumed", out)
    assert "window size: assumed (the model's is unknown; set context_window)" in out
    assert "Compaction threshold: 80% = 102,400 tokens" in out
    assert "Messages: 2 in context, 2 in transcript; compactions: 0" in out
    assert re.search(
        r"Breakdown \(estimated\): instructions\+tools [\d,]+, instructions files 0, tasks 0, memory 0, user [\d,]+, "
        r"assistant [\d,]+, tool returns 0, summaries 0",
        out,
    )
    assert re.search(r"Largest: assistant echo: step 1: keep detail .* \(\d+\); user step 1: keep detail", out)


# ----- 5. trimmed and offloaded tool outputs ---------------------------------------------------------


def offloaded_ref(text: str) -> str | None:
    match = re.search(r"saved as ref=([^\s;\]]+);", text)
    return match.group(1) if match else None


def test_tool_outputs_trimmed_later_and_offloaded_with_ref(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = {
        **co_server_env,
        "CO_CLI_TOOL_OUTPUT_TRIM_CHARS": "300",
        "CO_CLI_TOOL_OUTPUT_OFFLOAD_CHARS": "5000",
        "CO_CLI_SHELL_OUTPUT_LIMIT": "100000",
    }
    medium = python_command("print('y' * 1200)")
    big = python_command("print('\\n'.join('line %05d' % i for i in range(5000)))")

    reads: list[str] = []

    def read_offloaded(body: JSON) -> Reply | None:
        """Once a preview arrives, ask for the saved output back (once: a second preview is a failure)."""
        last = body.get("messages", [])[-1]
        ref = offloaded_ref(message_text(last)) if last.get("role") == "tool" and not reads else None
        if ref is None:
            return None
        reads.append(ref)
        return ToolCalls([("read_tool_output", {"ref": ref, "offset": 0, "limit": 40000})])

    scripted_server.responder = read_offloaded
    scripted_server.script(
        ToolCalls([("run_shell", {"command": medium})]),
        Text("made the medium output"),
        ToolCalls([("run_shell", {"command": big})]),
        Text("read the big output"),
    )
    prompts = ["make a medium output", "make a big output", "anything else?"]
    result = run_co(["chat", "--lines", "--approve-all"], env, workdir, input="\n".join(prompts) + "\n")
    assert result.returncode == 0, result.stderr
    assert "read the big output" in result.stdout and "echo: anything else?" in result.stdout

    turns = chat_turns(scripted_server)
    assert len(turns) == 6
    # its own turn: whole
    (medium_whole,) = tool_texts(turns[1])
    assert "y" * 1200 in medium_whole and "truncated" not in medium_whole
    # a later turn: trimmed, with the original length
    medium_later = tool_texts(turns[2])[0]
    assert medium_later.endswith(f"[…truncated, {len(medium_whole)} chars total]")
    assert len(medium_later) < 400

    # offloaded even in its own turn: a preview with a ref
    big_preview = tool_texts(turns[3])[1]
    ref = offloaded_ref(big_preview)
    assert ref, big_preview
    assert len(big_preview) < 5000
    assert "line 00000" in big_preview and "line 04999" in big_preview and "line 02500" not in big_preview
    # the model's read_tool_output(ref) call gets the content back
    read_back = tool_texts(turns[4])[-1]
    assert "line 02500" in read_back
    assert re.search(rf"\[ref={re.escape(ref)}: chars 0-40000 of \d+; next offset=40000\]", read_back)
    # later turns: the preview is trimmed too, but its ref survives
    later = turns[5].all_text
    assert f"ref={ref}" in later and "line 02500" not in later

    # the transcript (and so the export) holds what the model was sent: the preview and its ref; the whole
    # output is the session's private file
    session_id = only_session(env, workdir)["id"]
    document = export_json(env, workdir, session_id)
    returns = [p["content"] for p in exported_parts(document, "tool-return") if p["tool_name"] == "run_shell"]
    assert len(returns) == 2
    assert "y" * 1200 in returns[0]
    assert returns[1] == big_preview and "line 02500" not in returns[1]
    saved = Path(env["CO_CLI_DATA_DIR"]) / "tool-outputs" / session_id / f"{ref}.txt"
    assert "line 02500" in saved.read_text() and "line 04999" in saved.read_text() and saved.stat().st_size > 50000


# ----- 6. the provider says the context is too long -------------------------------------------------


def test_context_length_exceeded_compacts_and_retries_once(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    prompts = [long_prompt(i) for i in range(1, 7)]
    failed: list[bool] = []

    def respond(body: JSON) -> Reply | None:
        if is_summariser_request(body):
            return summariser_reply(body, SUMMARY_TEXT)
        if last_user_text(body) == prompts[-1] and not failed:
            failed.append(True)
            return Error(
                400,
                "This model's maximum context length is 4096 tokens.",
                type="invalid_request_error",
                code="context_length_exceeded",
            )
        return None

    scripted_server.responder = respond
    env = {**co_server_env, "CO_CLI_MAX_HISTORY_MESSAGES": "12"}
    result = run_co(["chat", "--lines"], env, workdir, input="\n".join(prompts) + "\n")
    assert result.returncode == 0, result.stderr
    assert f"echo: {prompts[-1]}" in result.stdout
    assert "context is too long" in result.stderr and "retrying once" in result.stderr

    turns = chat_turns(scripted_server)
    assert len(turns) == 7  # five turns, the rejected request and its one retry
    rejected, retry = turns[-2:]
    assert not summary_messages(rejected)
    assert len(summariser_calls(scripted_server)) == 1
    assert size(retry) < size(rejected)
    assert SUMMARY_TEXT in summary_messages(retry)[0]
    assert retry.messages[-1] == {"role": "user", "content": prompts[-1]}

    info = only_session(env, workdir)
    assert info["compaction_count"] == 1
    document = export_json(env, workdir, info["id"])
    assert [p["content"] for p in exported_parts(document, "user-prompt")] == prompts
    assert [e["status"] for e in document["messages"]].count("failed") == 0
