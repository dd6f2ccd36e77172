"""The one way a front end opens a conversation: new, resumed, forked, or brought by a client's history.

The terminal and ``co serve`` both call ``open_conversation``: it builds the run's ``CoDeps`` and the
``Conversation`` with the front end's origin on both (under ``serve`` a command rule never stands in for approval),
attaches memory extraction, and chooses the session, which the recorder creates, holds and writes. A front end
ends a conversation with ``Conversation.close()`` (background work finished, the memory worker drained).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from co_cli.config import Paths, Settings
from co_cli.deps import CoDeps
from co_cli.models import ResolvedModel
from co_cli.session.conversation import Conversation
from co_cli.session.recorder import Recorder, TurnRecord
from co_cli.store import SessionInfo, Store
from co_cli.tools.approval import NON_INTERACTIVE_DENIED_MESSAGE, ApprovalPrompt
from co_cli.tools.mcp.servers import McpServers
from co_cli.vocabulary import SessionOrigin


@dataclass(frozen=True)
class FrontEnd:
    """Who opens the conversation, and how it asks for approval."""

    origin: SessionOrigin
    """Where the conversation runs; saved with the sessions it creates and read by the tools' approval rules."""
    ask_approval: ApprovalPrompt | None = None
    """Asks the user before a tool changes something (None: nobody to ask, and ``denied`` is the model's answer)."""
    approve_all: bool = False
    denied: str = NON_INTERACTIVE_DENIED_MESSAGE
    """What the model is told of a tool that needs approval no one can give."""
    on_memory_change: Callable[[], None] | None = None
    """Called when memory proposals arrive (the terminal's toolbar redraws)."""


@dataclass(frozen=True)
class Opening:
    """Which session the conversation continues (build one with the class methods)."""

    session: SessionInfo | None = None
    """The saved session continued (resumed, or the one a fork copies)."""
    fork: bool = False
    fork_at: int | None = None
    """With ``fork``: the fork holds the messages up to this seq (None: all of them)."""
    force: bool = False
    """Take the resumed session over from another co that has it open."""
    brought: Sequence[tuple[str, str]] | None = None
    """A client's earlier (prompt, answer) turns: a session is created at once and starts with them."""
    title: str = ""
    """The title of a session created at once."""

    @classmethod
    def new(cls) -> Opening:
        """A new conversation; its session is created with the first prompt."""
        return cls()

    @classmethod
    def resumed(cls, session: SessionInfo, *, force: bool = False) -> Opening:
        return cls(session=session, force=force)

    @classmethod
    def forked(cls, session: SessionInfo, at: int | None = None) -> Opening:
        """A copy of ``session`` (up to message ``at``, all of it when None), continued under a new id."""
        return cls(session=session, fork=True, fork_at=at)

    @classmethod
    def brought_by_client(cls, title: str, turns: Sequence[tuple[str, str]] = ()) -> Opening:
        """A session created now, titled ``title``, starting with the client's earlier turns."""
        return cls(brought=list(turns), title=title)


def open_conversation(
    settings: Settings,
    paths: Paths,
    store: Store,
    cwd: Path,
    resolved: ResolvedModel,
    front: FrontEnd,
    opening: Opening,
    mcp: McpServers | None = None,
) -> Conversation:
    """The conversation ``opening`` asks for, holding its session when it has one (SessionBusy when another co
    has it open). Call it once the model is resolved: a fork is made only for a model known to work."""
    deps = CoDeps(settings=settings, paths=paths, cwd=cwd, store=store, origin=front.origin)
    conv = Conversation(
        resolved=resolved,
        deps=deps,
        ask_approval=front.ask_approval,
        approve_all=front.approve_all,
        mcp=mcp,
        origin=front.origin,
        denied=front.denied,
    )
    conv.background.attach_extraction(on_change=front.on_memory_change)
    _choose_session(conv, store, paths, opening)
    return conv


def _choose_session(conv: Conversation, store: Store, paths: Paths, opening: Opening) -> None:
    """Load, fork or create the session ``opening`` names; what was taken is let go if that fails."""
    session = opening.session
    if session is not None and opening.fork:
        from co_cli.session.branches import fork_at

        session = fork_at(store, session.id, opening.fork_at, files_root=paths.tool_outputs)
    try:
        if session is not None:
            if opening.force:
                store.locks.acquire(session.id, force=True)  # load() then finds the session already held here
            conv.load(session)
        elif opening.brought is not None:
            _create_with(conv, store, opening.title, opening.brought)
    except BaseException:
        conv.release()
        raise


def _create_with(conv: Conversation, store: Store, title: str, turns: Sequence[tuple[str, str]]) -> None:
    """Create the session now, with the client's earlier turns as its first ones."""
    session_id = conv.recorder.held.ensure(title)
    if turns:
        seed_turns(conv.recorder, turns)
        conv.load(store.sessions.get(session_id))


def seed_turns(recorder: Recorder, turns: Sequence[tuple[str, str]]) -> None:
    """Save earlier (prompt, answer) turns as the session's next ones, so the session holds the whole
    conversation and the next prompt continues it."""
    for prompt, answer in turns:
        seq = recorder.begin(prompt)
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(prompt)])]
        if answer:
            messages.append(ModelResponse(parts=[TextPart(answer)]))
        recorder.finish(TurnRecord(seq, messages, "ok"))
