"""End to end: text piped to co. With -p it is part of the prompt (one request); without -p the whole pipe is one
prompt; --lines keeps one input a line; past the limit, or not text, it is refused in one line."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support.co_process import CO_COMMAND, co_environment, run_co
from tests.support.scripted_server import Error, ScriptedServer


def user_contents(server: ScriptedServer) -> list[str]:
    """The last user message of each chat request (what the turn sent)."""
    return [str(request.messages[-1]["content"]) for request in server.chat_requests]


def test_print_sends_the_prompt_and_the_piped_text_in_one_request(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = run_co(["chat", "-p", "summarize this"], co_server_env, workdir, input="line one\nline two\n")
    assert result.returncode == 0, result.stderr
    assert len(scripted_server.chat_requests) == 1
    assert user_contents(scripted_server) == [
        "summarize this\n\nPiped input (2 lines, 18 bytes):\n```\nline one\nline two\n```"
    ]
    assert result.stdout.startswith("echo: summarize this")


def test_the_fence_outlasts_the_backticks_in_the_piped_text(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    piped = "# README\n\n````python\nprint('hi')\n````\n"
    result = run_co(["-p", "review"], co_server_env, workdir, input=piped)
    assert result.returncode == 0, result.stderr
    [sent] = user_contents(scripted_server)
    assert sent == f"review\n\nPiped input (5 lines, {len(piped)} bytes):\n`````\n{piped.rstrip()}\n`````"


def test_a_pipe_without_print_is_one_prompt(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = run_co(["chat"], co_server_env, workdir, input="please review:\r\n/etc/hosts is odd\r\nthanks\r\n")
    assert result.returncode == 0, result.stderr
    assert user_contents(scripted_server) == ["please review:\n/etc/hosts is odd\nthanks"]


def test_lines_keeps_one_turn_a_line(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = run_co(["chat", "--lines"], co_server_env, workdir, input="first\nsecond\n")
    assert result.returncode == 0, result.stderr
    assert user_contents(scripted_server) == ["first", "second"]


def test_a_piped_slash_command_alone_runs_as_a_command(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = run_co(["chat"], co_server_env, workdir, input="/help\n")
    assert result.returncode == 0, result.stderr
    assert "/compact" in result.stdout and scripted_server.chat_requests == []


def test_piped_input_past_the_limit_is_refused_in_one_line(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    env = {**co_server_env, "CO_CLI_CONTEXT_WINDOW": "1000"}  # the limit: 500 tokens at 4 bytes, 2,000 bytes
    for args in (["chat", "-p", "summarize this"], ["chat"]):
        result = run_co(args, env, workdir, input="x" * 2001)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            "error: piped input is over 2,000 bytes, the limit for scripted (half its 1,000-token context window, "
            "at ~4 bytes a token): pipe less of it (e.g. through `head -c 2000`)"
        ]
    assert scripted_server.chat_requests == []
    exactly = run_co(["chat", "-p", "count"], env, workdir, input="x" * 2000)
    assert exactly.returncode == 0, exactly.stderr


def test_piped_bytes_that_are_not_text_are_refused_in_one_line(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    result = subprocess.run(
        [*CO_COMMAND, "chat", "-p", "what is this?"],
        env=co_environment(co_server_env),
        cwd=workdir,
        input=b"ok\xff\xfe",
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == ["error: piped input is not UTF-8 text (byte 2 is not): pipe text"]
    assert scripted_server.chat_requests == []


def test_print_with_a_pipe_nobody_writes_to_sends_the_prompt_alone_and_says_so(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    child = subprocess.Popen(
        [*CO_COMMAND, "chat", "-p", "hello"],
        env=co_environment(co_server_env),
        cwd=workdir,
        stdin=subprocess.PIPE,  # held open, never written
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        start = time.monotonic()
        child.wait(timeout=30)
        assert time.monotonic() - start >= 3
        out, err = child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert out.startswith("echo: hello")
    assert "Nothing came through the pipe on stdin within 3 s: the prompt is sent alone" in err
    assert user_contents(scripted_server) == ["hello"]


def test_lines_cannot_go_with_print(co_server_env: dict[str, str], workdir: Path) -> None:
    result = run_co(["chat", "--lines", "-p", "hi"], co_server_env, workdir, input="x\n")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --lines cannot be combined with -p: with -p, piped text is part of the prompt"
    ]


def test_a_failure_without_a_prompt_names_what_works_there(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(Error(500, "the upstream broke"), Error(500, "the upstream broke"))
    for args in (["chat", "-p", "hello"], ["chat"]):
        result = run_co(args, co_server_env, workdir, input="piped text\n")
        assert result.returncode == 1
        assert result.stderr.splitlines()[-1] == (
            "error: scripted: provider error (HTTP 500: the upstream broke); run it again ('co chat -c' continues "
            "this session)"
        )
    scripted_server.script(Error(500, "the upstream broke"))
    lines = run_co(["chat", "--lines"], co_server_env, workdir, input="hello\n")  # /retry can follow here
    assert lines.stderr.splitlines()[-1].endswith("; /retry to send it again")


def test_a_failure_at_the_prompt_still_says_retry() -> None:
    from co_cli.failure_text import retold

    line = "scripted: request timed out; /retry to send it again"
    assert retold(line, "repl") == line
    assert retold(line, "print") == "scripted: request timed out; run it again (`co chat -c` continues this session)"
    assert retold(line, "api") == "scripted: request timed out; send the request again"
