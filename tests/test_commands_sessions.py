"""Session commands (``terminal/commands/sessions.py``), in process: /sessions, /resume, /fork, /rewind,
/rename and /delete through the app's line runner; what is printed and what the store then holds."""

from __future__ import annotations

import pytest

from co_cli.errors import SessionNotFound
from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, core, echo, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


def texts(core: Core, session_id: str) -> list[tuple[int, str, str]]:
    return [(m.seq, m.kind, m.text) for m in core.store.messages.transcript(session_id)]


def current(chat: ChatRun) -> str:
    assert chat.conv.session is not None
    return chat.conv.session.id


def test_sessions_lists_and_searches_the_saved_sessions(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    empty = chat.send("/sessions")
    assert empty.code == 0 and empty.lines == ["No saved sessions yet."]
    chat.send("the pelican question", "/new", "something else")
    printed = chat.send("/sessions", "/sessions pelican", "/sessions zebra")
    assert printed.code == 0, printed.err
    listing, _, searched = printed.out.partition("Match")
    header = listing.splitlines()[0].split()
    assert header == ["ID", "Updated", "Msgs", "Model", "Title"]
    ids = [s.id for s in core.store.sessions.list()]
    assert len(ids) == 2 and all(session_id in listing for session_id in ids)
    assert "the pelican question" in listing and "something else" in listing
    assert "pelican" in searched and "something else" not in searched
    assert printed.lines[-1] == "No sessions match 'zebra'."


def test_session_commands_without_saving_say_so(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo), saved=False)
    printed = chat.send("hello", *(f"/{word}" for word in ("sessions", "resume x", "fork", "rename t", "delete x")))
    chat.close()
    assert printed.code == 1 and printed.lines == ["echo: hello"]
    assert printed.err == "error: sessions are not being saved (--no-save)\n" * 5
    assert core.store.sessions.list() == []


def test_resume_switches_to_a_saved_session_and_continues_it(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    chat.send("alpha", "/new", "beta")
    alpha = next(s for s in core.store.sessions.list() if s.title == "alpha")
    beta = current(chat)
    printed = chat.send(f"/resume {alpha.id}", "more", f"/resume {alpha.id}")
    assert printed.code == 0, printed.err
    assert printed.lines == ["echo: more", "That is the current session."]
    assert printed.err.splitlines() == [
        f"Resumed {alpha.id} · alpha · 2 messages · model scripted",
        "you: alpha",
        "co: echo: alpha",
    ]
    assert current(chat) == alpha.id
    assert texts(core, alpha.id)[2:] == [(2, "user", "more"), (3, "assistant", "echo: more")]
    assert len(texts(core, beta)) == 2  # the session left behind is unchanged


def test_resume_continues_with_the_sessions_model(core: Core) -> None:
    other = core.store.sessions.create(model="test", cwd=str(core.cwd), title="made with the test model")
    core.store.messages.finish_turn(other.id, core.store.messages.begin_turn(other.id, "hi"), [])
    chat = ChatRun(core, streaming_model(echo))
    printed = chat.send(f"/resume {other.id}")
    assert printed.code == 0, printed.err
    assert chat.conv.resolved.label == "test" and current(chat) == other.id


def test_resume_needs_an_id_without_a_terminal_and_a_known_one(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("/resume", "/resume 0123nosuch")
    assert printed.code == 1 and printed.out == ""
    errors = printed.err.splitlines()
    assert errors[0] == "error: usage: /resume <id or prefix> (the picker needs a terminal; /sessions lists the ids)"
    assert errors[1].startswith("error: ")
    with pytest.raises(SessionNotFound) as missing:
        core.store.sessions.get("0123nosuch")
    assert errors[1] == f"error: {missing.value.message}".replace("`", "'")  # a command between quotes


def test_fork_continues_in_a_copy_and_leaves_the_original(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    nothing = chat.send("/fork")
    assert nothing.err == "error: nothing to fork yet: this conversation has no messages\n"
    chat.send("one", "two")
    original = current(chat)
    printed = chat.send("/fork", "in the fork")
    assert printed.code == 0, printed.err
    forked = current(chat)
    assert printed.lines == [f"Forked {original[:8]} -> {forked}; you are now in the fork.", "echo: in the fork"]
    assert core.store.sessions.get(forked).parent_id == original
    assert [t for _, _, t in texts(core, forked)] == [
        "one", "echo: one", "two", "echo: two", "in the fork", "echo: in the fork",
    ]  # fmt: skip
    assert len(texts(core, original)) == 4


def test_fork_at_a_message_number(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    chat.send("one", "two")
    original = current(chat)
    printed = chat.send("/fork #1", "/fork x")
    assert printed.code == 1
    forked = current(chat)
    assert printed.lines == [f"Forked {original[:8]} at #1 -> {forked}; you are now in the fork."]
    assert printed.err == "error: usage: /fork [n], n a message number as 'co sessions show' prints it (#n)\n"
    assert [t for _, _, t in texts(core, forked)] == ["one", "echo: one"]


def test_rewind_goes_back_before_the_last_prompt_in_a_fork(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    nothing = chat.send("/rewind")
    assert nothing.err == "error: nothing to rewind yet: this conversation has no messages\n"
    chat.send("one", "two")
    original = current(chat)
    printed = chat.send("/rewind", "instead")
    assert printed.code == 0, printed.err
    forked = current(chat)
    assert printed.lines == [
        f"Rewound after message #1: continuing in {forked}; {original[:8]} stays as it was.",
        "echo: instead",
    ]
    assert printed.err.splitlines()[0].startswith(f"Resumed {forked} · ")
    assert [t for _, _, t in texts(core, forked)] == ["one", "echo: one", "instead", "echo: instead"]
    assert [t for _, _, t in texts(core, original)] == ["one", "echo: one", "two", "echo: two"]


def test_rename_renames_this_session(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    before = chat.send("/rename too early")
    assert before.err == "error: nothing to rename yet: this conversation has no messages\n"
    printed = chat.send("hello", "/rename", "/rename   The pelican plan  ")
    assert printed.code == 1
    assert printed.lines == ["echo: hello", "Renamed to: The pelican plan"]
    assert printed.err == "error: usage: /rename <title>\n"
    assert core.store.sessions.get(current(chat)).title == "The pelican plan"


def test_delete_moves_a_session_to_the_trash(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    chat.send("old one", "/new", "current one")
    old = next(s for s in core.store.sessions.list() if s.title == "old one")
    printed = chat.send("/delete", f"/delete {old.id}")
    assert printed.code == 1
    assert printed.err == "error: usage: /delete <id or prefix>\n"
    assert printed.lines == [
        f"Moved {old.id} to the trash. 'co sessions restore {old.id[:8]}' brings it back."
    ]  # piped: nobody to ask, so the answer is yes
    assert [info.id for info, _ in core.store.trash.list()] == [old.id]
    assert [s.title for s in core.store.sessions.list()] == ["current one"]


def test_delete_of_the_current_session_starts_a_new_one(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    chat.send("doomed")
    doomed = current(chat)
    printed = chat.send(f"/delete {doomed}", "fresh")
    assert printed.code == 0, printed.err
    assert printed.lines[0] == (
        f"Moved {doomed} to the trash. Started a new conversation. 'co sessions restore {doomed[:8]}' brings it back."
    )
    assert current(chat) != doomed and [s.title for s in core.store.sessions.list()] == ["fresh"]


def test_delete_answered_no_keeps_the_session(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ChatRun(core, streaming_model(echo))
    chat.send("keep me")
    asked: list[str] = []

    async def confirm(question: str) -> bool:
        asked.append(question)
        return False

    monkeypatch.setattr(chat.app, "confirm", confirm)
    printed = chat.send(f"/delete {current(chat)}")
    assert printed.lines == ["Not deleted."]
    assert asked == [f"Move {current(chat)} (keep me) to the trash?"]
    assert core.store.trash.list() == [] and [s.title for s in core.store.sessions.list()] == ["keep me"]


def test_resume_after_a_compaction_recaps_the_transcript_and_counts_the_compactions_in_force(core: Core) -> None:
    """The recap was read from the working context (a summary after /compact, so nothing was shown), and the
    count included an undone compaction."""
    from tests.support.compaction_turns import three_turns

    chat, session_id = three_turns(core)
    assert chat.send("/compact", "/uncompact", "/compact", "/new").code == 0
    printed = chat.send(f"/resume {session_id[:8]}")
    assert printed.code == 0, printed.err
    resumed, *recap = printed.err.splitlines()
    assert resumed.startswith(f"Resumed {session_id} · turn 0 with padding words")
    assert resumed.endswith(" · 6 messages · 1 compaction · model scripted")
    assert len(recap) == 6 and recap[0].startswith("you: turn 0 ") and recap[-1].startswith("co: ")
    assert recap[-2].startswith("you: turn 2 ")
