"""prompt-toolkit input: persisted history, slash-command completion, multi-line keys, bottom toolbar.

It knows the app only as a ``CommandHost`` (what a command's completer reads) and a toolbar callback, so the
app imports the prompt and not the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from co_cli.terminal.commands import REGISTRY, names
from co_cli.terminal_text import printable

if TYPE_CHECKING:
    from co_cli.terminal.commands import CommandHost

PROMPT = "co> "


MENTION_AT_CURSOR = re.compile(r"(?<!\S)@((?:[^\s\\]|\\ )*)$")
"""An ``@path`` being typed: from the ``@`` that starts a word to the cursor (a space in it written ``\\ ``)."""


class SlashCompleter(Completer):
    """Completes /command names, then the command's own arguments (e.g. session ids); and with Tab, an
    ``@path`` anywhere in a prompt (inside the working directory)."""

    def __init__(self, host: CommandHost) -> None:
        self.host = host

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        mention = MENTION_AT_CURSOR.search(text)
        if mention is not None and complete_event.completion_requested:
            yield from self._paths(mention.group(1))
            return
        if not text.startswith("/") or "\n" in text:
            return
        name, sep, arg = text[1:].partition(" ")
        if not sep:
            for key in names():
                if key.startswith(name.lower()):
                    yield Completion("/" + key, start_position=-len(text), display_meta=REGISTRY[key].help)
            return
        wanted = REGISTRY.get(name.lower())
        if wanted is None or wanted.complete is None:
            return
        for item in wanted.complete(self.host):
            value, meta = item if isinstance(item, tuple) else (item, "")
            if value.startswith(arg):
                yield Completion(value, start_position=-len(arg), display_meta=printable(meta) or None)

    def _paths(self, typed: str) -> Iterable[Completion]:
        """The paths ``read_file`` reads unasked (inside the working directory, none of co's own files). Not
        while the conversation is being built: its thread is importing the tools' libraries."""
        try:
            cwd = self.host.conv.workspace.cwd.resolve()
        except AssertionError:
            return
        from co_cli.config import OwnFiles
        from co_cli.tools.files import path_completions

        own = OwnFiles.of(self.host.loaded.paths, self.host.loaded.settings)
        for path in path_completions(cwd, own, typed.replace("\\ ", " ")):
            yield Completion(path.replace(" ", "\\ "), start_position=-len(typed), display=path)


def key_bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return kb


def make_session(host: CommandHost, history_file: Path, toolbar: Callable[[], str]) -> PromptSession[str]:
    history_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    history_file.touch(mode=0o600, exist_ok=True)
    return PromptSession(
        history=FileHistory(str(history_file)),
        completer=SlashCompleter(host),
        complete_while_typing=True,
        key_bindings=key_bindings(),
        bottom_toolbar=lambda: HTML(toolbar()),
        enable_history_search=False,
    )


def hand_over_typeahead(session: PromptSession[str], typed: str) -> None:
    """Give the next prompt the keys typed while the last turn ran, as if typed at it."""
    if not typed:
        return
    from prompt_toolkit.input.typeahead import store_typeahead
    from prompt_toolkit.input.vt100_parser import Vt100Parser
    from prompt_toolkit.key_binding import KeyPress

    keys: list[KeyPress] = []
    parser = Vt100Parser(keys.append)
    parser.feed(typed)
    parser.flush()
    store_typeahead(session.input, keys)
