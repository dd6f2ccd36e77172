"""End to end, on a 70-column terminal emulator (pyte): the approval keys, `/sessions` and `co config show`
cut nothing a user needs mid-word; piped, `co config show` prints whole lines."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect
import pytest

from co_cli.store import Store
from tests.support.co_process import expect_prompt, run_co, send_line, spawn_co
from tests.support.saved_sessions import db_path, seed_session, turn
from tests.support.screen import screen_lines
from tests.support.scripted_server import ScriptedServer, Text, ToolCalls

pytestmark = pytest.mark.e2e

WIDTH = 70
LONG_TITLE = "planning the vegetable garden for the coming spring with raised beds and drip irrigation"


def words_whole(screen: list[str], text: str) -> bool:
    """Every word of ``text`` appears whole, and in order, on the screen's lines."""
    shown = " ".join(" ".join(screen).split())
    return " ".join(text.split()) in shown


@pytest.mark.timeout(60)
def test_the_approval_keys_wrap_between_words_at_70_columns(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(ToolCalls([("run_shell", {"command": "echo hi"})]), Text("Done."))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir, dimensions=(30, WIDTH))
    try:
        expect_prompt(child)
        send_line(child, "run it")
        child.expect("the session", timeout=20)
        child.expect(pexpect.TIMEOUT, timeout=0.5)  # let the question's draw finish
        screen = screen_lines(child)
        assert "  y yes, once · n no (Esc)" in screen, screen
        assert "  a yes, and allow this exact command for the rest of the session" in screen, screen
        child.send("n")
        expect_prompt(child, timeout=20)
    finally:
        child.terminate(force=True)


@pytest.mark.timeout(60)
def test_sessions_at_70_columns_shows_short_ids_and_wraps_titles_under_their_column(
    co_server_env: dict[str, str], workdir: Path
) -> None:
    db = db_path(co_server_env)
    garden = seed_session(db, turn("plan the garden", "Plant beans."))
    with Store.open(db) as store:
        store.sessions.rename(garden, LONG_TITLE)
        short = store.sessions.short_id(garden)
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir, dimensions=(30, WIDTH))
    try:
        expect_prompt(child)
        send_line(child, "/sessions")
        expect_prompt(child)
        send_line(child, "/sessions garden")
        expect_prompt(child)
        screen = screen_lines(child)
        assert all(len(line) <= WIDTH for line in screen)
        header = next(i for i, line in enumerate(screen) if line.startswith("ID "))
        column = screen[header].index("Title")
        row = screen[header + 1]
        assert row.startswith(short + " ") and garden not in row, row
        title_lines = [row[column:]]
        for line in screen[header + 2 :]:
            if not line.startswith(" " * column):
                break
            title_lines.append(line[column:])
        assert " ".join(title_lines) == LONG_TITLE, screen[header:]
        hit = next(line for line in screen if line.startswith(short + "  #"))
        assert words_whole(screen[screen.index(hit) :], LONG_TITLE)
    finally:
        child.terminate(force=True)


@pytest.mark.timeout(60)
def test_config_show_prints_whole_lines_when_piped_and_names_whole_at_70_columns(
    co_env: dict[str, str], workdir: Path
) -> None:
    url = "http://models.internal.example.com:8080/openai/compatible/v1"
    env = {**co_env, "CO_CLI_BASE_URL": url}
    piped = run_co(["config", "show"], env=env, cwd=workdir)
    assert piped.returncode == 0, piped.stderr
    assert re.search(r"│ base_url\s+│ " + re.escape(url) + r"\s+│ environment\s+│ CO_CLI_BASE_URL\s+│", piped.stdout)
    assert "instructions_files_max_tokens" in piped.stdout and "…" not in piped.stdout

    child = spawn_co(["config", "show"], env=env, cwd=workdir, dimensions=(200, WIDTH))
    child.expect("mcp_schema_budget_tokens", timeout=20)
    child.expect(pexpect.EOF, timeout=20)
    screen = screen_lines(child)
    assert all(len(line) <= WIDTH for line in screen)
    assert "…" not in "\n".join(screen)
    assert "instructions_files_max_tokens = 8000" in screen
    assert "    default · CO_CLI_INSTRUCTIONS_FILES_MAX_TOKENS" in screen
    assert words_whole(screen, f"base_url = {url}")
