"""The only writer of a live session: every change to its saved record goes through here.

A turn is written in two transactions: its prompt before the model is called (a crash keeps what the user
typed), and the rest when it ends — its messages and status, the usage rows (chat and summariser), the
compactions made during it, the pins a summary found, the task list if the turn changed it, the tool calls, the
memories its requests were sent and the memory-extraction queue item — in one.
``seqs_for`` tells the seqs a turn's messages will get before anything is written, so compaction spans are
computed first. A change an edit tool is about to make to a file is committed on its own, during the run and
before the file is written (``file_change``), so no file is changed without its way back.

Which session is written is the ``HeldSession`` (``Recorder.held``): the one this co holds (its lock), opened,
created on its first write or let go. Every write of the session's record (a prompt, a turn, a closing note, a
compaction, a pin, a task list) checks, inside its transaction, that this co still holds the session: once
another co has taken it over (``--force``), a write is refused with SessionTakenOver and nothing of it is saved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import ModelMessage

from co_cli.deps import PinSource, SessionState, Task
from co_cli.store import (
    CompactionRecord,
    SessionInfo,
    Store,
    compactions,
    file_changes,
    messages,
    pins,
    queue,
    sessions,
    tasks,
    tool_calls,
    turn_memories,
    usage,
)
from co_cli.store.codec import is_prompt_request
from co_cli.store.db import Transaction
from co_cli.store.file_changes import FileChange
from co_cli.store.tasks import StoredTask
from co_cli.store.tool_calls import ToolCallRow
from co_cli.store.turn_memories import SentMemory
from co_cli.store.usage import TurnUsage
from co_cli.vocabulary import MessageStatus, SessionOrigin


@dataclass
class Extraction:
    """A finished turn whose facts the memory extractor should look at."""

    text: str
    project: str


@dataclass
class TurnRecord:
    """Everything a finished turn leaves in the store."""

    prompt_seq: int
    messages: list[ModelMessage]
    status: MessageStatus
    usage: list[TurnUsage] = field(default_factory=list)
    compactions: list[CompactionRecord] = field(default_factory=list)
    pins: list[tuple[str, PinSource]] = field(default_factory=list)
    """Standing instructions a summary of this turn found (text, source)."""
    tasks: list[Task] | None = None
    """The task list, when the turn changed it (the model's set_tasks)."""
    tool_calls: list[ToolCallRow] = field(default_factory=list)
    memories: list[SentMemory] = field(default_factory=list)
    """The memories the turn's requests were sent."""
    extraction: Extraction | None = None


@dataclass
class Written:
    seqs: list[int]
    """The seq of each of the turn's messages."""
    pin_ids: list[int]
    """The id of each pin of the record, in order."""


class HeldSession:
    """Which session a recorder writes: the live one, held by this process (its lock), created on its first
    write, and where its transcript ends."""

    def __init__(
        self,
        store: Store,
        state: SessionState,
        cwd: Path,
        model_label: Callable[[], str],
        origin: SessionOrigin = "terminal",
    ) -> None:
        self.store = store
        self.origin: SessionOrigin = origin
        """Where the sessions this recorder creates were started."""
        self.records_owner = origin == "terminal"
        """Whether holding a session says so in the store (``owner_pid``). The server holds a session only
        while it writes a turn, and its lock file alone refuses other processes meanwhile."""
        self.state = state
        self.cwd = cwd
        self.model_label = model_label
        """The label of the model in use (saved with a new session)."""
        self.next_seq = 0
        """The seq the next message appended to the session's transcript takes."""

    @property
    def info(self) -> SessionInfo | None:
        return self.state.info

    def open(self, session: SessionInfo) -> None:
        """Hold ``session`` for this process (SessionBusy if another co has it open) and write to it from now."""
        self.store.locks.acquire(session.id, record_owner=self.records_owner)
        if self.state.info is not None and self.state.info.id != session.id:
            self.release()
        self.state.info = session
        self.next_seq = self.store.sessions.get(session.id).message_count

    def release(self) -> None:
        if self.state.info is not None:
            self.store.locks.release(self.state.info.id)

    def detach(self) -> None:
        """Let go of the session; the next prompt starts a new one."""
        self.release()
        self.state.info = None
        self.next_seq = 0

    def ensure(self, title: str) -> str:
        """The session's id, creating and holding it first if nothing has been saved yet (an empty title is set
        by the first prompt). Every session co starts is created here, whichever front end runs it."""
        if self.state.info is None:
            self.state.info = self.store.sessions.create(
                model=self.model_label(), cwd=str(self.cwd), title=title, origin=self.origin
            )
            self.store.locks.acquire(self.state.info.id, record_owner=self.records_owner)
        return self.state.info.id

    def id(self) -> str:
        """The live session's id (an error when nothing has been saved yet)."""
        if self.state.info is None:
            raise RuntimeError("no session to write to yet")
        return self.state.info.id

    @contextmanager
    def writing(self, session_id: str) -> Iterator[Transaction]:
        """A write transaction on the live session; SessionTakenOver, with nothing written, if another co has
        taken the session over (``--force``). The check runs inside the transaction, and a takeover happens
        inside one too: this co's write lands whole before the takeover, or not at all."""
        with self.store.db.transaction() as tx:
            self.store.locks.check_held(session_id)
            yield tx


class Recorder:
    """Every write of the live session's record: each kind of row a session holds has its one write here."""

    def __init__(
        self,
        store: Store,
        state: SessionState,
        cwd: Path,
        model_label: Callable[[], str],
        origin: SessionOrigin = "terminal",
    ) -> None:
        self.store = store
        self.state = state
        self.held = HeldSession(store, state, cwd, model_label, origin)
        """Which session is written (opened, created, let go)."""

    # ----- turns ------------------------------------------------------------------------------------------
    def begin(self, prompt: str, words: str | None = None) -> int:
        """Commit the user's prompt (creating the session on its first, titled by the user's own ``words`` in
        it when given); return the prompt's seq."""
        session_id = self.held.ensure(words or prompt)
        with self.held.writing(session_id) as tx:
            seq = messages.begin(tx, session_id, prompt, title=words)
        self.held.next_seq = seq + 1
        return seq

    def seqs_for(self, prompt_seq: int, messages: list[ModelMessage]) -> list[int]:
        """The seqs ``finish`` will give ``messages``: a first message holding the prompt takes the prompt's
        seq (it replaces the prompt row), the rest follow the transcript's end."""
        replaces = bool(messages) and is_prompt_request(messages[0])
        appended = len(messages) - int(replaces)
        return [prompt_seq] * int(replaces) + list(range(self.held.next_seq, self.held.next_seq + appended))

    def finish(self, turn: TurnRecord) -> Written:
        """Save a finished turn with everything it brought, in one transaction: a crash leaves the turn whole
        or only its prompt (which resume closes with an "interrupted" note)."""
        session_id = self.held.id()
        chat = next((u for u in turn.usage if u.role == "chat"), None)
        now = time.time()
        with self.held.writing(session_id) as tx:
            seqs = messages.append_turn(
                tx,
                session_id,
                turn.prompt_seq,
                turn.messages,
                turn.status,
                input_tokens=chat.input_tokens if chat else 0,
                output_tokens=chat.output_tokens if chat else 0,
                cost_usd=(chat.cost_usd or 0.0) if chat else 0.0,
                now=now,
            )
            for spent in turn.usage:
                usage.insert(tx, session_id, spent, now)
            for record in turn.compactions:
                compactions.insert(tx, session_id, record)
            pin_ids = [pins.insert(tx, session_id, text, source) for text, source in turn.pins]
            if turn.tasks is not None:
                tasks.insert(tx, session_id, max([turn.prompt_seq, *seqs]), stored_tasks(turn.tasks), "model", now)
            tool_calls.insert(tx, session_id, turn.prompt_seq, turn.tool_calls, now)
            turn_memories.insert(tx, session_id, turn.prompt_seq, turn.memories, now)
            if turn.extraction is not None:
                queue.put(tx, session_id, turn.prompt_seq, turn.extraction.text, turn.extraction.project)
        self.held.next_seq = max([self.held.next_seq - 1, *seqs]) + 1
        return Written(seqs, pin_ids)

    def file_change(self, change: FileChange) -> None:
        """Commit a change an edit tool is about to make, tied to the running turn, before the file is written:
        a crash leaves the old file (the change's ``after`` never written, which a restore finds already done)
        or the new file with its change, never a changed file with no way back."""
        session_id = self.held.id()
        seq = self.state.turn_seq if self.state.turn_seq is not None else self.held.next_seq - 1
        with self.held.writing(session_id) as tx:
            file_changes.insert(tx, session_id, seq, change)

    def close_open_turn(self, note: ModelMessage, prompt_seq: int) -> int | None:
        """Save the closing note of a turn a crash cut off (found on resume); its seq."""
        session_id = self.held.id()
        with self.held.writing(session_id) as tx:
            saved = messages.append_turn(tx, session_id, prompt_seq, [note], "cancelled")
        if saved:
            self.held.next_seq = saved[-1] + 1
        return saved[0] if saved else None

    # ----- compactions and pins ----------------------------------------------------------------------------
    def compaction(
        self, record: CompactionRecord, found: list[tuple[str, PinSource]], spent: TurnUsage | None
    ) -> list[int]:
        """Save a compaction made outside a turn (``/compact``, after an overflow), the pins its summary found and
        what the summariser spent, in one transaction; return the pin ids."""
        session_id = self.held.id()
        with self.held.writing(session_id) as tx:
            compactions.insert(tx, session_id, record)
            if spent is not None:
                usage.insert(tx, session_id, spent)
            return [pins.insert(tx, session_id, text, source) for text, source in found]

    def undo_compaction(self) -> CompactionRecord | None:
        return self.store.compactions.undo(self.held.id())

    def pin(self, text: str, source: PinSource) -> int:
        """Save a pin (a pin made before the first prompt creates the session it belongs to)."""
        session_id = self.held.ensure("")
        with self.held.writing(session_id) as tx:
            return pins.insert(tx, session_id, text, source)

    def unpin(self, pin_id: int) -> None:
        self.store.pins.remove(self.held.id(), pin_id)

    def save_tasks(self, items: Sequence[Task]) -> None:
        """Save the task list the user changed (/tasks), as it stands after the transcript's last message (a
        list made before the first prompt creates the session it belongs to)."""
        session_id = self.held.ensure("")
        with self.held.writing(session_id) as tx:
            tasks.insert(tx, session_id, self.held.next_seq - 1, stored_tasks(items), "user")

    # ----- the session's record -----------------------------------------------------------------------------
    def title(self, session_id: str, first_title: str, title: str, spent: TurnUsage | None) -> bool:
        """Save a title found in the background, unless the session was renamed meanwhile (it is still
        ``first_title``), with what finding it spent; whether the title was saved. ``session_id`` is the
        session the title was asked for, which may no longer be the live one."""
        with self.store.db.transaction() as tx:
            if spent is not None:
                usage.insert(tx, session_id, spent)
            return bool(title) and sessions.retitle(tx, session_id, title, if_title=first_title)

    def set_model(self, label: str) -> None:
        if self.state.info is not None:
            self.store.sessions.set_model(self.state.info.id, label)

    def rename(self, title: str) -> SessionInfo:
        session_id = self.held.id()
        self.store.sessions.rename(session_id, title)
        self.state.info = self.store.sessions.get(session_id)
        return self.state.info


def stored_tasks(items: Sequence[Task]) -> list[StoredTask]:
    return [StoredTask(task.text, task.status, task.created_at, task.updated_at) for task in items]
