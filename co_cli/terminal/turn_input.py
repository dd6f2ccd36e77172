"""The keyboard while turns run: Esc stops the running turn, the approval question takes the keys and gives
them back, and what was typed meanwhile waits for the next prompt."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from co_cli.terminal.render import TerminalView
from co_cli.terminal.terminal_mode import TurnKeys


class TurnInput:
    """One per chat app. ``reading(cancel)`` spans a turn (or a compaction); ``before_question`` and
    ``after_question`` are the approval question's hooks; ``take_typed`` empties what was typed for the prompt."""

    def __init__(self, view: object, *, interactive: bool) -> None:
        self.view = view
        self.interactive = interactive
        self._keys: TurnKeys | None = None
        self._typed = ""

    @contextlib.contextmanager
    def reading(self, cancel: Callable[[], object]) -> Iterator[None]:
        if not self.interactive:
            yield
            return
        keys = self._keys = TurnKeys(on_escape=cancel)
        try:
            with keys.reading():
                yield
        finally:
            self._keys = None
            self._typed += keys.typed

    def take_typed(self) -> str:
        typed, self._typed = self._typed, ""
        return typed

    def before_question(self) -> None:
        if isinstance(self.view, TerminalView):
            self.view.pause()
        if self._keys is not None:
            self._keys.pause()  # the question reads the keys; nothing typed before it may answer it

    def after_question(self, answer: str) -> None:
        if self._keys is not None:
            self._keys.resume()
        if isinstance(self.view, TerminalView):
            self.view.after_question(approved=answer in ("y", "a"))
