"""End to end, checked on a terminal emulator: what the user sees after a streamed answer."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.support.co_process import ctrl_c, expect_prompt, send_line, spawn_co
from tests.support.screen import screen_lines, spawn_with_toolbar, toolbar, watch
from tests.support.scripted_server import ScriptedServer, Text

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("rows", [40, 12])
def test_ctrl_c_mid_answer_shows_the_partial_answer_once(
    co_server_env: dict[str, str], workdir: Path, scripted_server: ScriptedServer, rows: int
) -> None:
    words = " ".join(f"w{i:03d}" for i in range(400))
    scripted_server.script(Text(words, chunk_size=6, delay=0.01), Text("second answer"))
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir, dimensions=(rows, 100))
    try:
        expect_prompt(child)
        send_line(child, "a long story")
        child.expect("w030", timeout=20)
        time.sleep(0.3)
        ctrl_c(child)
        expect_prompt(child, timeout=20)
        send_line(child, "next")
        expect_prompt(child, timeout=20)
        text = "\n".join(screen_lines(child))
        assert text.count("w005") == 1 and text.count("w025") == 1, text
        assert "[interrupted]" in text and "second answer" in text
    finally:
        child.terminate(force=True)


def test_the_toolbar_leaves_loading_when_the_model_is_ready_without_a_key(
    co_server_env: dict[str, str], workdir: Path
) -> None:
    child = spawn_with_toolbar(co_server_env, workdir)
    try:
        deadline = time.monotonic() + 20
        first = ""
        while not first and time.monotonic() < deadline:
            first = toolbar(watch(child, 0.1))  # the prompt is drawn at once, while pydantic-ai loads
        shown = first
        while "loading…" in shown and time.monotonic() < deadline:  # no key is pressed meanwhile
            shown = toolbar(watch(child, 1))
        assert re.fullmatch(r" scripted │ session new │ context \d+% of 128,000", shown), (first, shown)
    finally:
        child.terminate(force=True)
