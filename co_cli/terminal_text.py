"""Text from models, tools and saved sessions made safe to print (no terminal control sequences), and the words
every printed view shares for counts, tokens and costs."""

from __future__ import annotations

import re
from typing import Protocol

# Format characters (Unicode category Cf, Unicode 14): the bidi controls (U+061C, U+200E/F, U+202A-E,
# U+2066-9), invisible ones (U+00AD, U+200B, U+2060-4, U+FEFF, the tags U+E0000-7F) and the rest. Kept: U+200C
# and U+200D (zero-width non-joiner and joiner), which only decide how neighbouring letters join (Persian and
# Indic words, emoji sequences). A test compares this with the category table.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# C0 controls except tab and newline, DEL, C1 controls (ESC starts every terminal escape sequence) and those.
_CONTROLS = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_FORMAT}]")
# The line and paragraph separators (Zl, Zp): line breaks, printed as one.
_SEPARATORS = str.maketrans({"\u2028": "\n", "\u2029": "\n"})


def printable(text: str) -> str:
    """``text`` without control or format characters, so it cannot move the cursor, retitle the window, write
    the clipboard (OSC 52) or reorder what follows it on its line (bidi controls such as U+202E) when printed.
    Tab and newline stay; a line or paragraph separator becomes a newline."""
    return _CONTROLS.sub("", text).translate(_SEPARATORS)


def one_line(text: str) -> str:
    """``text`` as one line to be read exactly (a command, a path, a name): every character that is not plainly
    visible (controls, newlines and tabs, format and bidi characters, separators and spaces other than ' ', ...)
    is shown as its escape (``\\n``, ``\\u202e``), so nothing can start a new line, reorder the text or hide."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


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
    its payload behind) and without any other control or format character; tabs and line breaks become spaces."""
    return printable(_SEQUENCES.sub("", text)).replace("\t", " ").replace("\n", " ")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun, singular for one: "1 message", "3 messages", "2 entries" (``plural``)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


class Priced(Protocol):
    """Usage totals as the cost line reads them (``store.usage.UsageTotals``)."""

    rows: int
    unpriced: int
    cost_usd: float


def format_cost(totals: Priced | None) -> str:
    """ "$0.0123" when every cost is known; "$0.0123 + unknown" when some are not; "unknown" when none is."""
    if totals is None or totals.rows == 0:
        return "unknown"
    if totals.unpriced == totals.rows:
        return "unknown"
    text = f"${totals.cost_usd:.4f}"
    return text if totals.unpriced == 0 else f"{text} + unknown"


def format_tokens(count: int) -> str:
    """1234 -> "1.2k", 1234567 -> "1.2M"."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"
