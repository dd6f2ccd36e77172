"""End to end: the real `co chat` in a pseudo-terminal against the scripted OpenAI-compatible server."""

from __future__ import annotations

import time
from pathlib import Path

import pexpect
import pytest

from tests.support.co_process import ctrl_c, ctrl_d, expect_prompt, run_co, send_line, transcript
from tests.support.repl import repl
from tests.support.scripted_server import Error, ScriptedServer, Text, ToolCalls

__all__ = ["repl"]

pytestmark = pytest.mark.e2e


def tool_results(request: object) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]  # type: ignore[attr-defined]


def test_streamed_answer_and_ctrl_d(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("Hello from **the server**, streamed.", chunk_size=4, delay=0.01))
    send_line(repl, "hi there")
    out = expect_prompt(repl)
    assert "Hello from the server, streamed." in out
    request = scripted_server.chat_requests[-1]
    assert request.stream
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.messages[-1] == {"role": "user", "content": "hi there"}
    ctrl_d(repl)
    repl.expect(pexpect.EOF, timeout=10)


def test_tool_call_approved_and_result_used(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    scripted_server.script(ToolCalls([("run_shell", {"command": "echo approved-output"})]), Text("It printed it."))
    send_line(repl, "run the command")
    repl.expect("Approve run_shell: echo approved-output", timeout=20)
    repl.expect("yes, once", timeout=5)
    repl.send("y")  # one key, no Enter
    out = expect_prompt(repl)
    assert "It printed it." in out
    results = tool_results(scripted_server.chat_requests[-1])
    assert any("approved-output" in r and "exit code: 0" in r for r in results)


def test_tool_call_denied_reaches_model(repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path) -> None:
    target = workdir / "must-not-exist"
    scripted_server.script(ToolCalls([("run_shell", {"command": f"touch {target}"})]), Text("Understood, skipped."))
    send_line(repl, "make a file")
    repl.expect("yes, once", timeout=20)
    repl.send("n")
    out = expect_prompt(repl)
    assert "Understood, skipped." in out
    assert not target.exists()
    results = tool_results(scripted_server.chat_requests[-1])
    assert any("denied" in r.lower() for r in results)


def test_always_allows_only_the_exact_command(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    scripted_server.script(
        ToolCalls([("run_shell", {"command": "echo one"})]),
        Text("first done"),
        ToolCalls([("run_shell", {"command": "echo one"})]),
        Text("second done"),
        ToolCalls([("run_shell", {"command": "echo two"})]),
    )
    send_line(repl, "first")
    repl.expect("allow this exact command", timeout=20)
    repl.send("a")
    assert "first done" in expect_prompt(repl)
    send_line(repl, "second")
    out = expect_prompt(repl)
    assert "second done" in out and "Approve" not in out.split("second", 1)[1]
    send_line(repl, "third")
    repl.expect("Approve run_shell: echo two", timeout=20)
    repl.expect("yes, once", timeout=5)
    repl.send("\x1b")  # Esc denies
    assert "denied" in expect_prompt(repl)


def test_ctrl_c_mid_stream_then_normal_turn(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("partial words " * 200, chunk_size=6, delay=0.02), Text("second answer ok"))
    send_line(repl, "tell me a long story")
    repl.expect("partial words", timeout=20)
    time.sleep(0.3)
    ctrl_c(repl)
    out = expect_prompt(repl, timeout=20)
    assert "[interrupted]" in out
    send_line(repl, "and now?")
    out = expect_prompt(repl)
    assert "second answer ok" in out
    sent = scripted_server.chat_requests[-1].messages
    assistant = [m for m in sent if m.get("role") == "assistant"]
    assert assistant and "interrupted" in str(assistant[-1].get("content"))
    assert sent[-1] == {"role": "user", "content": "and now?"}


def test_provider_500_then_normal_turn_and_retry(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    scripted_server.script(Error(500, "upstream exploded"), Text("retried fine"))
    send_line(repl, "this will fail")
    out = expect_prompt(repl)
    assert "upstream exploded" in out and "/retry" in out
    assert "Traceback" not in out
    send_line(repl, "/retry")
    out = expect_prompt(repl)
    assert "retried fine" in out
    sent = scripted_server.chat_requests[-1].messages
    users = [m for m in sent if m.get("role") == "user"]
    assert users == [{"role": "user", "content": "this will fail"}]


def test_help_and_unknown_command(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    send_line(repl, "/help")
    out = expect_prompt(repl)
    for name in ("/compact", "/context", "/sessions", "/resume", "/fork", "/model", "/quit"):
        assert name in out
    send_line(repl, "/frobnicate now")
    out = expect_prompt(repl)
    assert "unknown command /frobnicate" in out
    assert scripted_server.chat_requests == []
    send_line(repl, "/model")
    out = expect_prompt(repl)
    assert "scripted" in out and "OpenAI-compatible server" in out
    send_line(repl, "/quit")
    repl.expect(pexpect.EOF, timeout=10)


def test_ctrl_c_at_prompt_clears_line(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    repl.send("half typed")
    ctrl_c(repl)
    expect_prompt(repl)
    send_line(repl, "fresh")
    expect_prompt(repl)
    assert scripted_server.chat_requests[-1].messages[-1] == {"role": "user", "content": "fresh"}
    assert "half typed" not in str(scripted_server.chat_requests[-1].messages)
    assert "fresh" in transcript(repl)


def test_print_mode(co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer) -> None:
    scripted_server.script(Text("one-shot answer"))
    result = run_co(["chat", "-p", "question?"], co_server_env, workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "one-shot answer"
    scripted_server.script(Error(401, "bad key", type="authentication_error"))
    result = run_co(["chat", "-p", "again"], co_server_env, workdir)
    assert result.returncode != 0
    assert "authentication failed" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_print_mode_denies_tools_without_approve_all(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(ToolCalls([("run_shell", {"command": "echo nope"})]), Text("could not run it"))
    result = run_co(["chat", "-p", "run echo"], co_server_env, workdir)
    assert result.returncode == 0, result.stderr
    assert "could not run it" in result.stdout
    assert any("--approve-all" in r for r in tool_results(scripted_server.chat_requests[-1]))
    scripted_server.script(ToolCalls([("run_shell", {"command": "echo yes-ran"})]), Text("ran it"))
    result = run_co(["chat", "-p", "run echo", "--approve-all"], co_server_env, workdir)
    assert result.returncode == 0
    assert any("yes-ran" in r for r in tool_results(scripted_server.chat_requests[-1]))


def test_piped_stdin(co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer) -> None:
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="first line\n/help\n/nope\nsecond line\n")
    assert result.returncode == 1, result.stderr  # every line ran, but a command failed: scripts can tell
    assert "echo: first line" in result.stdout and "echo: second line" in result.stdout
    assert "/compact" in result.stdout
    assert "unknown command /nope" in result.stderr
    assert len(scripted_server.chat_requests) == 2
    second = scripted_server.chat_requests[-1]
    clean = run_co(["chat", "--lines"], co_server_env, workdir, input="one\n/help\n")
    assert clean.returncode == 0, clean.stderr
    assert len(scripted_server.chat_requests) == 3
    # the second turn carries the first as history
    assert {"role": "user", "content": "first line"} in second.messages


def test_unreachable_server_is_one_line(co_env: dict[str, str], workdir: Path) -> None:
    env = {**co_env, "CO_CLI_BASE_URL": "http://127.0.0.1:9/v1", "CO_CLI_MODEL": "m", "CO_CLI_REQUEST_TIMEOUT": "5"}
    result = run_co(["chat", "-p", "hello"], env, workdir, timeout=60)
    assert result.returncode == 1
    assert "cannot reach the server" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_model_is_one_line(co_env: dict[str, str], workdir: Path) -> None:
    result = run_co(["chat", "-m", "nonsense", "-p", "hi"], co_env, workdir)
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown model 'nonsense'")
    assert result.stderr.count("\n") == 1


def test_multiline_input_paste_and_up_arrow_after_failure(repl: pexpect.spawn, scripted_server: ScriptedServer) -> None:
    send_line(repl, "first line\x1b\rsecond line")  # Esc-Enter inserts a newline; Enter sends
    expect_prompt(repl)
    assert scripted_server.chat_requests[-1].messages[-1]["content"] == "first line\nsecond line"
    repl.send("\x1b[200~pasted one\npasted two\x1b[201~\r")  # a bracketed paste is one input
    expect_prompt(repl)
    assert scripted_server.chat_requests[-1].messages[-1]["content"] == "pasted one\npasted two"
    scripted_server.script(Error(503, "try later"))
    send_line(repl, "keep this prompt")
    assert "try later" in expect_prompt(repl)
    repl.send("\x1b[A")  # Up brings the failed prompt back
    send_line(repl, "")
    expect_prompt(repl)
    assert scripted_server.chat_requests[-1].messages[-1] == {"role": "user", "content": "keep this prompt"}


def test_ctrl_c_at_approval_question_cancels_the_turn(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    target = workdir / "never"
    scripted_server.script(ToolCalls([("run_shell", {"command": f"touch {target}"})]))
    send_line(repl, "do it")
    repl.expect("yes, once", timeout=20)
    ctrl_c(repl)
    out = expect_prompt(repl, timeout=20)
    assert "[interrupted]" in out
    assert not target.exists()
    send_line(repl, "next")
    out = expect_prompt(repl)
    assert "echo: next" in out
    sent = scripted_server.chat_requests[-1].messages
    calls = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in sent if m.get("role") == "tool"]
    assert sorted(calls) == sorted(results)


def test_failure_after_a_tool_ran_keeps_it_in_the_transcript(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(ToolCalls([("run_shell", {"command": "echo ran >> side-effect.txt"})]), Error(500, "late"))
    result = run_co(["chat", "--approve-all", "-p", "do the thing"], co_server_env, workdir)
    assert result.returncode == 1 and "late" in result.stderr
    assert (workdir / "side-effect.txt").read_text() == "ran\n"
    listed = run_co(["sessions", "list", "--json"], co_server_env, workdir)
    session_id = __import__("json").loads(listed.stdout)[0]["id"]
    shown = run_co(["sessions", "show", session_id], co_server_env, workdir)
    assert "echo ran >> side-effect.txt" in shown.stdout
    # /retry-style resend: the failed turn is not in the working context, so roles still alternate
    scripted_server.script(Text("fine now"))
    result = run_co(["chat", "--resume", session_id, "-p", "again"], co_server_env, workdir)
    assert result.returncode == 0 and "fine now" in result.stdout
    sent = scripted_server.chat_requests[-1].messages
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user"]


def test_a_stream_cut_short_is_kept_marked_and_fails_print_mode(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """A server that closes the stream with no finish reason and no [DONE] left a partial answer saved as ok."""
    scripted_server.script(Text("The first half of an answer", cut_off=True), Text("whole answer"))
    result = run_co(["chat", "-p", "explain"], co_server_env, workdir)
    assert result.returncode == 1, result.stderr
    assert "The first half of an answer" in result.stdout
    assert "cut off" in result.stderr or "connection closed" in result.stderr
    resumed = run_co(["chat", "-c", "-p", "go on"], co_server_env, workdir)
    assert resumed.returncode == 0, resumed.stderr
    sent = scripted_server.chat_requests[-1].messages
    assistant = [m for m in sent if m.get("role") == "assistant"]
    assert "The first half of an answer" in str(assistant[-1]["content"]) and "cut off" in str(assistant[-1]["content"])


def test_an_answer_stopped_by_the_output_limit_is_kept_and_marked(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    """finish_reason "length": the answer stopped at the model's output limit; it was saved as complete, unsaid.
    It is the model's answer within the limit the user set, so -p still succeeds, and says so."""
    scripted_server.script(Text("The list goes: one, two, thr", finish_reason="length"), Text("whole answer"))
    result = run_co(["chat", "-p", "list them all"], co_server_env, workdir)
    assert result.returncode == 0, result.stderr
    assert "The list goes: one, two, thr" in result.stdout
    assert "output limit" in result.stderr
    resumed = run_co(["chat", "-c", "-p", "go on"], co_server_env, workdir)
    assert resumed.returncode == 0, resumed.stderr
    assistant = [m for m in scripted_server.chat_requests[-1].messages if m.get("role") == "assistant"]
    assert "one, two, thr" in str(assistant[-1]["content"]) and "output limit" in str(assistant[-1]["content"])


def test_keys_typed_before_the_approval_question_do_not_answer_it(
    repl: pexpect.spawn, scripted_server: ScriptedServer, workdir: Path
) -> None:
    """`y⏎` typed while the model still streams must not approve a command the user has not seen."""
    target = workdir / "approved-too-early"
    slow = ToolCalls([("run_shell", {"command": f"touch {target}"})], text="Let me check. " * 40, delay=0.02)
    scripted_server.script(slow, Text("Done."))
    send_line(repl, "do it")
    repl.expect("Let me check", timeout=20)
    send_line(repl, "y")  # typed ahead, before the question exists
    repl.expect("yes, once", timeout=20)
    time.sleep(0.5)
    assert not target.exists()
    repl.send("n")
    expect_prompt(repl)
    assert not target.exists()
    results = tool_results(scripted_server.chat_requests[-1])
    assert any("denied" in r for r in results)


def test_crlf_input_lines_lose_their_carriage_return(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="first line\r\nsecond line\r\n")
    assert result.returncode == 0, result.stderr
    sent = [r.messages[-1] for r in scripted_server.chat_requests]
    assert sent == [{"role": "user", "content": "first line"}, {"role": "user", "content": "second line"}]


def test_an_answer_is_saved_even_when_stdout_is_closed(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    import subprocess

    from tests.support.co_process import CO_COMMAND, co_environment

    scripted_server.script(Text("a long answer " * 200, chunk_size=10, delay=0.005))
    child = subprocess.Popen(
        [*CO_COMMAND, "chat", "-p", "tell me"],
        env=co_environment(co_server_env),
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    child.stdout.read(20)
    child.stdout.close()  # the reader goes away mid-answer (like `co chat -p ... | head -c 20`)
    child.wait(timeout=60)
    listed = run_co(["sessions", "list", "--json"], co_server_env, workdir)
    assert '"message_count": 2' in listed.stdout, listed.stdout
    session_id = listed.stdout.split('"id": "')[1].split('"')[0]
    shown = run_co(["sessions", "export", session_id, "--format", "md"], co_server_env, workdir)
    assert shown.stdout.count("a long answer") == 200
