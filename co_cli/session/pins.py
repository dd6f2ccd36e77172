"""The session's pins: standing instructions kept verbatim in every request's instructions, so no compaction
can drop them. Numbered from 1 as ``/pins`` lists them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from co_cli.context.boundaries import latest_request
from co_cli.deps import Pin, PinSource, SessionState
from co_cli.errors import CoError
from co_cli.session.recorder import Recorder
from co_cli.text_tokens import estimate_text_tokens

MAX_PIN_CHARS = 2_000
"""A pin is a rule, not a document: longer text belongs in AGENTS.md or a file the model reads."""
PINS_WINDOW_SHARE = 0.1
"""All pins together take at most this share of the context window (they ride in every request)."""


def normalize_pin(text: str) -> str:
    return " ".join(text.split())


class Pins:
    def __init__(
        self,
        state: SessionState,
        recorder: Recorder,
        on_change: Callable[[], None],
        context_window: Callable[[], int],
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.on_change = on_change
        """Called when the pins change (the instructions every request carries changed)."""
        self.context_window = context_window
        self.offered: list[Pin] = []
        """The pins the latest compaction found in the user's messages (``/unpin`` alone removes them)."""

    def __iter__(self) -> Iterator[Pin]:
        return iter(self.state.pins)

    def __len__(self) -> int:
        return len(self.state.pins)

    def all(self) -> list[Pin]:
        return list(self.state.pins)

    def is_new(self, text: str) -> bool:
        """Whether ``text`` would make a new pin (not empty, not pinned already)."""
        text = normalize_pin(text)
        return bool(text) and all(pin.text != text for pin in self.state.pins)

    def add(self, text: str, source: PinSource = "user") -> Pin | None:
        """Pin a standing instruction for the rest of the session (None when it is already pinned)."""
        text = normalize_pin(text)
        if not self.is_new(text):
            return None
        self._check_size(text)
        pin = Pin(self.recorder.pin(text, source), text, source)
        self.set([*self.state.pins, pin])
        return pin

    def _check_size(self, text: str) -> None:
        """CoError when ``text`` is too long for a pin, or would take the pins past their share of the window."""
        if len(text) > MAX_PIN_CHARS:
            raise CoError(
                f"a pin holds at most {MAX_PIN_CHARS:,} characters (this one has {len(text):,}); pin the rule "
                "itself, and keep longer text in AGENTS.md"
            )
        budget = int(self.context_window() * PINS_WINDOW_SHARE)
        total = sum(estimate_text_tokens(pin.text) for pin in self.state.pins) + estimate_text_tokens(text)
        if total > budget:
            raise CoError(
                f"pins would take ~{total:,} tokens of every request, more than a tenth of the "
                f"{self.context_window():,}-token window; /unpin one first"
            )

    def adopt(self, found: Sequence[tuple[str, PinSource]], ids: Sequence[int]) -> list[Pin]:
        """Take in pins the recorder has already saved (found by a compaction), with their ids; they are the
        ones offered, which ``undo_offered`` removes."""
        pins = [Pin(pin_id, text, source) for (text, source), pin_id in zip(found, ids, strict=True)]
        if pins:
            self.set([*self.state.pins, *pins])
            self.offered = pins
        return pins

    def offered_notice(self, pins: Sequence[Pin]) -> str:
        """The lines that show pins a compaction found, numbered as ``/pins`` lists them, and how to undo them."""
        numbers = {pin.id: number for number, pin in enumerate(self.state.pins, 1)}
        one = len(pins) == 1
        noun, it = ("a standing instruction", "it") if one else (f"{len(pins)} standing instructions", "them")
        lines = [f"Pinned {noun} you stated (every request carries {it}; /unpin undoes this):"]
        lines += [f"  #{numbers.get(pin.id, '?')} {pin.text}" for pin in pins]
        return "\n".join(lines)

    def undo_offered(self) -> list[Pin]:
        """Remove the pins the latest compaction offered that are still pinned; returns them."""
        ids = {pin.id for pin in self.offered}
        removed = [pin for pin in self.state.pins if pin.id in ids]
        for pin in removed:
            self.recorder.unpin(pin.id)
        if removed:
            self.set([pin for pin in self.state.pins if pin.id not in ids])
        self.offered = []
        return removed

    def new_ones(self, texts: Sequence[str], source: PinSource) -> list[tuple[str, PinSource]]:
        """The texts that would make new pins, normalised and without repeats."""
        chosen: list[tuple[str, PinSource]] = []
        for text in texts:
            text = normalize_pin(text)
            if self.is_new(text) and all(text != t for t, _ in chosen):
                chosen.append((text, source))
        return chosen

    def remove(self, number: int) -> Pin:
        """Remove pin ``number`` (1-based, as /pins lists them)."""
        pins = self.state.pins
        if not 1 <= number <= len(pins):
            raise CoError(f"no pin {number}: /pins lists {len(pins)}")
        pin = pins[number - 1]
        self.recorder.unpin(pin.id)
        self.set([p for p in pins if p is not pin])
        return pin

    def set(self, pins: list[Pin], *, notify: bool = True) -> None:
        self.state.pins = pins
        if notify:
            self.on_change()

    def last_user_text(self) -> str | None:
        """What the user typed last (for /pin with no text)."""
        found = latest_request(self.state.context.messages)
        return found[1] if found else self.state.last_prompt
