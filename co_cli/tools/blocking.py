"""Run a tool's blocking work in a thread that a cancelled turn does not wait for.

pydantic-ai runs a synchronous tool in a worker thread and, when the run is cancelled, waits for that
thread to return; ``asyncio.run`` also waits for the default executor at exit. A tool stuck on a slow
disk, a huge directory or a costly regular expression would then hold co until it finishes. Here the
work runs in a daemon thread: cancelling the awaiting task returns at once, asks the work to stop (it
checks ``StopFlag.check`` between steps) and abandons the thread, which cannot delay co's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ToolStopped(Exception):
    """Raised inside the work when the turn that asked for it was cancelled."""


class StopFlag:
    """Set when the awaiting task is cancelled; the work calls ``check()`` between steps."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise ToolStopped


async def run_blocking(work: Callable[[StopFlag], T], *, name: str = "co-tool") -> T:
    """Run ``work(stop)`` in a daemon thread and return its result (or raise its exception).

    On cancellation, ``stop`` is set and the cancellation goes on at once, without waiting for the thread.
    """
    loop = asyncio.get_running_loop()
    result: asyncio.Future[T] = loop.create_future()
    stop = StopFlag()
    context = contextvars.copy_context()

    def settle(value: T | None, error: BaseException | None) -> None:
        if result.done():  # cancelled meanwhile: nobody wants the outcome
            return
        if error is not None:
            result.set_exception(error)
        else:
            result.set_result(value)  # type: ignore[arg-type]

    def target() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = context.run(work, stop)
        except ToolStopped:
            return
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: co is exiting
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    try:
        return await result
    except asyncio.CancelledError:
        stop.set()
        raise


async def off_loop(call: Callable[[], T]) -> T:
    """``call()`` (a commit: it waits for the disk) in a worker thread, so the event loop runs other turns
    meanwhile. Cancelled while it runs, it still finishes before the cancellation goes on: a turn never goes
    on without knowing whether its write happened."""
    task = asyncio.ensure_future(asyncio.to_thread(call))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise
