"""The load bench in its quick form: concurrent streaming clients lose nothing and mix nothing between sessions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.e2e


def test_bench_serve_quick_loses_and_mixes_nothing() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_serve.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 concurrent streaming clients x 3 turns: 15 turns" in done.stdout
    assert done.stdout.rstrip().endswith("nothing lost, nothing mixed")
    assert "co's added" in done.stdout and "turns/s" in done.stdout and "co serve CPU" in done.stdout
