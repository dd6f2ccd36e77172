"""A real `co chat` in a pty against the scripted server, as a fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.co_process import expect_prompt, spawn_co


@pytest.fixture
def repl(co_server_env: dict[str, str], workdir: Path):  # type: ignore[no-untyped-def]
    child = spawn_co(["chat"], env=co_server_env, cwd=workdir)
    expect_prompt(child)
    yield child
    if child.isalive():
        child.terminate(force=True)
