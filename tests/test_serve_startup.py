"""`co --help` and a chat never import the server's framework: only `co serve` pays for Starlette and uvicorn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = (
    "import sys\nfrom co_cli.terminal.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
    "print('SERVER', sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'co_cli.serve') "
    "or m.startswith('co_cli.serve')))\n"
)


@pytest.mark.parametrize("args", [["--help"], ["chat", "-p", "hello", "-m", "test"], ["sessions", "list"]])
def test_start_up_does_not_import_the_server(tmp_path: Path, args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's co_cli, whatever is installed
    result = subprocess.run(
        [sys.executable, "-c", CHECK.format(args=args)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
        env=env,
    )
    assert "SERVER []" in result.stdout, result.stdout + result.stderr


def test_serve_imports_it(tmp_path: Path) -> None:
    """The check above can fail: the server's own help path does import them once it runs."""
    code = "import sys\nimport co_cli.serve.app\nprint('starlette' in sys.modules)\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert result.stdout.strip() == "True", result.stderr
