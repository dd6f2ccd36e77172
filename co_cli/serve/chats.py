"""Turns run for the server's clients through co's own session machinery, as the REPL runs them.

Each request is a turn of a saved session (``session_for`` chooses which): the prompt is saved before the model
is called, the agent runs with co's instructions, memories, instructions files and context governance, the
turn is saved whole with its usage, and memory extraction follows per ``memory_extract``. A session is written
only while its lock is held (the same lock file the terminal takes): one open in a terminal is refused
(``SessionBusy`` -> 409), and two requests for one session here run one after the other.

``Chats.start`` does everything that can fail with a clear status before any byte is sent (which session,
which model, the lock); ``RunningTurn.events()`` then yields what happens. A client that goes away
mid-answer does not stop the saving: the turn is cancelled and saved as cut off (status ``cancelled``, the
partial answer marked interrupted), exactly as Ctrl-C leaves it in the terminal. A terminal that takes the
session over mid-turn (``--force``) wins: the server's commit is refused (``Finished.taken_over``), so nothing
of its turn lands after the terminal's, and the client gets an error instead of an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic_ai import CancellationToken
from pydantic_ai.messages import ModelResponse

from co_cli.config import LoadedSettings
from co_cli.errors import SessionBusy, SessionNotFound, SessionTakenOver
from co_cli.memory.retrieval import Scored
from co_cli.models import ResolvedModel
from co_cli.serve.errors import ApiError
from co_cli.serve.history import ChatMessage, client_turns, session_matching, session_retried
from co_cli.serve.served_models import ServedModels
from co_cli.session import Conversation, TurnOutcome, off_loop
from co_cli.session.factory import FrontEnd, Opening, open_conversation
from co_cli.store import SessionInfo, Store, TurnUsage

SERVER_DENIED = (
    "Not run: this needs the user's approval, and co serve cannot ask for it. Through the server only tools "
    "that change nothing run (reading files, searching past conversations and memories); say what the user "
    "could run instead."
)
"""What the model is told of a shell command, file write, remember or forget asked for through the server."""

SERVER = FrontEnd(origin="serve", denied=SERVER_DENIED)
"""How the server's conversations run: nobody to ask for approval, and a command rule never stands in for it."""

CACHED_CONVERSATIONS = 64
"""Conversations kept built between requests (their agent and governor), most recently used first."""


@dataclass
class TurnRequest:
    """One turn a client asks for."""

    prompt: str
    history: list[ChatMessage] = field(default_factory=list)
    """The earlier user and assistant messages the client sent (they choose the session when no id is given,
    and start a new session's transcript)."""
    session: str | None = None
    """A session id or unique prefix (the ``X-Co-Session`` header); None: the session this request is the retry of
    (the same request, failed moments ago), else the one matched by ``history``, else new."""
    model: str | None = None
    """A model name (None: the configured one)."""
    instructions: str = ""
    """Added to co's instructions for this turn only (an API client's system messages); not saved."""


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Notice:
    """Something co says about the turn (a compaction, a cut-off answer)."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """One of co's own tools called (``result`` None) or answered."""

    name: str
    args: Any = None
    result: Any = None


@dataclass(frozen=True)
class Finished:
    outcome: TurnOutcome
    usage: TurnUsage | None
    memories: list[Scored] = field(default_factory=list)
    """The memories the turn's requests were sent (id, text, kind, score), as saved with the turn."""
    finish_reason: Literal["stop", "length"] = "stop"
    """"length": the answer stopped at the model's output limit."""
    taken_over: bool = False
    """A terminal took the session over (``co chat --resume <id> --force``) during the turn: nothing of the turn
    after the prompt was saved (the terminal closes the prompt as cut off), and the outcome is failed."""


TurnEvent = TextDelta | Notice | ToolUse | Finished


class _QueueView:
    """A TurnView that hands what happens to the consumer of ``events()``."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[TurnEvent] = asyncio.Queue()

    def working(self, what: str) -> None:
        pass

    def text(self, delta: str) -> None:
        if delta:
            self.queue.put_nowait(TextDelta(delta))

    def tool_call(self, name: str, args: Any) -> None:
        self.queue.put_nowait(ToolUse(name, args=args))

    def tool_result(self, name: str, content: Any) -> None:
        self.queue.put_nowait(ToolUse(name, result=content))

    def notice(self, message: str) -> None:
        self.queue.put_nowait(Notice(message))

    def end(self, interrupted: bool = False) -> None:
        pass


class RunningTurn:
    """A turn that has its session and model; ``events()`` runs it."""

    def __init__(
        self, chats: Chats, conv: Conversation, request: TurnRequest, lock: asyncio.Lock, created: bool
    ) -> None:
        self.chats = chats
        self.conv = conv
        self.prompt = request.prompt
        self.instructions = request.instructions
        self.created = created
        """Whether the request started a new session."""
        self._lock = lock
        self._view = _QueueView()
        self._token = CancellationToken()
        self._task: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()
        """Set when the turn's ``Finished`` is queued."""
        self._abandoned = False

    @property
    def session_id(self) -> str:
        session_id = self.conv.session_id
        assert session_id is not None
        return session_id

    @property
    def model(self) -> str:
        return self.conv.resolved.label

    async def events(self) -> AsyncIterator[TurnEvent]:
        """Run the turn, yielding what happens; ends with ``Finished``. If the consumer stops early (the client
        went away), the turn is cancelled and still saved."""
        async for batch in self.batches():
            for event in batch:
                yield event

    async def batches(self, pace: float = 0.0) -> AsyncIterator[list[TurnEvent]]:
        """``events()`` as lists: what has happened since the consumer last looked (one write for several
        pieces of an answer). With ``pace`` (seconds), a piece that comes sooner than that after the last list
        waits for the pieces that follow it until then: one write instead of one per piece, each piece late by
        at most ``pace``. The turn's end is handed over as soon as it comes."""
        if self._abandoned or self._task is not None:
            raise RuntimeError("a turn runs once")
        self._task = asyncio.get_running_loop().create_task(self._run())
        self.chats.running.add(self._task)
        self._task.add_done_callback(self.chats.running.discard)
        self.chats.turns[self.session_id] = self
        loop = asyncio.get_running_loop()
        queue = self._view.queue
        last = -math.inf
        try:
            while True:
                batch = [await queue.get()]
                wait = last + pace - loop.time()
                if wait > 0 and not isinstance(batch[-1], Finished):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._finished.wait(), wait)
                while not queue.empty():
                    batch.append(queue.get_nowait())
                last = loop.time()
                yield batch
                if isinstance(batch[-1], Finished):
                    return
        finally:
            if not self._task.done():
                self._token.cancel()

    def cancel(self) -> None:
        self._token.cancel()

    async def ended(self) -> None:
        """Wait until the turn is saved, however it ended."""
        await self._finished.wait()

    def abandon(self) -> None:
        """Let go of a turn that has not started (its client went away first): the session is released and
        nothing is written. Nothing happens once ``events()`` has started it."""
        if self._task is None and not self._abandoned:
            self._abandoned = True
            self.chats.done_with(self.conv)
            self._lock.release()

    async def _run(self) -> None:
        outcome = TurnOutcome("failed", error="the turn did not run")
        taken_over = False
        try:
            outcome = await self.conv.run_turn(self.prompt, self._view, self._token, self.instructions)
        except SessionTakenOver as exc:  # refused inside its commit: nothing written after the takeover
            outcome = TurnOutcome(
                "failed", error=f"{exc.message.split(';')[0]} during this turn; its answer was not saved"
            )
            taken_over = True
        except Exception as exc:  # a bug or a store failure: the client gets one line, the server goes on
            outcome = TurnOutcome("failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            for session_id in [key for key, turn in self.chats.turns.items() if turn is self]:
                del self.chats.turns[session_id]
            self.chats.done_with(self.conv, keep=not taken_over)
            self._lock.release()
            usage = self.conv.last_usage if outcome.status != "failed" else None  # a failed turn saves none
            memories = list(self.conv.state.memory_sent.values())
            finished = Finished(outcome, usage, memories, _finish_reason(self.conv), taken_over=taken_over)
            self._view.queue.put_nowait(finished)
            self._finished.set()


def _finish_reason(conv: Conversation) -> Literal["stop", "length"]:
    """Why the turn's answer ended, as the provider said it."""
    last = conv.context.messages[-1] if conv.context.messages else None
    return "length" if isinstance(last, ModelResponse) and last.finish_reason == "length" else "stop"


class Chats:
    """Every turn the server runs, and the conversations kept built between them."""

    def __init__(self, loaded: LoadedSettings, store: Store, cwd: Path, models: ServedModels) -> None:
        self.loaded = loaded
        self.store = store
        self.cwd = cwd
        self.models = models
        self.running: set[asyncio.Task[None]] = set()
        self.turns: dict[str, RunningTurn] = {}
        """The turn running in each session, by session id."""
        self._background: set[asyncio.Task[None]] = set()
        """Background work of conversations no longer kept (their titles and memory extraction)."""
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._idle: OrderedDict[str, tuple[Conversation, tuple[object, ...]]] = OrderedDict()
        """Built conversations not in a turn, by session id, with the session's revision they were left at."""

    async def start(self, request: TurnRequest) -> RunningTurn:
        """Choose the session and the model and take the session's lock; ApiError (404 unknown session or
        model, 409 open in a terminal) before anything is written."""
        resolved = self.models.resolve(request.model)
        info = self._chosen(request)
        if info is None:
            return await self._new(request, resolved)
        lock = self._locks.setdefault(info.id, asyncio.Lock())
        await lock.acquire()
        try:
            conv = self._open(info.id, resolved)
        except BaseException:
            lock.release()
            raise
        return RunningTurn(self, conv, request, lock, created=False)

    async def stop(self, id_or_prefix: str) -> bool:
        """Stop the turn running in the session, as Esc stops one in the terminal (it is saved cancelled, the
        answer so far kept and marked interrupted), and wait until it is saved; False when none runs there.
        ApiError 404 for an unknown session."""
        info = self._known(id_or_prefix)
        turn = self.turns.get(info.id)
        if turn is None:
            return False
        turn.cancel()
        await turn.ended()
        return True

    async def rename(self, id_or_prefix: str, title: str) -> SessionInfo:
        """Give the session a new title, as ``co sessions rename`` does (a title co would make later yields to
        it). ApiError 404 for an unknown session, 400 for an empty title."""
        if not title.strip():
            raise ApiError(400, "title: give the session a title", "invalid_value")
        info = self._known(id_or_prefix)
        await off_loop(lambda: self.store.sessions.rename(info.id, title))
        return self.store.sessions.get(info.id)

    async def trash(self, id_or_prefix: str) -> SessionInfo:
        """Move the session to the trash, as ``co sessions delete`` does; ApiError 409 while a turn runs in it
        (here or in a terminal)."""
        info = self._known(id_or_prefix)
        lock = self._locks.setdefault(info.id, asyncio.Lock())
        if lock.locked():
            raise ApiError(409, f"session {info.id} is answering a request; stop it first", "session_busy")
        async with lock:
            try:
                await off_loop(lambda: self.store.trash.put(info.id))
            except SessionBusy as exc:
                raise ApiError(409, exc.message, "session_busy") from None
        return info

    async def restore(self, id_or_prefix: str) -> SessionInfo:
        """Bring a session back from the trash, unchanged, as ``co sessions restore`` does."""
        try:
            info = self.store.sessions.get(id_or_prefix, trashed=True)
        except SessionNotFound as exc:
            raise ApiError(404, exc.message, "session_not_found") from None
        await off_loop(lambda: self.store.trash.restore(info.id))
        return self.store.sessions.get(info.id)

    def _known(self, id_or_prefix: str) -> SessionInfo:
        try:
            return self.store.sessions.get(id_or_prefix)
        except SessionNotFound as exc:
            raise ApiError(404, exc.message, "session_not_found") from None

    def _chosen(self, request: TurnRequest) -> SessionInfo | None:
        if request.session:
            return self._known(request.session)
        retried = session_retried(self.store, request.history, request.prompt)
        if retried is not None:  # the same request again after it failed: its session, not a new one
            return retried
        if request.history:
            return session_matching(self.store, request.history)
        return None

    async def _new(self, request: TurnRequest, resolved: ResolvedModel) -> RunningTurn:
        first = next((m.text for m in request.history if m.role == "user"), request.prompt)
        opening = Opening.brought_by_client(first, client_turns(request.history))
        conv = await off_loop(lambda: self._build(resolved, opening))
        assert conv.session_id is not None
        lock = self._locks.setdefault(conv.session_id, asyncio.Lock())
        await lock.acquire()
        return RunningTurn(self, conv, request, lock, created=True)

    def _open(self, session_id: str, resolved: ResolvedModel) -> Conversation:
        """The session's conversation, held for this process: the one kept from its last turn when nothing
        else has written to the session since, else built and loaded from the store."""
        info = self.store.sessions.get(session_id)
        kept = self._idle.pop(session_id, None)
        try:
            if kept is not None and kept[1] == self.store.sessions.revision(session_id):
                conv = kept[0]
                conv.recorder.held.open(info)
            else:
                conv = self._build(resolved, Opening.resumed(info))
        except SessionBusy as exc:
            raise ApiError(
                409, f"{exc.message.split(';')[0]}; the server does not write to it meanwhile", "session_busy"
            ) from None
        if conv.resolved.label != resolved.label:
            conv.switch_model(resolved)
        return conv

    def _build(self, resolved: ResolvedModel, opening: Opening) -> Conversation:
        settings, paths = self.loaded.settings, self.loaded.paths
        return open_conversation(settings, paths, self.store, self.cwd, resolved, SERVER, opening)

    def done_with(self, conv: Conversation, *, keep: bool = True) -> None:
        """A turn ended: keep the conversation for the session's next turn, with the session's revision read
        while the lock is still held (a change made elsewhere later makes the next turn rebuild it), and
        release the lock. ``keep=False``: the conversation no longer matches the session (it was taken over)."""
        session_id = conv.session_id
        if session_id is not None and keep:
            with contextlib.suppress(SessionNotFound):
                self._idle[session_id] = (conv, self.store.sessions.revision(session_id))
                self._idle.move_to_end(session_id)
        conv.release()
        while len(self._idle) > CACHED_CONVERSATIONS:
            _, (old, _revision) = self._idle.popitem(last=False)
            task = asyncio.get_running_loop().create_task(old.close())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def close(self, timeout: float = 15.0) -> None:
        """Let running turns and background work (titles, memory extraction) finish."""
        if self.running:
            await asyncio.wait(set(self.running), timeout=timeout)
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)
        for conv, _ in list(self._idle.values()):
            await conv.close(timeout, drain=timeout)
        self._idle.clear()
