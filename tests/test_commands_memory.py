"""Memory commands (``terminal/commands/memory.py``), in process: /memory (and /memory review), /remember
and /forget through the app's line runner; what is printed and what the memory store then holds."""

from __future__ import annotations

from typing import Any

import pytest

from co_cli.config import load_settings
from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, core, echo, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def memories(core: Core) -> Any:
    return core.store.memories


def test_remember_keeps_a_memory_and_forget_forgets_it(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    printed = chat.send("hello", "/remember The user prefers tabs over spaces")
    assert printed.code == 0, printed.err
    [kept] = memories(core).list()
    assert (kept.text, kept.kind, kept.status, kept.scope) == (
        "The user prefers tabs over spaces",
        "fact",
        "active",
        "user",
    )
    assert chat.conv.session is not None and kept.source_session == chat.conv.session.id
    assert printed.lines[1] == f"Remembered {kept.ref}: The user prefers tabs over spaces  (/forget {kept.ref})"
    forgot = chat.send(f"/forget {kept.ref}")
    assert forgot.code == 0, forgot.err
    assert forgot.lines == [f"Forgot {kept.ref}: The user prefers tabs over spaces"]
    assert memories(core).list() == [] and memories(core).get(kept.id).status == "deleted"


def test_remember_and_forget_need_their_argument(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("/remember", "/forget  ", "/forget m999")
    assert printed.code == 1 and printed.out == ""
    errors = printed.err.splitlines()
    assert errors[:2] == [
        "error: usage: /remember <text>",
        "error: usage: /forget <id> (e.g. /forget m12; /memory shows them)",
    ]
    assert errors[2].startswith("error: ") and "m999" in errors[2]
    assert memories(core).list() == []


@pytest.mark.parametrize(
    "secret",
    [
        "DB_PASSWORD=hunter2",
        "PGPASSWORD=Tr0ub4dor",
        "client_secret: GOCSPX-abc123",
        "Authorization: Bearer abc123def456g",
    ],
)
def test_remember_refuses_credentials_in_one_line(core: Core, secret: str) -> None:
    printed = ChatRun(core, streaming_model(echo)).send(f"/remember the staging login uses {secret}")
    assert printed.code == 1 and printed.out == ""
    [line] = printed.err.splitlines()
    assert line.startswith("error: not stored: the text looks like a credential") and secret not in line
    assert memories(core).list() == []


def test_memory_shows_counts_instructions_pins_proposals_and_what_was_sent(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    chat.send("hello", "/remember The user prefers tabs", "/pin --remember Never push to main.", "/pin Be brief.")
    proposal = memories(core).review.propose("The user lives in Leeds", proposal="add")
    printed = chat.send("/memory")
    assert printed.code == 0, printed.err
    instruction = next(m for m in memories(core).list() if m.kind == "instruction")
    fact = next(m for m in memories(core).list() if m.kind == "fact")
    assert printed.lines[0] == (
        "Memories: 2 user, 0 this project · 1 to review · 0 forgotten (co memory log, co memory undo)"
    )
    assert printed.out.count("Remembered (/forget <id> forgets one):") == 1  # /memory listed none of them
    assert f"  {instruction.ref} [user, instruction] Never push to main." in printed.lines
    assert f"  {fact.ref} [user, fact] The user prefers tabs" in printed.lines
    assert "Pinned in this session only (/pins, /unpin N):" in printed.lines
    assert "  1. Never push to main." in printed.lines and "  2. Be brief." in printed.lines
    assert f"{proposal.ref}: remember [user, fact] The user lives in Leeds" in printed.lines
    assert "The last request was sent no memories." in printed.lines


def test_memory_takes_only_review(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("/memory everything")
    assert printed.code == 1 and printed.out == ""
    assert printed.err == "error: usage: /memory or /memory review\n"


def test_memory_review_without_a_terminal_is_refused(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    nothing = chat.send("/memory review")
    assert nothing.code == 0 and nothing.lines == ["Nothing to review."]
    memories(core).review.propose("The user lives in Leeds", proposal="add")
    printed = chat.send("/memory review")
    assert printed.code == 1 and printed.out == ""
    assert printed.err == (
        "error: /memory review asks about each proposal: use it in a terminal, or 'co memory review'\n"
    )
    assert [m.status for m in memories(core).review.proposals(None)] == ["proposed"]


def test_memory_review_in_a_terminal_accepts_and_rejects(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ChatRun(core, streaming_model(echo))
    leeds = memories(core).review.propose("The user lives in Leeds", proposal="add")
    tabs = memories(core).review.propose("The user prefers tabs", proposal="add")
    answers = iter(["a", "r"])

    async def ask(question: str) -> str | None:
        return next(answers)

    monkeypatch.setattr(chat.app, "interactive", True)
    monkeypatch.setattr(chat.app, "ask", ask)
    printed = chat.send("/memory review")
    assert printed.code == 0, printed.err
    assert printed.lines[-1] == "1 accepted, 1 rejected, 0 left to review."
    assert f"{leeds.ref}: remember [user, fact] The user lives in Leeds" in printed.lines
    assert memories(core).get(leeds.id).status == "active"
    assert memories(core).get(tabs.id).status == "rejected"


def test_memory_commands_when_memory_is_off(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CO_CLI_MEMORY", "false")
    core.loaded = load_settings(cwd=core.cwd)
    printed = ChatRun(core, streaming_model(echo)).send("/memory", "/remember x", "/forget m1")
    assert printed.code == 1 and printed.out == ""
    assert printed.err == "error: memory is off in this run (--no-memory or the memory setting)\n" * 3
    unsaved_run = ChatRun(core, streaming_model(echo), saved=False)
    unsaved = unsaved_run.send("/remember x")
    unsaved_run.close()
    assert unsaved.err == "error: memory needs saved sessions (not with --no-save)\n"
    assert memories(core).list() == []


def test_editing_a_proposal_starts_from_its_text(core: Core) -> None:
    """The edit of a proposal in /memory review started from an empty line."""
    import asyncio

    from co_cli.memory.review import review

    store = memories(core)
    proposal = store.review.propose("The user writes Go", proposal="add")
    asked: list[tuple[str, str]] = []

    async def ask(question: str, default: str = "") -> str | None:
        asked.append((question, default))
        return "e" if len(asked) == 1 else default + " daily at work"

    assert asyncio.run(review(store, [proposal], ask, lambda line: None)) == (1, 0, 0)
    assert asked[1] == ("new text: ", "The user writes Go")
    assert [m.text for m in store.list()] == ["The user writes Go daily at work"]


def test_memory_log_and_undo_say_what_happened_in_words(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from co_cli.terminal.memory_cli import app

    monkeypatch.chdir(core.cwd)
    store = memories(core)
    kept = store.add("The user's cat is called Tom", actor="user", project="")
    store.forget(kept.ref, actor="user")
    runner = CliRunner()
    log = runner.invoke(app, ["log"])
    assert log.exit_code == 0, log.output
    assert "“The user's cat is called Tom”" in log.output and '"The user' not in log.output  # not Python's repr
    undone = runner.invoke(app, ["undo"])
    assert undone.exit_code == 0, undone.output
    assert undone.output.splitlines()[1:] == [f"  {kept.ref} is back: The user's cat is called Tom"]
    assert undone.output.startswith("Undid change #")
    again = runner.invoke(app, ["undo"])
    assert again.output.splitlines()[1:] == [f"  {kept.ref} is forgotten again: The user's cat is called Tom"]


def test_a_proposal_names_its_session_by_an_id_that_resumes_it(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from co_cli.memory.review import describe

    twins = iter(["abcdef0123" + "0000000001", "abcdef0123" + "0000000002"])
    monkeypatch.setattr("co_cli.store.sessions.new_session_id", lambda now=None: next(twins))
    sid, other = (core.store.sessions.create(model="test", cwd="/", title=t).id for t in ("one", "two"))
    seq = core.store.messages.begin_turn(sid, "I write Go at work every day")
    proposal = memories(core).review.propose("The user writes Go", proposal="add", source_session=sid, source_seq=seq)
    [source] = [line for line in describe(memories(core), proposal) if "from your message" in line]
    shown = source.split("(session ", 1)[1].split(" ", 1)[0]
    assert core.store.sessions.get(shown).id == sid  # its first 8 characters name two sessions
