"""The session store: every conversation saved in one SQLite file."""

from co_cli.store.sessions import (
    CompactionRecord,
    SearchHit,
    SessionBusy,
    SessionInfo,
    SessionStore,
    StoredMessage,
)

__all__ = ["CompactionRecord", "SearchHit", "SessionBusy", "SessionInfo", "SessionStore", "StoredMessage"]
