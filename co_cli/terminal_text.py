"""Text from models, tools and saved sessions made safe to print: no terminal control sequences."""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and C1 controls (ESC starts every terminal escape sequence).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without control characters, so it cannot move the cursor, retitle the window or write the
    clipboard (OSC 52) when printed."""
    return _CONTROLS.sub("", text)


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
