"""Hostile inputs to the tools: pathological patterns, cancellation of busy tools, co's own files, huge
reads, bad paths, local OS errors and the offload directory's mode."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ApprovalRequired, CancellationToken
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from co_cli.config import Paths, Settings
from co_cli.context.offload import offload_large_outputs
from co_cli.deps import CoDeps
from co_cli.failure_text import describe_provider_error
from co_cli.store import Store
from co_cli.tools import build_toolset, files
from co_cli.tools.blocking import StopFlag, run_blocking
from co_cli.tools.files import MAX_LINE_CHARS, READ_OUTPUT_CHARS, grep, list_dir, read_file
from co_cli.tools.history import read_tool_output
from co_cli.tools.paths import PRIVATE_REASON
from co_cli.tools.shell import run_shell
from tests.support.deps import ctx_for, in_session, make_deps
from tests.support.messages import calls, reply, returns, user
from tests.support.processes import assert_dies


@pytest.fixture(autouse=True)
def _no_co_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CO_CLI_"):
            monkeypatch.delenv(name)


@pytest.fixture
def deps(tmp_path: Path) -> CoDeps:
    # Commands write their pids to files: pids seen outside the sandbox's pid namespace (test_tools_sandbox.py
    # covers commands inside it).
    return make_deps(tmp_path, shell_sandbox="off")


def call(tool: Callable[..., Awaitable[str]], *args: Any, **kwargs: Any) -> str:
    return asyncio.run(tool(*args, **kwargs))


def tool_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "co-tool"]


# 1. grep cannot be hung by a pattern, and a cancelled busy tool lets the turn end at once

PATHOLOGICAL = [
    (r"^(\w+\s?)*$", "one two three four five six seven eight!\n"),
    (r"(a+)+$", "a" * 40 + "b\n"),
    (r"(a|aa)+$", "a" * 60 + "b\n"),
    (r"(x+x+)+y", "x" * 5000 + "\n"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("pattern", "text"), PATHOLOGICAL)
def test_pathological_pattern_finishes_quickly(deps: CoDeps, pattern: str, text: str) -> None:
    (deps.cwd / "victim.txt").write_text(text * 50)
    started = time.monotonic()
    result = call(grep, ctx_for(deps), pattern)
    assert time.monotonic() - started < 2
    assert result == f"No matches for {pattern!r} in .."


def test_huge_repetition_is_refused_not_expanded(deps: CoDeps) -> None:
    (deps.cwd / "a.txt").write_text("a\n")
    result = call(grep, ctx_for(deps), "(?:(?:a{1000}){1000}){1000}")
    assert result.startswith("Error: invalid regular expression") and "RE2 syntax" in result


def test_unsupported_syntax_is_a_clear_error(deps: CoDeps) -> None:
    (deps.cwd / "a.txt").write_text("xy\n")
    for pattern in (r"(?<=x)y", r"(\w)\1"):
        result = call(grep, ctx_for(deps), pattern)
        assert result.startswith(f"Error: invalid regular expression {pattern!r}")
        assert "no lookaround or backreferences" in result


def test_grep_time_budget_keeps_matches_and_says_so(deps: CoDeps, monkeypatch: pytest.MonkeyPatch) -> None:
    for number in range(5):
        (deps.cwd / f"f{number}.txt").write_text("needle\n")
    clock = iter(range(0, 10_000, 10))  # each look at the clock is 10 s later
    monkeypatch.setattr(files.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(files, "GREP_TIME_BUDGET", 25.0)
    lines = call(grep, ctx_for(deps), "needle").splitlines()
    assert lines[0] == "f0.txt:1: needle"
    assert len(lines) < 6
    assert lines[-1].startswith("[stopped after 25 s") and "narrow the path or glob" in lines[-1]
    monkeypatch.setattr(files, "GREP_TIME_BUDGET", 0.0)
    result = call(grep, ctx_for(deps), "needle")
    assert result.startswith("Error: no matches for 'needle' in . before the time limit")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("pattern", "unit"),
    [
        (r"(?:\w{1,100}){10}z", b"a"),
        (r"(?:\w{1,100}){10}z", b"ab1_"),
        (r"(?:.{1,100}){10}z", b"xy"),
        (r"(?:[a-y]{1,50}){20}[0-9]", b"q"),
    ],
)
def test_a_costly_pattern_over_big_files_ends_quickly(deps: CoDeps, pattern: str, unit: bytes) -> None:
    """RE2 is linear, but with its default memory its fast engine gives up after a few searches and its slow
    one takes 14 s over a 400 KB line and 37 s over 1 MB: grep gives it enough memory."""
    for number, size in enumerate((100_000, 200_000, 400_000, 1_000_000, 1_000_000)):
        (deps.cwd / f"big{number}.txt").write_bytes(unit * (size // len(unit)))
    assert call(grep, ctx_for(deps), pattern) == f"No matches for {pattern!r} in .."


def test_the_time_budget_holds_inside_one_file(deps: CoDeps, monkeypatch: pytest.MonkeyPatch) -> None:
    (deps.cwd / "one.txt").write_bytes(b"no match on this line\n" * 40_000)  # about 900 KB
    clock = iter(range(0, 10_000, 10))  # each look at the clock is 10 s later
    monkeypatch.setattr(files.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(files, "GREP_TIME_BUDGET", 25.0)
    result = call(grep, ctx_for(deps), "needle")
    assert result.startswith("Error: no matches for 'needle' in . before the time limit")
    assert "having searched 1 files" in result


class SlowPattern:
    """A compiled pattern whose every search costs time in proportion to the text it covers (as RE2's slow
    engine does), and that never matches."""

    def __init__(self, seconds_per_mb: float) -> None:
        self.seconds_per_mb = seconds_per_mb

    def search(self, data: bytes, position: int = 0, end: int | None = None) -> None:
        span = (len(data) if end is None else end) - position
        time.sleep(span / 1_000_000 * self.seconds_per_mb)


@pytest.mark.timeout(60)
def test_a_cancelled_search_inside_one_big_file_stops(deps: CoDeps, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during one long search: the abandoned thread stops within a window, it does not keep a core busy."""
    (deps.cwd / "big.txt").write_bytes((b"a" * 99 + b"\n") * 40_000)  # 4 MB
    monkeypatch.setattr(files, "compile_pattern", lambda pattern: SlowPattern(seconds_per_mb=5.0))
    monkeypatch.setattr(files, "GREP_TIME_BUDGET", 3600.0)

    async def start_and_cancel() -> None:
        task = asyncio.ensure_future(grep(ctx_for(deps), "anything"))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(start_and_cancel())
    deadline = time.monotonic() + 3
    while tool_threads():
        assert time.monotonic() < deadline, "the search went on after it was cancelled"
        time.sleep(0.01)


def test_file_tools_are_coroutines() -> None:
    """Synchronous tools run in pydantic-ai's worker threads, which a cancelled run waits for."""
    for tool in build_toolset().tools.values():
        assert asyncio.iscoroutinefunction(tool.function), tool.name


@pytest.mark.timeout(30)
def test_cancelled_turn_does_not_wait_for_a_busy_grep(deps: CoDeps, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search of an endless tree: cancelling the run returns at once and the search stops."""
    (deps.cwd / "a.txt").write_text("needle\n")
    walked = threading.Event()

    def endless_tree(*args: Any, **kwargs: Any) -> Iterator[Path]:
        while True:
            walked.set()
            time.sleep(0.01)
            yield deps.cwd / "a.txt"

    monkeypatch.setattr(files, "_walk_files", endless_tree)
    monkeypatch.setattr(files, "GREP_TIME_BUDGET", 3600.0)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("grep", {"pattern": "nothing-here"}, tool_call_id="g1")])

    agent = Agent(FunctionModel(respond), deps_type=CoDeps, toolsets=[build_toolset()])

    async def run_and_cancel() -> float:
        token = CancellationToken()
        run = asyncio.ensure_future(agent.run("search", deps=deps, cancellation_token=token))
        await asyncio.to_thread(walked.wait, 10)
        started = time.monotonic()
        token.cancel()
        with pytest.raises(RunCancelled):
            await run
        return time.monotonic() - started

    assert asyncio.run(run_and_cancel()) < 1.0
    deadline = time.monotonic() + 2
    while tool_threads():
        assert time.monotonic() < deadline, "the search went on after the turn was cancelled"
        time.sleep(0.01)


def test_run_blocking_stops_its_work_on_cancel() -> None:
    progress: list[int] = []

    def forever(stop: StopFlag) -> str:
        while True:
            stop.check()
            progress.append(1)
            time.sleep(0.005)

    async def start_then_cancel() -> None:
        task = asyncio.ensure_future(run_blocking(forever))
        while not progress:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(start_then_cancel())
    time.sleep(0.05)
    count = len(progress)
    time.sleep(0.05)
    assert len(progress) == count


def test_run_blocking_returns_and_raises() -> None:
    assert asyncio.run(run_blocking(lambda stop: "done")) == "done"

    def fail(stop: StopFlag) -> str:
        raise ApprovalRequired(metadata={"reason": "x"})

    with pytest.raises(ApprovalRequired):
        asyncio.run(run_blocking(fail))


# 5. co's own settings and data need approval, even when the working directory holds them


@pytest.fixture
def home_deps(tmp_path: Path) -> CoDeps:
    """co run from the home directory: its config and data dirs lie inside the working directory."""
    home = tmp_path / "home"
    config_dir, data_dir = home / ".config" / "co-cli", home / ".local" / "share" / "co-cli"
    for directory in (config_dir, data_dir / "tool-outputs" / "other-session", data_dir / "tool-outputs" / "mine"):
        directory.mkdir(parents=True)
    (config_dir / "settings.json").write_text('{"api_key": "sk-secret-123"}\n')
    (data_dir / "input_history").write_text("+sk-typed-secret-456\n")
    (data_dir / "tool-outputs" / "other-session" / "call_9.txt").write_text("sk-offloaded-789\n")
    (data_dir / "tool-outputs" / "mine" / "call_1.txt").write_text("my own offloaded output\n")
    (home / "notes.txt").write_text("sk-in-notes is fine to read\n")
    settings = Settings(config_dir=config_dir, data_dir=data_dir)
    paths = Paths(
        config_dir=config_dir,
        data_dir=data_dir,
        user_settings=config_dir / "settings.json",
        project_settings=home / ".co-cli" / "settings.json",
    )
    paths.ensure_data_dir()
    return in_session(CoDeps(settings=settings, paths=paths, cwd=home, store=Store.open(paths.db)), "mine")


PRIVATE_CALLS = [
    (read_file, {"path": ".config/co-cli/settings.json"}),
    (read_file, {"path": ".local/share/co-cli/input_history"}),
    (read_file, {"path": ".local/share/co-cli/tool-outputs/other-session/call_9.txt"}),
    (list_dir, {"path": ".local/share/co-cli"}),
    (grep, {"pattern": "sk-", "path": ".config/co-cli"}),
]


@pytest.mark.parametrize(("tool", "args"), PRIVATE_CALLS)
def test_co_private_files_need_approval(home_deps: CoDeps, tool: Any, args: dict[str, Any]) -> None:
    with pytest.raises(ApprovalRequired) as raised:
        call(tool, ctx_for(home_deps), **args)
    assert raised.value.metadata is not None and raised.value.metadata["reason"] == PRIVATE_REASON
    assert "Error" not in call(tool, ctx_for(home_deps, approved=True), **args)


def test_searching_the_home_directory_skips_co_private_files(home_deps: CoDeps) -> None:
    result = call(grep, ctx_for(home_deps), "sk-")
    assert result.splitlines() == ["notes.txt:1: sk-in-notes is fine to read"]
    assert call(grep, ctx_for(home_deps), "sk-", path=".config") == "No matches for 'sk-' in .config."


def test_a_symlink_to_the_settings_needs_approval(home_deps: CoDeps) -> None:
    (home_deps.cwd / "innocent.txt").symlink_to(home_deps.paths.user_settings)
    with pytest.raises(ApprovalRequired):
        call(read_file, ctx_for(home_deps), "innocent.txt")
    assert call(grep, ctx_for(home_deps), "sk-secret") == "No matches for 'sk-secret' in .."


@pytest.mark.parametrize("own", ["settings", "history", "database"])
def test_a_hard_link_to_co_own_files_needs_approval(home_deps: CoDeps, tmp_path: Path, own: str) -> None:
    """A hard link is another name for the same file: co's settings (API key), input history or database
    reached through one elsewhere in the working directory is still co's own."""
    target = {
        "settings": home_deps.paths.user_settings,
        "history": home_deps.paths.input_history,
        "database": home_deps.paths.db,
    }[own]
    project = home_deps.cwd / "project"
    project.mkdir()
    os.link(target, project / "notes.md")
    for deps in (home_deps, in_session(replace(home_deps, cwd=project), "mine")):
        with pytest.raises(ApprovalRequired) as raised:
            call(read_file, ctx_for(deps), str(project / "notes.md"))
        assert raised.value.metadata is not None and raised.value.metadata["reason"] == PRIVATE_REASON
    assert call(grep, ctx_for(home_deps), "sk-secret", path="project") == "No matches for 'sk-secret' in project."
    assert "sk-typed" not in call(grep, ctx_for(home_deps), "sk-", path="project")
    os.link(home_deps.cwd / "notes.txt", project / "linked-notes.txt")  # a hard link to a file of the user's
    assert "sk-in-notes" in call(read_file, ctx_for(home_deps), "project/linked-notes.txt")


def test_real_data_dir_stays_private_when_not_saving(home_deps: CoDeps, tmp_path: Path) -> None:
    """--no-save points paths.data_dir at a scratch directory; the real data dir is still co's."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    paths = home_deps.paths
    home_deps.paths = Paths(paths.config_dir, scratch, paths.user_settings, paths.project_settings)
    with pytest.raises(ApprovalRequired):
        call(read_file, ctx_for(home_deps), ".local/share/co-cli/input_history")


def test_the_session_still_reads_its_own_offloaded_outputs(home_deps: CoDeps) -> None:
    assert "my own offloaded output" in read_tool_output(ctx_for(home_deps), "call_1")
    assert read_tool_output(ctx_for(home_deps), "../other-session/call_9").startswith("Error: invalid ref")


# 7. read_file is bounded in memory and in what it returns


def test_read_file_one_huge_line_uses_bounded_memory(deps: CoDeps) -> None:
    size = 30 * 1024 * 1024
    with (deps.cwd / "one-line.txt").open("wb") as handle:
        handle.write(b"y" * size)
    tracemalloc.start()
    try:
        result = call(read_file, ctx_for(deps), "one-line.txt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, f"peak {peak} bytes"
    first, footer = result.splitlines()
    assert first == f"     1\t{'y' * MAX_LINE_CHARS}... [{size - MAX_LINE_CHARS} more bytes]"
    assert footer == "[end of file: 1 lines]"


def test_read_file_huge_limit_is_capped_and_says_where_to_continue(deps: CoDeps) -> None:
    line = "z" * 99
    (deps.cwd / "many.txt").write_text((line + "\n") * 20_000)
    result = call(read_file, ctx_for(deps), "many.txt", limit=10**9)
    assert len(result) < READ_OUTPUT_CHARS + 300
    shown = result.splitlines()
    last_number = int(shown[-2].split("\t")[0])
    assert shown[-1] == (
        f"[stopped after line {last_number}: one call returns at most {READ_OUTPUT_CHARS} characters; "
        f"call read_file with offset={last_number} to continue]"
    )
    following = call(read_file, ctx_for(deps), "many.txt", offset=last_number, limit=1)
    assert following.splitlines()[0] == f"{last_number + 1:>6}\t{line}"


def test_read_file_keeps_crlf_and_utf8(deps: CoDeps) -> None:
    (deps.cwd / "dos.txt").write_bytes("caf\u00e9\r\nna\u00efve\r\n".encode())
    assert call(read_file, ctx_for(deps), "dos.txt").splitlines()[:2] == ["     1\tcaf\u00e9", "     2\tna\u00efve"]


# 10. a bad path argument is an error for the model, not the end of the turn

BAD_PATHS = ["bad\0name.txt", "x" * 5000, "~no-such-user-co-test/file.txt", "a/" + "b" * 300 + "/c"]


@pytest.mark.parametrize("bad", BAD_PATHS)
@pytest.mark.parametrize(
    "tool",
    [
        lambda ctx, path: read_file(ctx, path),
        lambda ctx, path: list_dir(ctx, path),
        lambda ctx, path: grep(ctx, "x", path),
    ],
    ids=["read_file", "list_dir", "grep"],
)
def test_bad_path_is_a_tool_error(deps: CoDeps, tool: Any, bad: str) -> None:
    result = call(tool, ctx_for(deps), bad)
    assert result.startswith("Error:"), result
    assert "\n" not in result


def test_bad_path_does_not_end_the_turn(deps: CoDeps) -> None:
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen[:] = [str(p.content) for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not seen:
            calls_ = [ToolCallPart("read_file", {"path": "a\0b"}, tool_call_id="r1")]
            calls_.append(ToolCallPart("list_dir", {"path": "~no-such-user-co-test"}, tool_call_id="r2"))
            calls_.append(ToolCallPart("grep", {"pattern": "x", "path": "y" * 5000}, tool_call_id="r3"))
            return ModelResponse(parts=calls_)
        return ModelResponse(parts=[TextPart("recovered")])

    agent = Agent(FunctionModel(respond), deps_type=CoDeps, toolsets=[build_toolset()])
    assert agent.run_sync("go", deps=deps).output == "recovered"
    assert len(seen) == 3 and all(text.startswith("Error: invalid path") or "Error:" in text for text in seen)


# 12. local OS errors say what failed


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (PermissionError(errno.EACCES, "Permission denied", "/d/tool-outputs/s1"), "cannot access /d/tool-outputs/s1"),
        (OSError(errno.ENOSPC, "No space left on device"), "cannot write: No space left on device"),
        (OSError(errno.ENOSPC, "No space left on device", "/d/co-cli.db"), "cannot write /d/co-cli.db"),
        (OSError(errno.ENAMETOOLONG, "File name too long", "/d/xxx"), "cannot access /d/xxx: File name too long"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), "cannot write the output"),
        (ExceptionGroup("g", [NotADirectoryError(errno.ENOTDIR, "Not a directory", "/d/t")]), "cannot access /d/t"),
    ],
)
def test_local_os_errors_say_what_failed(exc: BaseException, expected: str) -> None:
    message = describe_provider_error(exc)
    assert expected in message
    assert "connection" not in message and "when it is up" not in message


def test_network_os_errors_stay_connection_errors() -> None:
    assert "connection failed" in describe_provider_error(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert "connection failed" in describe_provider_error(OSError(errno.EHOSTUNREACH, "No route to host"))
    assert describe_provider_error(TimeoutError()).startswith("request timed out")


# 19a. the offload directory's parents are private too


def test_offload_parent_directory_is_created_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    directory = data / "tool-outputs" / "session-1"
    big = "x" * 5000
    history = [user("q"), calls(("run", {}, "c1")), returns(("run", big, "c1")), reply("ok"), user("next")]
    old = os.umask(0o022)
    try:
        offload_large_outputs(history, 100, directory)
    finally:
        os.umask(old)
    assert stat.S_IMODE((data / "tool-outputs").stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_matching_lines_keeps_per_line_semantics() -> None:
    def found(pattern: str, data: bytes) -> list[tuple[int, str]]:
        return list(files.matching_lines(files.compile_pattern(pattern), data, StopFlag()))

    text = b"alpha\r\nbeta\n\ngamma beta\ndelta"
    assert found("beta", text) == [(2, "beta"), (4, "gamma beta")]
    assert found("^beta$", text) == [(2, "beta")]
    assert found("a$", text) == [(1, "alpha"), (2, "beta"), (4, "gamma beta"), (5, "delta")]
    assert found("^$", text) == [(3, "")]
    assert found("x*", b"a\nb\n") == [(1, "a"), (2, "b")]
    assert found("x*", b"a\nb") == [(1, "a"), (2, "b")]
    assert found("a.b", b"a\nb\n") == []
    assert found(r"a\sb", b"a\nb\n") == []
    assert found("caf", b"caf\xc3\xa9 \xff\n") == [(1, "caf\u00e9 \ufffd")]


@pytest.mark.parametrize("window", [8, 16, 33, 64 * 1024])
def test_matching_lines_in_windows_finds_what_a_line_by_line_search_finds(
    monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """Searched in windows of whole lines, grep finds exactly the lines a search of each line on its own finds:
    anchors and word boundaries do not match at a window's end, and a longer line is searched whole."""
    import random
    import re

    monkeypatch.setattr(files, "SEARCH_WINDOW", window)
    rng = random.Random(window)
    lines = ["".join(rng.choice("ab z\t") for _ in range(rng.choice([0, 1, 3, 7, 20, 90]))) for _ in range(400)]
    data = "\n".join(lines).encode()
    for pattern in ("^a", "b$", "^$", r"\bab\b", "z z", "a{3}", "^[ab]+$", r"\tz", "zz", "^.*z.*b$", "^[^z]{20,}$"):
        expected = [(n, line) for n, line in enumerate(lines, 1) if re.search(pattern, line)]
        got = list(files.matching_lines(files.compile_pattern(pattern), data, StopFlag()))
        assert got == expected, pattern


# 6. a command cancelled while it starts is killed with its whole group


@pytest.mark.timeout(30)
def test_cancel_while_the_command_starts_kills_its_group(deps: CoDeps) -> None:
    """Cancelled while asyncio still connects the pipes (a loaded machine), the start would kill bash alone
    and wait for pipes that its background child keeps open: co would hang until the child ends."""
    pid_file = deps.cwd / "child.pid"

    async def cancel_during_start() -> float:
        loop = asyncio.get_running_loop()
        connect = loop.connect_read_pipe

        async def slow_connect(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.5)
            return await connect(*args, **kwargs)

        loop.connect_read_pipe = slow_connect  # type: ignore[method-assign]
        command = f"sleep 60 & echo $! > {pid_file}; wait"
        task = asyncio.ensure_future(run_shell(ctx_for(deps, approved=True), command))
        while not (pid_file.exists() and pid_file.read_text().strip()):
            await asyncio.sleep(0.01)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        return time.monotonic() - started

    assert asyncio.run(cancel_during_start()) < 3
    assert_dies(int(pid_file.read_text()))
