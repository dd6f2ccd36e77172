"""The processes of the stdio MCP servers: how each is started so co knows it, what it said last, and killing it.

A stdio server's stderr goes to ``<data dir>/mcp-logs/<name>.log`` (0600, within a fixed size: ``stderr_log``).
The server runs in a session of its own (the MCP client starts it so): ``sh -c`` writes its pid (the server's,
after exec) to ``<data dir>/mcp-logs/.<name>.pid``, so co knows its process group as soon as it exists and kills
it when co itself is killed. Its environment carries co's mark, so every process it starts (one it detached with
``setsid`` included: ``tools.processes``) is killed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from co_cli.tools.mcp.server_state import ServerState, one_line
from co_cli.tools.mcp.stderr_log import StderrLog
from co_cli.tools.processes import forget_process_group, kill_marks, marked_environment, new_mark, track_process_group

LOG_DIR = "mcp-logs"

_PID_WRAPPER = 'echo $$ > "$0" && exec "$@"'


@dataclass(frozen=True)
class Launch:
    """How a stdio server's process is started: what runs, with which environment, its stderr going where."""

    command: str
    args: list[str]
    env: dict[str, str]
    stderr: TextIO


class ServerProcesses:
    """The stdio servers' processes under one data directory: their logs and pid files, their process groups
    and marks, and what they wrote last."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / LOG_DIR

    def launch(self, state: ServerState) -> Launch:
        """How to start ``state``'s server so co can find and kill it (opens its stderr log, gives it a mark)."""
        spec = state.spec
        state.stderr = StderrLog(self._log_dir(), state.name)
        command, args = spec.command, list(spec.args)
        if os.name == "posix":
            command, args = "/bin/sh", ["-c", _PID_WRAPPER, str(self._fresh_pid_file(state.name)), command, *args]
        state.mark = new_mark("mcp")
        return Launch(command, args, {**spec.env, **marked_environment(state.mark)}, state.stderr.writer)

    def read_pid(self, state: ServerState) -> int | None:
        """The process group the server's pid file names (tracked from now on), or None."""
        if state.spec.url or os.name != "posix":
            return None
        path = self._pid_file(state.name)
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            return None
        finally:
            path.unlink(missing_ok=True)
        track_process_group(pid)
        return pid

    async def track_when_spawned(self, state: ServerState) -> None:
        """Know the server's process group as soon as it exists, so co killed while the server is still
        starting kills it too."""
        if state.spec.url or os.name != "posix":
            return
        path = self._pid_file(state.name)
        while state.pid is None:
            with contextlib.suppress(OSError):
                if path.read_text().endswith("\n"):  # written whole
                    state.pid = self.read_pid(state)
                    return
            await asyncio.sleep(0.02)

    def kill(self, *states: ServerState) -> None:
        """Kill these servers' process groups and every process they started elsewhere (``setsid``)."""
        marks = set()
        for state in states:
            if state.pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(state.pid, signal.SIGKILL)
                forget_process_group(state.pid)
                state.pid = None
            if state.mark is not None:
                marks.add(state.mark)
                state.mark = None
        kill_marks(marks)

    async def last_words(self, state: ServerState, since: int = 0) -> str:
        """The last line the stopped server wrote to stderr (after ``since`` bytes; often why it stopped), or
        ''. Only what co keeps in memory is read, whatever the log's size."""
        if state.stderr is None:
            return ""
        state.stderr.detach()
        await asyncio.to_thread(state.stderr.settle)  # what its last processes wrote, read to the end
        said = state.stderr.last_line(since)
        return one_line(Exception(said)) if said else ""

    def _log_dir(self) -> Path:
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, mode=0o700, exist_ok=True)
            os.chmod(self.directory, 0o700)
        return self.directory

    def _fresh_pid_file(self, name: str) -> Path:
        path = self._pid_file(name)
        path.unlink(missing_ok=True)
        return path

    def _pid_file(self, name: str) -> Path:
        return self.directory / f".{name}.pid"
