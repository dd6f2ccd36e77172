"""The memory tables: memories in the session database, every change an event, any change undoable.

A memory is never destroyed: forgetting sets its status to ``deleted``; an update made by the model or the
extractor forgets the old memory (``replaced_by`` the new one) and adds the new one. Each user-visible
change (one command, one tool call, one accepted proposal, one import) is one *change*: one or more rows
in ``memory_events`` with the same ``change_id``, written in one transaction. ``MemoryHistory.undo`` reverts the
latest change that is not itself an undo and not undone yet, and records that as a change too. What the extractor
proposes waits in ``MemoryReview`` for the user's answer.

What is worth remembering, and which memories a prompt gets, is decided by the memory package; the rules of
a memory row itself (one statement, no secret, a known kind and scope) are here.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from dataclasses import replace as evolve
from typing import Any, Literal

from co_cli.errors import CoError, StoreError
from co_cli.secrets import find_secret, refusal
from co_cli.store.db import Database, Reader, Transaction
from co_cli.store.messages import saved_text
from co_cli.store.schema import MEMORY_KINDS, MEMORY_SCOPES, MEMORY_SUBJECTS
from co_cli.store.sessions import Sessions
from co_cli.terminal_text import without_control_sequences

Actor = Literal["user", "model", "extractor"]
TEXT_MAX_CHARS = 500
TOPIC_MAX_CHARS = 60
_ID_RE = re.compile(r"m?(\d{1,18})", re.IGNORECASE)


class MemoryRefused(CoError):
    """A memory command that cannot be done: unknown id, empty text, a secret, nothing to undo."""

    exit_code = 2


class _NothingChanged(Exception):
    pass


class MemoryNotFound(CoError):
    exit_code = 4


@dataclass
class Memory:
    id: int
    text: str
    scope: str
    project: str
    kind: str
    status: str
    source_session: str | None
    source_seq: int | None
    created_at: float
    updated_at: float
    replaced_by: int | None
    proposal: str | None
    target_id: int | None
    topic: str | None = None
    """The attribute it states, as a snake_case key (``home_city``); None when not known."""
    about: str | None = None
    """``user`` or ``other`` (``person`` names them); None when not known (read as the user's)."""
    person: str | None = None
    cue: str | None = None
    """For a proposal suggested by word cues (no model answer could be read): which cue. Never applied on its
    own."""

    @property
    def ref(self) -> str:
        return f"m{self.id}"

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.ref,
            "text": self.text,
            "scope": self.scope,
            "project": self.project or None,
            "kind": self.kind,
            "status": self.status,
            "source_session": self.source_session,
            "source_seq": self.source_seq,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "replaced_by": f"m{self.replaced_by}" if self.replaced_by else None,
            "proposal": self.proposal,
            "target": f"m{self.target_id}" if self.target_id else None,
            "topic": self.topic,
            "about": self.about,
            "person": self.person,
            "suggested_by": self.cue,
        }

    @property
    def whose(self) -> str:
        """ "about Dana" for a memory about another person ("about someone else" without a name), else ""."""
        if self.about != "other":
            return ""
        return f"about {self.person}" if self.person else "about someone else"

    @property
    def subject(self) -> Subject:
        return Subject(self.topic, self.about, self.person)


@dataclass
class MemoryEvent:
    change_id: int
    memory_id: int
    at: float
    action: str
    actor: str
    old_text: str | None
    new_text: str | None
    old_status: str | None
    new_status: str | None
    undoes: int | None


@dataclass
class Candidate:
    memory: Memory
    bm25: float
    """FTS5's score: lower (more negative) is more relevant."""


_FIELDS = tuple(f.name for f in fields(Memory))
_COLUMNS = ", ".join(_FIELDS)
_M_COLUMNS = ", ".join(f"m.{name}" for name in _FIELDS)
_EVENT_FIELDS = tuple(f.name for f in fields(MemoryEvent))
_EVENT_COLUMNS = ", ".join(_EVENT_FIELDS)


def _memory(row: sqlite3.Row) -> Memory:
    return Memory(**{name: row[name] for name in _FIELDS})


def _event(row: sqlite3.Row) -> MemoryEvent:
    return MemoryEvent(**{name: row[name] for name in _EVENT_FIELDS})


def parse_ref(ref: str | int) -> int:
    """'m12', 'M12' or '12' -> 12; MemoryNotFound for anything else."""
    if isinstance(ref, int):
        return ref
    match = _ID_RE.fullmatch(ref.strip())
    if not match:
        raise MemoryNotFound(f"no memory {ref.strip()!r}: ids look like m12 (`co memory list` shows them)")
    return int(match.group(1))


def clean_text(text: str) -> str:
    """One statement on one line: terminal control sequences removed, whitespace collapsed; refused if empty,
    too long or a secret."""
    line = " ".join(without_control_sequences(text.encode("utf-8", "replace").decode("utf-8")).split())
    if not line:
        raise MemoryRefused("a memory needs some text")
    if len(line) > TEXT_MAX_CHARS:
        raise MemoryRefused(f"a memory is one statement of at most {TEXT_MAX_CHARS} characters (got {len(line)})")
    secret = find_secret(line)
    if secret is not None:
        raise MemoryRefused(refusal(secret))
    return line


def check_kind(kind: str) -> str:
    if kind not in MEMORY_KINDS:
        raise MemoryRefused(f"unknown kind {kind!r}: use one of {', '.join(MEMORY_KINDS)}")
    return kind


def check_scope(scope: str) -> str:
    if scope not in MEMORY_SCOPES:
        raise MemoryRefused(f"unknown scope {scope!r}: use user or project")
    return scope


@dataclass(frozen=True)
class Subject:
    """What a memory is about: its topic key, and whom (``user``, or ``other`` with ``person``); all optional."""

    topic: str | None = None
    about: str | None = None
    person: str | None = None


NO_SUBJECT = Subject()


def check_subject(subject: Subject) -> Subject:
    if subject.about is not None and subject.about not in MEMORY_SUBJECTS:
        raise MemoryRefused(f"unknown subject {subject.about!r}: use one of {', '.join(MEMORY_SUBJECTS)}")
    topic = " ".join((subject.topic or "").split())[:TOPIC_MAX_CHARS] or None
    person = " ".join((subject.person or "").split())[:TOPIC_MAX_CHARS] or None
    return Subject(topic, subject.about, person if subject.about == "other" else None)


def fts_terms_query(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms`` (each quoted, so FTS5 syntax in them is literal)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms if t.strip('"'))


@dataclass(frozen=True)
class Snapshot:
    """What an event records of a memory before and after it."""

    text: str
    status: str
    replaced_by: int | None
    kind: str
    scope: str
    project: str

    @classmethod
    def of(cls, memory: Memory) -> Snapshot:
        return cls(memory.text, memory.status, memory.replaced_by, memory.kind, memory.scope, memory.project)

    def meta(self) -> str:
        return json.dumps({"kind": self.kind, "scope": self.scope, "project": self.project})


@dataclass
class _Change:
    tx: Transaction
    change_id: int
    actor: Actor
    undoes: int | None = None
    now: float = field(default_factory=time.time)

    @classmethod
    @contextmanager
    def open(cls, db: Database, actor: Actor, undoes: int | None = None) -> Iterator[_Change]:
        """One change in a write transaction of its own, numbered after the latest."""
        with db.transaction() as tx:
            last = tx.read_one("SELECT coalesce(max(change_id), 0) AS last FROM memory_events")
            yield cls(tx, int(last["last"] if last else 0) + 1, actor, undoes)

    def event(self, memory_id: int, action: str, old: Snapshot | None, new: Snapshot) -> None:
        self.tx.execute(
            "INSERT INTO memory_events (change_id, undoes, memory_id, at, action, actor, old_text, new_text, "
            "old_status, new_status, old_replaced_by, new_replaced_by, old_meta, new_meta) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.change_id, self.undoes, memory_id, self.now, action, self.actor,
                old.text if old else None, new.text, old.status if old else None, new.status,
                old.replaced_by if old else None, new.replaced_by, old.meta() if old else None, new.meta(),
            ),
        )  # fmt: skip


def _row(reader: Reader, memory_id: int) -> Memory:
    row = reader.read_one(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
    if row is None:
        raise MemoryNotFound(f"no memory m{memory_id} (`co memory list --all` shows them)")
    return _memory(row)


def _with_status(reader: Reader, ref: str | int, *statuses: str) -> Memory:
    memory = _row(reader, parse_ref(ref))
    if memory.status not in statuses:
        raise MemoryNotFound(f"memory {memory.ref} is {memory.status}, not {' or '.join(statuses)}")
    return memory


def _write(change: _Change, memory: Memory, action: str, new: Snapshot) -> None:
    """Set a memory to ``new`` and record the event."""
    change.tx.execute(
        "UPDATE memories SET text = ?, status = ?, replaced_by = ?, kind = ?, scope = ?, project = ?, "
        "updated_at = ? WHERE id = ?",
        (new.text, new.status, new.replaced_by, new.kind, new.scope, new.project, change.now, memory.id),
    )
    change.event(memory.id, action, Snapshot.of(memory), new)


def _insert(
    change: _Change,
    new: Snapshot,
    *,
    source_session: str | None,
    source_seq: int | None,
    proposal: str | None = None,
    target_id: int | None = None,
    subject: Subject = NO_SUBJECT,
    cue: str | None = None,
) -> int:
    cursor = change.tx.execute(
        "INSERT INTO memories (text, scope, project, kind, status, source_session, source_seq, created_at, "
        "updated_at, proposal, target_id, topic, about, person, cue) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (new.text, new.scope, new.project, new.kind, new.status, source_session, source_seq,
         change.now, change.now, proposal, target_id, subject.topic, subject.about, subject.person, cue),
    )  # fmt: skip
    memory_id = int(cursor.lastrowid or 0)
    change.event(memory_id, "add", None, new)
    return memory_id


def _new(text: str, kind: str, scope: str, project: str, status: str) -> Snapshot:
    return Snapshot(clean_text(text), status, None, check_kind(kind), check_scope(scope),
                    project if scope == "project" else "")  # fmt: skip


class Memories:
    """The memory table of one session database: its memories' changes (each one transaction, undoable) and reads.
    The proposals awaiting the user are its ``review``, the changes made and their undoing its ``history``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.review = MemoryReview(self)
        self.history = MemoryHistory(db)

    def get(self, ref: str | int) -> Memory:
        return _row(self.db, parse_ref(ref))

    # -- changes --

    def add(
        self,
        text: str,
        *,
        actor: Actor,
        kind: str = "fact",
        scope: str = "user",
        project: str = "",
        source_session: str | None = None,
        source_seq: int | None = None,
        subject: Subject = NO_SUBJECT,
    ) -> Memory:
        """A new active memory (refused: empty text, a secret, an unknown kind, scope or subject)."""
        new = _new(text, kind, scope, project, "active")
        subject = check_subject(subject)
        with _Change.open(self.db, actor) as change:
            memory_id = _insert(change, new, source_session=source_session, source_seq=source_seq, subject=subject)
            return _row(change.tx, memory_id)

    def edit(self, ref: str | int, text: str, *, actor: Actor = "user", kind: str | None = None) -> Memory:
        """Change a memory's text (and kind) in place; its id stays."""
        text = clean_text(text)
        if kind is not None:
            check_kind(kind)
        with _Change.open(self.db, actor) as change:
            memory = _with_status(change.tx, ref, "active", "proposed")
            new = evolve(Snapshot.of(memory), text=text, kind=kind or memory.kind)
            if new == Snapshot.of(memory):
                raise MemoryRefused(f"memory {memory.ref} already says that")
            _write(change, memory, "update", new)
            return _row(change.tx, memory.id)

    def forget(self, ref: str | int, *, actor: Actor) -> Memory:
        """Soft-delete an active memory."""
        with _Change.open(self.db, actor) as change:
            memory = _with_status(change.tx, ref, "active")
            _write(change, memory, "delete", evolve(Snapshot.of(memory), status="deleted"))
            return _row(change.tx, memory.id)

    def replace(
        self,
        ref: str | int,
        text: str,
        *,
        actor: Actor,
        kind: str | None = None,
        subject: Subject | None = None,
        source_session: str | None = None,
        source_seq: int | None = None,
    ) -> Memory:
        """Forget a memory and add its successor (``replaced_by``) in one change; returns the new memory. The
        successor keeps the old one's subject and provenance unless given its own."""
        with _Change.open(self.db, actor) as change:
            old = _with_status(change.tx, ref, "active")
            new = _new(text, kind or old.kind, old.scope, old.project, "active")
            new_id = _insert(
                change, new,
                source_session=source_session or old.source_session,
                source_seq=source_seq if source_session else old.source_seq,
                subject=check_subject(subject) if subject is not None else old.subject,
            )  # fmt: skip
            _write(change, old, "delete", evolve(Snapshot.of(old), status="deleted", replaced_by=new_id))
            return _row(change.tx, new_id)

    def import_entries(self, entries: Sequence[ImportEntry], project: str) -> ImportResult:
        """Make the active memories of user scope and ``project`` what ``entries`` list, in one change: new
        entries added, changed ones updated, missing ones forgotten. Entries must be valid (see memory_file)."""
        result = ImportResult()
        with contextlib.suppress(_NothingChanged), _Change.open(self.db, "user") as change:
            rows = change.tx.read(
                f"SELECT {_COLUMNS} FROM memories WHERE status = 'active' AND (scope = 'user' OR project = ?)",
                (project,),
            )
            existing = {m.id: m for m in (_memory(r) for r in rows)}
            listed = {e.id for e in entries if e.id is not None}
            by_text = {m.text: m.id for m in existing.values() if m.id not in listed}
            for entry in entries:
                new = _new(entry.text, entry.kind, entry.scope, project, "active")
                if entry.id is None and by_text.get(new.text) is not None:
                    # A line written without its id for a memory that exists (e.g. imported twice): the same one.
                    same = by_text.pop(new.text)
                    entry = evolve(entry, id=same)
                    listed.add(same)
                if entry.id is None:
                    _insert(change, new, source_session=None, source_seq=None)
                    result.added += 1
                    continue
                memory = existing.get(entry.id)
                if memory is None:
                    raise MemoryRefused(f"line {entry.line}: m{entry.id} is not an active memory here")
                if evolve(Snapshot.of(memory), text=new.text, kind=new.kind, scope=new.scope,
                           project=new.project) != Snapshot.of(memory):  # fmt: skip
                    _write(change, memory, "update", evolve(new, replaced_by=memory.replaced_by))
                    result.updated += 1
            for memory_id, memory in existing.items():
                if memory_id not in listed:
                    _write(change, memory, "delete", evolve(Snapshot.of(memory), status="deleted"))
                    result.deleted += 1
            if not (result.added or result.updated or result.deleted):
                raise _NothingChanged  # rolls the (empty) change back: nothing to undo later
        return result

    # -- reads --

    def list(
        self,
        *,
        statuses: Sequence[str] = ("active",),
        scope: str | None = None,
        project: str | None = None,
        limit: int = 100_000,
    ) -> builtins.list[Memory]:
        """Memories, oldest first. ``project``: user memories plus that project's (None: every project)."""
        clauses = [f"status IN ({', '.join('?' * len(statuses))})"]
        params: builtins.list[Any] = [*statuses]
        if scope is not None:
            clauses.append("scope = ?")
            params.append(check_scope(scope))
        if project is not None:
            clauses.append("(scope = 'user' OR project = ?)")
            params.append(project)
        rows = self.db.read(
            f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?", (*params, limit)
        )
        return [_memory(r) for r in rows]

    def search(
        self, terms: Sequence[str], *, project: str | None, statuses: Sequence[str] = ("active",), limit: int = 50
    ) -> builtins.list[Candidate]:
        """Memories matching any of ``terms``, best first (BM25), in user scope or ``project`` (None: any)."""
        query = fts_terms_query(terms)
        if not query:
            return []
        scope_clause = "AND (m.scope = 'user' OR m.project = ?)" if project is not None else ""
        params: builtins.list[Any] = [query, *statuses]
        if project is not None:
            params.append(project)
        # The best FTS matches first (a bounded pool, so a common word does not join every row), then the
        # status and scope filter.
        rows = self.db.read(
            f"SELECT {_M_COLUMNS}, hits.score AS score "
            "FROM (SELECT rowid, bm25(memories_fts) AS score FROM memories_fts "
            "WHERE memories_fts MATCH ? ORDER BY score LIMIT ?) AS hits JOIN memories m ON m.id = hits.rowid "
            f"WHERE m.status IN ({', '.join('?' * len(statuses))}) {scope_clause} ORDER BY hits.score LIMIT ?",
            (params[0], max(limit * 20, 500), *params[1:], limit),
        )
        if len(rows) < limit:
            self._check_index_matches_table(query, max(limit * 20, 500))
        return [Candidate(_memory(r), float(r["score"])) for r in rows]

    def _check_index_matches_table(self, query: str, pool: int) -> None:
        """StoreError when the search index finds memories the table no longer holds (a damaged table): a
        search must not come back empty without saying why."""
        row = self.db.read_one(
            "SELECT count(*) AS n FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?) AS hits "
            "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = hits.rowid)",
            (query, pool),
        )
        missing = int(row["n"]) if row is not None else 0
        if missing:
            raise StoreError(
                f"session database {self.db.path} is damaged: {missing} memories the search index finds cannot "
                "be read; `co sessions recover` saves what can still be read into a new database"
            )

    def with_topics(self, topics: Sequence[str], project: str | None) -> builtins.list[Memory]:
        """Active memories whose topic key is one of ``topics``, in user scope or ``project``, newest first."""
        if not topics:
            return []
        rows = self.db.read(
            f"SELECT {_COLUMNS} FROM memories WHERE status = 'active' AND topic IN ({', '.join('?' * len(topics))}) "
            "AND (scope = 'user' OR project = ?) ORDER BY updated_at DESC, id DESC LIMIT 200",
            (*topics, project or ""),
        )
        return [_memory(r) for r in rows]

    def topics(self, project: str | None, limit: int = 40) -> builtins.list[str]:
        """The topic keys of the active memories in user scope or ``project``, the most recently used first."""
        rows = self.db.read(
            "SELECT topic, max(updated_at) AS latest FROM memories WHERE status = 'active' AND topic IS NOT NULL "
            "AND (scope = 'user' OR project = ?) GROUP BY topic ORDER BY latest DESC LIMIT ?",
            (project or "", limit),
        )
        return [str(r["topic"]) for r in rows]

    def recent(self, project: str | None, limit: int) -> builtins.list[Memory]:
        """The active memories of kind ``fact`` in user scope or ``project``, the most recently changed first."""
        rows = self.db.read(
            f"SELECT {_COLUMNS} FROM memories WHERE status = 'active' AND kind = 'fact' "
            "AND (scope = 'user' OR project = ?) ORDER BY updated_at DESC, id DESC LIMIT ?",
            (project or "", limit),
        )
        return [_memory(r) for r in rows]

    def instructions(self, project: str | None) -> builtins.list[Memory]:
        """Active memories of kind ``instruction`` in user scope or ``project``, newest first."""
        rows = self.db.read(
            f"SELECT {_COLUMNS} FROM memories WHERE status = 'active' AND kind = 'instruction' "
            "AND (scope = 'user' OR project = ?) ORDER BY updated_at DESC, id DESC LIMIT 200",
            (project or "",),
        )
        return [_memory(r) for r in rows]

    def counts(self, project: str | None) -> dict[str, int]:
        """How many memories per status, in user scope plus ``project``."""
        rows = self.db.read(
            "SELECT status, count(*) AS n FROM memories WHERE scope = 'user' OR project = ? GROUP BY status",
            (project or "",),
        )
        return {str(row["status"]): int(row["n"]) for row in rows}

    def source(self, memory: Memory) -> MemorySource | None:
        """The message a memory came from (None if unknown or since deleted)."""
        if memory.source_session is None or memory.source_seq is None:
            return None
        text = saved_text(self.db, memory.source_session, memory.source_seq)
        if text is None:
            return None
        return MemorySource(Sessions(self.db).short_id(memory.source_session), memory.source_seq, text)


class MemoryReview:
    """The review queue of the memory table: what the extractor proposes is stored as a proposal for the user,
    who accepts it (in their own words, if they like) or rejects it; each answer is one undoable change."""

    def __init__(self, memories: Memories) -> None:
        self.memories = memories
        self.db = memories.db

    def propose(
        self,
        text: str,
        *,
        proposal: Literal["add", "update", "delete"],
        kind: str = "fact",
        scope: str = "user",
        project: str = "",
        target: int | None = None,
        source_session: str | None = None,
        source_seq: int | None = None,
        subject: Subject = NO_SUBJECT,
        cue: str | None = None,
    ) -> Memory:
        """A proposal of the extractor for the user to review (``target``: the memory it updates or deletes;
        ``cue``: suggested by that word cue, not by a model's answer)."""
        new = _new(text, kind, scope, project, "proposed")
        subject = check_subject(subject)
        with _Change.open(self.db, "extractor") as change:
            memory_id = _insert(
                change, new, source_session=source_session, source_seq=source_seq, proposal=proposal,
                target_id=target, subject=subject, cue=cue,
            )  # fmt: skip
            return _row(change.tx, memory_id)

    def accept(self, ref: str | int, *, text: str | None = None) -> Memory:
        """Accept a proposal (optionally in the user's own words): it becomes active, or does to its target
        what it proposes. Returns the proposal's row as it is afterwards."""
        if text is not None:
            text = clean_text(text)
        with _Change.open(self.db, "user") as change:
            memory = _with_status(change.tx, ref, "proposed")
            target = _row(change.tx, memory.target_id) if memory.target_id else None
            if target is not None and target.status != "active":
                target = None  # forgotten meanwhile: an update is then just an add
            if memory.proposal == "delete":
                if target is not None:
                    _write(change, target, "delete", evolve(Snapshot.of(target), status="deleted"))
                _write(change, memory, "accept", evolve(Snapshot.of(memory), status="deleted"))
                return _row(change.tx, memory.id)
            _write(change, memory, "accept", evolve(Snapshot.of(memory), status="active", text=text or memory.text))
            if memory.proposal == "update" and target is not None:
                _write(change, target, "delete", evolve(Snapshot.of(target), status="deleted", replaced_by=memory.id))
            return _row(change.tx, memory.id)

    def reject(self, ref: str | int) -> Memory:
        with _Change.open(self.db, "user") as change:
            memory = _with_status(change.tx, ref, "proposed")
            _write(change, memory, "reject", evolve(Snapshot.of(memory), status="rejected"))
            return _row(change.tx, memory.id)

    def proposals(self, project: str | None) -> builtins.list[Memory]:
        """The proposals awaiting an answer, oldest first: user scope plus ``project``'s (None: every project)."""
        return self.memories.list(statuses=("proposed",), project=project)


class MemoryHistory:
    """The memory table's history (``memory_events``): every change as its events, newest first, and the undoing
    of the latest change not undone yet (itself a change)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def events_of(self, change_id: int) -> builtins.list[MemoryEvent]:
        """The events of one change, in the order they were written."""
        rows = self.db.read(f"SELECT {_EVENT_COLUMNS} FROM memory_events WHERE change_id = ? ORDER BY id", (change_id,))
        return [_event(r) for r in rows]

    def log(self, limit: int = 50) -> builtins.list[MemoryEvent]:
        """The newest events first."""
        rows = self.db.read(f"SELECT {_EVENT_COLUMNS} FROM memory_events ORDER BY id DESC LIMIT ?", (limit,))
        return [_event(r) for r in rows]

    def undo(self) -> builtins.list[MemoryEvent]:
        """Revert the latest change not undone yet; returns the events that did it (MemoryRefused if none)."""
        with _Change.open(self.db, "user") as change:
            tx = change.tx
            row = tx.read_one(
                "SELECT max(change_id) AS latest FROM memory_events WHERE undoes IS NULL AND change_id NOT IN "
                "(SELECT undoes FROM memory_events WHERE undoes IS NOT NULL)"
            )
            if row is None or row["latest"] is None:
                raise MemoryRefused("nothing to undo")
            change.undoes = int(row["latest"])
            events = tx.read(
                "SELECT memory_id, old_text, old_status, old_replaced_by, old_meta FROM memory_events "
                "WHERE change_id = ? ORDER BY id DESC",
                (change.undoes,),
            )
            for event in events:
                current = _row(tx, event["memory_id"])
                if event["old_status"] is None:  # undoing an add forgets the memory (softly, as always)
                    before = evolve(Snapshot.of(current), status="deleted")
                else:
                    meta = json.loads(event["old_meta"]) if event["old_meta"] else {}
                    kind, scope = meta.get("kind", current.kind), meta.get("scope", current.scope)
                    project = meta.get("project", current.project)
                    before = Snapshot(
                        event["old_text"], event["old_status"], event["old_replaced_by"], kind, scope, project
                    )
                if before.status == "deleted" and current.status != "deleted":
                    action = "delete"
                elif current.status == "deleted" and before.status != "deleted":
                    action = "restore"
                elif before.text != current.text:
                    action = "update"
                else:
                    action = "restore"
                _write(change, current, action, before)
            change_id = change.change_id
        return self.events_of(change_id)


@dataclass(frozen=True)
class MemorySource:
    """The message a memory came from: its session (by the short id co prints), its place and its text."""

    session: str
    seq: int
    text: str


@dataclass(frozen=True)
class ImportEntry:
    line: int
    id: int | None
    scope: str
    kind: str
    text: str


@dataclass
class ImportResult:
    added: int = 0
    updated: int = 0
    deleted: int = 0
