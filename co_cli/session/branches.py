"""Branching a conversation: ``--fork``/``--fork-at``, the picker's fork, ``/fork [n]`` and ``/rewind [n]`` all
continue in a copy made by ``fork_at``; the original session is never changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from co_cli.deps import SessionState
from co_cli.session.rebuild import check_fork_point, rewind_point
from co_cli.store import SessionInfo, Store


def fork_at(
    store: Store,
    session_id: str,
    upto_seq: int | None = None,
    *,
    files_root: Path | None,
    checked: bool = False,
) -> SessionInfo:
    """A copy of the session up to message ``upto_seq`` (all of it when None), under a new id, with its
    offloaded tool outputs (``files_root``: ``Paths.tool_outputs``), which its transcript refers to.

    ``upto_seq`` must be a point where the conversation can go on (CoError otherwise, naming the nearest
    ones); ``checked`` when the caller has made sure of that already."""
    if upto_seq is not None and not checked:
        check_fork_point(store.messages.outline(session_id), upto_seq)
    return store.fork(session_id, upto_seq, files_root=files_root)


class Branches:
    def __init__(
        self, store: Store, state: SessionState, load: Callable[[SessionInfo], None], files_root: Path
    ) -> None:
        self.store = store
        self.files_root = files_root
        self.state = state
        self.load = load
        """Continues the live conversation in a session."""

    def fork(self, upto_seq: int | None = None) -> SessionInfo | None:
        """Continue in a copy of the current session (up to message ``upto_seq``); None before the first
        prompt (nothing to copy)."""
        if self.state.info is None:
            return None
        return self._continue_in(fork_at(self.store, self.state.info.id, upto_seq, files_root=self.files_root))

    def rewind(self, upto_seq: int | None = None) -> SessionInfo | None:
        """Go back to message ``upto_seq`` (default: before the last prompt) in a fork; the original stays."""
        if self.state.info is None:
            return None
        session_id = self.state.info.id
        point = rewind_point(self.store.messages.outline(session_id), upto_seq)
        return self._continue_in(fork_at(self.store, session_id, point, files_root=self.files_root, checked=True))

    def _continue_in(self, forked: SessionInfo) -> SessionInfo:
        self.load(forked)
        return forked
