"""The slash-command registry: one table for dispatch, /help and completion."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import to_plain_text

from co_cli.terminal import commands
from co_cli.terminal.prompt import SlashCompleter

REQUIRED = {
    "help", "model", "new", "clear", "quit", "exit", "retry", "compact", "context",
    "sessions", "resume", "fork", "rename", "delete",
}  # fmt: skip


class FakeApp:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.running = True
        self.saving = True
        listed = [SimpleNamespace(id=i, title=f"talk {i}", updated_at=0.0) for i in ("01abc", "01abd")]
        self.store = SimpleNamespace(
            sessions=SimpleNamespace(list=lambda limit: listed, short_ids=lambda ids: {i: i for i in ids})
        )

    def error(self, message: str) -> None:
        self.errors.append(message)


def test_registry_has_every_command_with_help() -> None:
    assert set(commands.REGISTRY) >= REQUIRED
    for cmd in commands.REGISTRY.values():
        assert cmd.help and cmd.name == cmd.name.lower()


def test_parse() -> None:
    assert commands.parse("/compact  keep the API   ") == ("compact", "keep the API")
    assert commands.parse("/HELP") == ("help", "")


def test_unknown_command_is_reported_not_sent() -> None:
    app = FakeApp()
    asyncio.run(commands.dispatch(app, "/nope arg"))  # type: ignore[arg-type]
    assert app.errors and "unknown command /nope" in app.errors[0]


def test_a_mistyped_command_gets_a_did_you_mean() -> None:
    app = FakeApp()
    for line in ("/hepl", "/resum abc", "/zzzz"):
        asyncio.run(commands.dispatch(app, line))  # type: ignore[arg-type]
    assert app.errors == [
        "unknown command /hepl; did you mean /help? /help lists them; nothing was sent to the model",
        "unknown command /resum; did you mean /resume? /help lists them; nothing was sent to the model",
        "unknown command /zzzz; /help lists them; nothing was sent to the model",
    ]


def test_a_command_named_in_a_message_is_shown_without_backticks() -> None:
    from co_cli.terminal.render import message_text, plain_message

    message = "moved it to the trash; `co sessions restore 1a2b3c4d` brings it back"
    shown = message_text(message, "cyan")
    assert shown.plain == "moved it to the trash; co sessions restore 1a2b3c4d brings it back"
    assert any(span.style == "bold" for span in shown.spans)
    assert plain_message(message) == "moved it to the trash; 'co sessions restore 1a2b3c4d' brings it back"


def test_quit_stops_the_loop() -> None:
    app = FakeApp()
    asyncio.run(commands.dispatch(app, "/quit"))  # type: ignore[arg-type]
    assert app.running is False


def completions(text: str) -> list[str]:
    completer = SlashCompleter(FakeApp())  # type: ignore[arg-type]
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]


def test_completion_of_names_and_session_ids() -> None:
    assert completions("/co") == ["/compact", "/context"]
    assert "/help" in completions("/")
    assert completions("/resume 01ab") == ["01abc", "01abd"]
    assert completions("/resume 01abd") == ["01abd"]
    assert completions("hello") == []


def test_session_id_completion_shows_each_sessions_title(tmp_path: Path) -> None:
    from co_cli.store import Store

    with Store.open(tmp_path / "sessions.db") as store:
        made = []
        for title in ("plan the garden", "fix the bike"):
            sid = store.sessions.create(model="test", cwd="/", title=title).id
            store.messages.finish_turn(sid, store.messages.begin_turn(sid, title), [])
            made.append(sid)
        host = SimpleNamespace(saving=True, store=store)
        found = list(SlashCompleter(host).get_completions(Document("/resume "), CompleteEvent()))  # type: ignore[arg-type]
    shown = {c.text: to_plain_text(c.display_meta) for c in found}
    assert shown.keys() == {sid[:8] for sid in made}
    assert shown[made[0][:8]].startswith("plan the garden · ") and shown[made[1][:8]].startswith("fix the bike · ")


def test_each_command_lives_in_the_module_of_its_concern() -> None:
    by_module: dict[str, list[str]] = {}
    for cmd in commands.commands():
        by_module.setdefault(cmd.handler.__module__.rpartition(".")[2], []).append(cmd.name)
    assert by_module == {
        "conversation": ["help", "quit", "new", "clear", "model", "retry", "last", "context", "usage"],
        "compaction": ["compact", "pin", "pins", "unpin", "uncompact"],
        "sessions": ["sessions", "resume", "fork", "rename", "delete", "rewind"],
        "memory": ["memory", "remember", "forget"],
        "tasks": ["tasks"],
        "mcp": ["mcp"],
        "sandbox": ["sandbox"],
    }


def test_help_order_names_every_command_once() -> None:
    assert [cmd.name for cmd in commands.commands()] == list(commands.HELP_ORDER)
    assert commands.names()[:4] == ["help", "quit", "exit", "new"]  # an alias follows its command
