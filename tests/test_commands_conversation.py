"""Slash commands about the conversation itself (``terminal/commands/conversation.py``), in process: /help,
/quit and /exit, /new, /clear, /model, /retry, /context and /usage through the app's line runner, over a real
store."""

from __future__ import annotations

import re

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage

from co_cli.message_view import user_text
from co_cli.terminal.commands import HELP_ORDER, commands
from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, core, echo, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

KEYS_HINT = "Enter sends · Esc-Enter or Alt-Enter adds a newline · Ctrl-C cancels a turn · Ctrl-D quits"


def saved(core: Core) -> list[list[tuple[str, str, str]]]:
    """Every saved session, oldest first, as its messages' (kind, status, text)."""
    sessions = sorted(core.store.sessions.list(), key=lambda s: s.created_at)
    return [[(m.kind, m.status, m.text) for m in core.store.messages.transcript(s.id)] for s in sessions]


def test_help_lists_every_command_in_order_with_the_keys(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("/help")
    assert printed.code == 0 and printed.err == ""
    at = printed.lines.index(KEYS_HINT)
    after = " ".join(printed.lines[at + 1 :])
    assert after.startswith("@path sends a file of the working directory with the prompt") and "!command runs" in after
    rows = [line for line in printed.lines[:at] if not line.startswith(" ")]  # a long help wraps, indented
    assert [row.split()[0].rstrip(",") for row in rows] == [f"/{name}" for name in HELP_ORDER]
    assert any(row.startswith("/quit, /exit") and "leave co (Ctrl-D does the same)" in row for row in rows)
    shown = " ".join(" ".join(printed.lines).split())
    for cmd in commands():
        assert " ".join(cmd.help.split()) in shown, cmd.name
    assert saved(core) == []  # nothing was sent to the model, so nothing was saved


@pytest.mark.parametrize("word", ["quit", "exit"])
def test_quit_and_exit_stop_reading_input(core: Core, word: str) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("first", f"/{word}", "never read")
    assert printed.code == 0
    assert printed.lines == ["echo: first"]
    assert saved(core) == [[("user", "ok", "first"), ("assistant", "ok", "echo: first")]]


@pytest.mark.parametrize("word", ["new", "clear"])
def test_new_and_clear_start_a_new_session_and_keep_the_old_one(core: Core, word: str) -> None:
    chat = ChatRun(core, streaming_model(echo))
    printed = chat.send("one", f"/{word}", "two")
    assert printed.code == 0
    assert printed.lines == ["echo: one", "New conversation.", "echo: two"]
    assert saved(core) == [
        [("user", "ok", "one"), ("assistant", "ok", "echo: one")],
        [("user", "ok", "two"), ("assistant", "ok", "echo: two")],
    ]
    assert [user_text(m) for m in chat.conv.working][:1] == ["two"]  # the new context starts from nothing


def test_model_shows_the_model_and_switches_for_this_session(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    printed = chat.send("hello", "/model", "/model test")
    assert printed.code == 0, printed.err
    assert printed.lines[1] == "Model: scripted (test); context window 100,000 (t)"
    assert re.fullmatch(r"Model: test \(model setting \(command line\)\); window [\d,]+", printed.lines[2])
    assert chat.conv.resolved.label == "test"
    assert chat.conv.session is not None and core.store.sessions.get(chat.conv.session.id).model == "test"


def test_model_that_cannot_be_used_is_an_error_and_the_model_stays(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    printed = chat.send("/model nonsense")
    assert printed.code == 1 and printed.out == ""
    assert printed.err.startswith("error: unknown model 'nonsense': use 'provider:model'")
    assert chat.conv.resolved.label == "scripted"


def test_retry_sends_the_failed_prompt_again(core: Core) -> None:
    calls: list[str] = []

    def flaky(messages: list[ModelMessage]) -> str:
        calls.append(user_text(messages[-1]) or "")
        if len(calls) == 1:
            raise ModelHTTPError(status_code=503, model_name="scripted", body="try later")
        return echo(messages)

    chat = ChatRun(core, streaming_model(flaky))
    printed = chat.send("keep this prompt", "/retry")
    assert printed.code == 1  # the first attempt failed
    assert "try later" in printed.err
    assert printed.lines == ["echo: keep this prompt"]
    assert calls == ["keep this prompt", "keep this prompt"]
    assert saved(core) == [
        [
            ("user", "failed", "keep this prompt"),
            ("user", "ok", "keep this prompt"),
            ("assistant", "ok", "echo: keep this prompt"),
        ]
    ]


def test_retry_with_nothing_to_retry_is_an_error(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("/retry")
    assert printed.code == 1 and printed.out == ""
    assert printed.err == "error: nothing to retry yet\n"
    assert saved(core) == []


def test_context_prints_the_report_in_plain_lines(core: Core) -> None:
    printed = ChatRun(core, streaming_model(echo)).send("hello", "/context")
    assert printed.code == 0, printed.err
    assert printed.lines[0] == "echo: hello"
    assert re.match(
        r"Context: [\d,]+ / 100,000 tokens \(\d+\.\d%, (reported|estimated)\); window size: t", printed.lines[1]
    )
    assert "Messages: 2 in context, 2 in transcript; compactions: 0" in printed.lines


def test_usage_shows_the_last_turn_and_the_session_from_the_store(core: Core) -> None:
    chat = ChatRun(core, streaming_model(echo))
    before = chat.send("/usage")
    assert before.lines == ["Last turn: none yet in this run."]
    printed = chat.send("hello", "/usage")
    assert printed.code == 0, printed.err
    assert printed.lines[0] == "echo: hello"
    assert printed.lines[1].startswith("Last turn: 1 request · ") and printed.lines[1].endswith("unknown")
    assert printed.lines[2] == "This session:"
    assert printed.lines[3].startswith("  chat: 1 request · ")
    assert chat.conv.session is not None
    by_role = core.store.usage.by_role(chat.conv.session.id)
    assert list(by_role) == ["chat"] and by_role["chat"].requests == 1
