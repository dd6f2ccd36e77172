"""Text from models, tools and saved sessions made safe to print: no terminal control sequences."""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and C1 controls (ESC starts every terminal escape sequence); the
# bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder the text after
# them on the screen ("Trojan Source").
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` without control characters, so it cannot move the cursor, retitle the window, write the
    clipboard (OSC 52) or show its characters in another order than they are stored when printed."""
    return _CONTROLS.sub("", text)


def printable_line(text: str) -> str:
    """``printable(text)`` on one line: every run of whitespace (newlines, U+2028 and U+2029 included) is one
    space, so text that is one item of a list (a task) cannot start a line that looks like another."""
    return " ".join(printable(text).split())


# Whole escape sequences: CSI (ESC [ or 0x9b … final byte), OSC/DCS/PM/APC/SOS strings (ESC ] … BEL or ST, and
# their C1 forms), and two-character escapes (ESC and one byte).
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    r"|\x1b[\x20-\x7e]?"
)


def without_control_sequences(text: str) -> str:
    """``text`` without terminal escape sequences (removed whole: an OSC 52 clipboard write leaves nothing of
    its payload behind) and without any other control character, tab and newline included."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text)).replace("\t", " ").replace("\n", " ")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun, singular for one: "1 message", "3 messages", "2 entries" (``plural``)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
