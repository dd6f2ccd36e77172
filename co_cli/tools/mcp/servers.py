"""The MCP servers of a co process: started in the background, watched, and stopped at exit.

Each server runs in a task of its own on the chat's event loop, which enters the pydantic-ai ``MCPToolset``
(a stdio process or a streamable-HTTP session) and holds it until ``stop()``; the agent's runs only use the
session it holds, so a turn never starts or stops a server. A server that fails to start, or dies, is one line
for the user (``notices``) and the chat goes on without it. A stdio server's process (its stderr log, its
process group, every process carrying its mark) is ``ServerProcesses``'s, and is killed when it stops and when
co exits, however co exits.

Nothing here imports pydantic-ai or the MCP client at module level: they load in a worker thread once the
prompt is drawn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from co_cli.config import McpServer, Paths
from co_cli.tools.mcp.server_processes import ServerProcesses
from co_cli.tools.mcp.server_state import ServerState, one_line

if TYPE_CHECKING:
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.tools import ToolDefinition

    from co_cli.deps import CoDeps

STARTUP_TIMEOUT = 30.0
"""Seconds a server may take to start and list its tools."""
STOP_TIMEOUT = 5.0
"""Seconds the servers get to stop at exit before their processes are killed."""


class McpServers:
    """The configured MCP servers of this process and their state."""

    def __init__(
        self, servers: dict[str, McpServer], paths: Paths, cwd: Path, refused: dict[str, str] | None = None
    ) -> None:
        refused = refused or {}
        self.cwd = cwd
        self.processes = ServerProcesses(paths.data_dir)
        """The stdio servers' processes: how each is started, what it said last, and killing them."""
        self.states: dict[str, ServerState] = {}
        for name, spec in servers.items():
            state = ServerState(name, spec)
            if not spec.enabled:
                state.status, state.detail = "disabled", "enabled is false in the settings"
            elif name in refused:
                state.status, state.detail = "not allowed", refused[name]
            if state.status != "starting":
                state.ready.set()
            self.states[name] = state
        self.notices: list[str] = []
        """Lines for the user not yet shown (``on_notice`` None)."""
        self.on_notice: Callable[[str], None] | None = None
        self.listeners: list[Callable[[], None]] = []
        """Called when the servers' tools change (a server started, failed or stopped)."""

    # ----- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every allowed server in the background (call on the chat's event loop)."""
        for state in self.states.values():
            if state.status == "starting" and state.task is None:
                state.task = asyncio.ensure_future(self._serve(state))

    async def wait_started(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Wait until every server has started or failed (at most ``timeout`` seconds); start them if nobody has."""
        self.start()
        waits = [state.ready.wait() for state in self.states.values() if not state.ready.is_set()]
        if waits:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), timeout)

    async def stop(self) -> None:
        """Stop every server: the sessions close, the processes end (killed if they do not in time)."""
        tasks = []
        for state in self.states.values():
            state.stop.set()
            if state.task is not None and not state.task.done():
                tasks.append(state.task)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_TIMEOUT)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        self.processes.kill(*self.states.values())

    def kill_all(self) -> None:
        """Kill every server process at once (co is ending without a chance to stop them gently)."""
        self.processes.kill(*self.states.values())

    async def _serve(self, state: ServerState) -> None:
        try:
            await self._run(state)
        finally:
            if state.stderr is not None:
                state.stderr.close()  # the client is done with it (its context has been left)

    async def _run(self, state: ServerState) -> None:
        watch: asyncio.Task[None] | None = None
        try:
            toolset = await asyncio.to_thread(self._build, state)
            watch = asyncio.ensure_future(self.processes.track_when_spawned(state))
            async with asyncio.timeout(STARTUP_TIMEOUT):
                await toolset.__aenter__()
        except Exception as exc:
            self.processes.kill(state)
            said = await self.processes.last_words(state)
            self._failed(state, f"failed to start: {said or one_line(exc)}")
            state.ready.set()
            return
        finally:
            if watch is not None:
                watch.cancel()
        try:
            state.toolset = toolset
            if state.pid is None:
                state.pid = self.processes.read_pid(state)
            try:
                async with asyncio.timeout(STARTUP_TIMEOUT):
                    state.tool_defs = await self._list(toolset)
            except Exception as exc:
                self._failed(state, f"failed to list its tools: {one_line(exc)}")
                return
            state.status, state.detail = "running", ""
            if state.stderr is not None:  # what it writes from now on may say why it stops
                state.stderr_start = state.stderr.written
            state.ready.set()
            self._changed()
            await state.stop.wait()
            if state.status == "running":
                state.status, state.detail = "stopped", ""
        finally:
            state.ready.set()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await toolset.__aexit__(None, None, None)
            state.toolset = None

    def _build(self, state: ServerState) -> MCPToolset[CoDeps]:
        """The pydantic-ai toolset for one server (imports the MCP client: run in a thread)."""
        from pydantic_ai.mcp import MCPToolset

        spec = state.spec
        read_timeout = spec.timeout + 5  # co's own timeout answers the model first
        if spec.url:
            return MCPToolset(
                spec.url,
                id=state.name,
                headers=spec.headers or None,
                tool_error_behavior="failed",
                init_timeout=STARTUP_TIMEOUT,
                read_timeout=read_timeout,
            )
        from fastmcp.client.transports import StdioTransport

        if shutil.which(spec.command, path=spec.env.get("PATH") or os.environ.get("PATH")) is None:
            raise FileNotFoundError(f"command not found: {spec.command}")
        launch = self.processes.launch(state)
        transport = StdioTransport(
            launch.command,
            launch.args,
            env=launch.env,
            cwd=spec.cwd or str(self.cwd),
            keep_alive=False,
            log_file=launch.stderr,
        )
        return MCPToolset(
            transport, id=state.name, tool_error_behavior="failed", init_timeout=STARTUP_TIMEOUT,
            read_timeout=read_timeout,
        )  # fmt: skip

    async def _list(self, toolset: MCPToolset[CoDeps]) -> list[ToolDefinition]:
        from pydantic_ai import RunContext
        from pydantic_ai.usage import RunUsage

        # Listing needs no run: the context only gives the tools their retry budget.
        ctx: RunContext[Any] = RunContext(deps=None, model=None, usage=RunUsage())  # type: ignore[arg-type]
        return [tool.tool_def for tool in (await toolset.get_tools(ctx)).values()]

    # ----- state changes -----------------------------------------------------------------------------------
    def _failed(self, state: ServerState, detail: str, *, was_running: bool = False) -> None:
        state.status, state.detail = "failed", detail
        log = f" (log: {state.stderr.path})" if state.stderr is not None else ""
        self.notice(f"MCP server {state.name} {detail}{log}")
        if was_running:
            self._changed()

    async def died(self, name: str, exc: BaseException) -> None:
        """A call found the server gone: one line, and its tools are no longer offered."""
        state = self.states[name]
        if state.status == "running":
            state.status = "failed"  # at once: no other call goes to it meanwhile
            self.processes.kill(state)
            said = await self.processes.last_words(state, state.stderr_start)
            self._failed(state, f"stopped: {said or one_line(exc)}", was_running=True)
            state.stop.set()

    def notice(self, message: str) -> None:
        if self.on_notice is not None:
            self.on_notice(message)
        else:
            self.notices.append(message)

    def take_notices(self) -> list[str]:
        taken, self.notices = self.notices, []
        return taken

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()

    # ----- what the rest of co reads -----------------------------------------------------------------------
    def running(self) -> list[ServerState]:
        return [state for state in self.states.values() if state.status == "running" and state.toolset is not None]

    def __len__(self) -> int:
        return len(self.states)
