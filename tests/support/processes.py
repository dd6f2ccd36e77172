"""Waiting on processes the tests start: for a file to appear, for a process to end, whether it is alive."""

from __future__ import annotations

import time
from pathlib import Path


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_file(path: Path, seconds: float = 5.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def assert_dies(pid: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while process_alive(pid):
        assert time.monotonic() < deadline, f"process {pid} survived"
        time.sleep(0.02)
