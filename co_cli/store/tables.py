"""``Store``: one open session database and the objects of its tables (the door in ``co_cli.store`` offers it)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from co_cli.store.compactions import CompactionRecord, Compactions
from co_cli.store.db import Database
from co_cli.store.file_changes import FileChanges
from co_cli.store.locks import OpenSessions
from co_cli.store.messages import Messages, StoredMessage
from co_cli.store.pins import Pins
from co_cli.store.readings import Readings
from co_cli.store.search import Search
from co_cli.store.sessions import SessionInfo, Sessions, Trash
from co_cli.store.tasks import TaskLists, TaskSnapshot
from co_cli.store.tool_calls import ToolCalls
from co_cli.store.turn_memories import TurnMemories
from co_cli.store.usage import UsageLog

if TYPE_CHECKING:
    from co_cli.store.memories import Memories
    from co_cli.store.queue import ExtractionQueue
    from co_cli.store.recover import Recovery


class Store:
    """One open session database and its tables. Safe to share between threads; many processes may use one
    file."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.path = db.path
        self.sessions = Sessions(db)
        self.trash = Trash(db, self.sessions)
        self.messages = Messages(db)
        self.compactions = Compactions(db)
        self.pins = Pins(db)
        self.usage = UsageLog(db)
        self.search = Search(db)
        self.locks = OpenSessions(db)
        self.tasks = TaskLists(db)
        self.tool_calls = ToolCalls(db)
        self.turn_memories = TurnMemories(db)
        self.file_changes = FileChanges(db)
        self.readings = Readings(db)

    # The memory tables are opened on first use: listing or resuming a session never needs them, and their
    # module compiles the secret patterns.
    @cached_property
    def memories(self) -> Memories:
        from co_cli.store.memories import Memories

        return Memories(self.db)

    @cached_property
    def queue(self) -> ExtractionQueue:
        from co_cli.store.queue import ExtractionQueue

        return ExtractionQueue(self.db)

    @classmethod
    def open(cls, path: Path, *, reads_only: bool = False) -> Store:
        """Open the store; ``reads_only`` opens a database that cannot be written read-only (see ``connect``)."""
        return cls(Database.open(path, reads_only=reads_only))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fork(self, session_id: str, upto_seq: int | None = None, files_root: Path | None = None) -> SessionInfo:
        """Continue a copy of the session (up to message ``upto_seq``) under a new id (``copies.fork``); the
        session's files under ``files_root`` (its offloaded tool outputs, which its transcript names) go with it."""
        from co_cli.store import copies

        info = copies.fork(self.db, session_id, upto_seq)
        if files_root is not None:
            copies.copy_files(Path(files_root) / session_id, Path(files_root) / info.id)
        return info

    def import_session(
        self,
        info: SessionInfo,
        messages: Sequence[StoredMessage],
        compactions: Sequence[CompactionRecord],
        task_lists: Sequence[TaskSnapshot] = (),
    ) -> SessionInfo:
        """Insert a whole session as given (``copies.import_session``)."""
        from co_cli.store import copies

        return copies.import_session(self.db, info, messages, compactions, task_lists)

    @staticmethod
    def sessions_open_elsewhere(path: Path) -> list[str]:
        """Ids of the sessions a running co holds open in the database at ``path``, read from its lock files
        without opening the database (which may be damaged)."""
        from co_cli.store.lockfiles import SessionLocks, lock_directory

        return SessionLocks(lock_directory(Path(path))).held_elsewhere()

    @staticmethod
    def recover(source: Path, target: Path) -> Recovery:
        """Save what can be read of the damaged database at ``source`` into a new one at ``target``
        (``recover.recover``); ``source`` is never written."""
        from co_cli.store import recover

        return recover.recover(source, target)

    @staticmethod
    def install_recovered(recovered: Path, path: Path, stamp: str) -> Path:
        """Put the recovered database in the place of the one at ``path``, which is kept under a new name (returned)."""
        from co_cli.store import recover

        return recover.install(recovered, path, stamp)
