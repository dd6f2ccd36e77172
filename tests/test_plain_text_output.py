"""What co prints that came from a user, a model, a tool or a file is plain text: never rich markup, never a
terminal control sequence, in a terminal (rich) as in a pipe."""

from __future__ import annotations

import asyncio
import io

import pytest
from rich.console import Console

from co_cli.terminal.app import ChatApp
from tests.support.turn_core import Core, core, echo, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests

HOSTILE = [
    "Never edit files under [/etc]",
    "keep [bold]this[/bold] and [/x] and [link=file:///etc/passwd]that[/link]",
    "a closing tag alone [/]",
    "escapes \x1b]52;c;c2VjcmV0\x07 and \x1b[2J and \x9b31m stay out",
]


def terminal_app(core: Core) -> tuple[ChatApp, io.StringIO]:
    conv = core.conversation(streaming_model(echo))
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200, color_system=None, highlight=False)
    app = ChatApp(conv, core.loaded, choice=conv.resolved.choice, store=core.store, interactive=True, console=console)
    return app, screen


@pytest.mark.parametrize("text", HOSTILE)
def test_a_pin_with_markup_or_escapes_is_shown_as_typed(core: Core, text: str) -> None:
    app, screen = terminal_app(core)

    async def session() -> None:
        await app.handle(f"/pin {text}")
        await app.handle("/compact show")
        await app.handle("/pins")

    asyncio.run(session())
    shown = screen.getvalue()
    typed = text.replace("\x1b]52;c;c2VjcmV0\x07", "]52;c;c2VjcmV0").replace("\x1b[2J", "[2J").replace("\x9b", "")
    assert app.running and app.errors == 0
    assert f"1. {typed}" in shown  # /compact show lists the pins verbatim
    assert "\x1b]52" not in shown and "\x07" not in shown and "\x9b" not in shown


@pytest.mark.parametrize("text", HOSTILE)
def test_any_string_the_app_shows_is_plain(core: Core, text: str) -> None:
    app, screen = terminal_app(core)
    app.show(text)
    assert "\x1b]52" not in screen.getvalue() and "\x07" not in screen.getvalue()
    assert "[/etc]" in screen.getvalue() or "[/etc]" not in text


def test_memory_overview_shows_memories_and_pins_without_escapes(core: Core) -> None:
    app, screen = terminal_app(core)
    memories = app.conv.workspace.memories
    assert memories is not None
    memories.add("Deploys go through [bold]ci[/bold] \x1b]0;owned\x07 only", actor="user", kind="instruction")

    async def session() -> None:
        await app.handle("/pin keep [/x] as typed \x1b[31m")
        await app.handle("/memory")

    asyncio.run(session())
    shown = screen.getvalue()
    assert app.errors == 0
    assert "Deploys go through [bold]ci[/bold] only" in shown  # the memory was stored without the sequence
    assert "1. keep [/x] as typed [31m" in shown
    assert "\x1b]0" not in shown and "\x07" not in shown
