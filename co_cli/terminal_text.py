"""Text from models, tools and saved sessions made safe to print: no terminal control sequences."""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and C1 controls (ESC starts every terminal escape sequence).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without control characters, so it cannot move the cursor, retitle the window or write the
    clipboard (OSC 52) when printed."""
    return _CONTROLS.sub("", text)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun, singular for one: "1 message", "3 messages", "2 entries" (``plural``)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
