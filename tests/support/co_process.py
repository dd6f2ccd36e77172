"""Run the real ``co`` program: interactively in a pseudo-terminal (pexpect) or as a plain subprocess."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect

REPO_ROOT = Path(__file__).resolve().parents[2]
CO_COMMAND = [sys.executable, "-m", "co_cli"]

PROMPT = "co> "
"""The REPL prompt as the user sees it."""

# Escape sequences a terminal program may emit: CSI (colours, cursor moves), OSC (titles, links), and
# two-character escapes such as ``ESC =`` (keypad mode) or charset selection.
ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>78MDEHc]")
_CSI = r"\x1b\[[0-?]*[ -/]*[@-~]"
_ANSI_GAP = f"(?:{_CSI})*"
_BRACKETED_PASTE_ON = r"\x1b\[\?2004h"


def _prompt_pattern(prompt: str) -> str:
    """A regex for a freshly drawn ``prompt`` (not a redraw of a line being typed or just entered).

    A line editor redraws the prompt with the input after it on every key, so a fresh prompt is one that
    either follows the switch to bracketed-paste mode that starts each prompt_toolkit input (only escape
    sequences in between; a bottom toolbar may follow), or starts a line and is the last thing printed so far
    (a plain ``input()``). Styling codes may sit between the prompt's characters, and its trailing spaces may
    be drawn as cursor moves or not at all.
    """
    shown = _ANSI_GAP.join(re.escape(ch) for ch in prompt.rstrip(" "))
    trailing = r"(?: |\x1b\[\d*C)?" if prompt != prompt.rstrip(" ") else ""
    after_paste_mode_on = f"{_BRACKETED_PASTE_ON}{_ANSI_GAP}{shown}{trailing}"
    last_on_its_line = rf"(?:\A|(?<=[\r\n])){_ANSI_GAP}{shown}{trailing}{_ANSI_GAP}\Z"
    return f"{after_paste_mode_on}|{last_on_its_line}"


PROMPT_PATTERN = re.compile(_prompt_pattern(PROMPT))


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences and carriage returns."""
    return ANSI_RE.sub("", text).replace("\r", "")


def co_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` plus what running ``co`` from a test needs: the repo importable, a real terminal type."""
    result = dict(env)
    result["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    result["TERM"] = "xterm-256color"
    # prompt_toolkit asks the terminal for the cursor position; a pseudo-terminal driven by pexpect never
    # answers, which would delay the first prompt and print a warning.
    result["PROMPT_TOOLKIT_NO_CPR"] = "1"
    return result


def spawn_co(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    dimensions: tuple[int, int] = (40, 120),
    timeout: float = 20,
) -> pexpect.spawn:
    """Start ``co ARGS`` in a pseudo-terminal of ``dimensions`` (rows, columns).

    Everything the program prints is also kept in ``child.logfile_read`` (see ``transcript``).
    """
    child = pexpect.spawn(
        CO_COMMAND[0],
        [*CO_COMMAND[1:], *args],
        env=co_environment(env),
        cwd=str(cwd),
        dimensions=dimensions,
        timeout=timeout,
        encoding="utf-8",
        codec_errors="replace",
    )
    child.logfile_read = io.StringIO()
    return child


def transcript(child: pexpect.spawn) -> str:
    """Everything ``child`` has printed so far, without escape sequences."""
    log = child.logfile_read
    return strip_ansi(log.getvalue()) if isinstance(log, io.StringIO) else ""


def expect_prompt(child: pexpect.spawn, timeout: float | None = None) -> str:
    """Wait for a fresh REPL prompt; return what was printed before it, without escape sequences.

    The text returned starts with the line editor's redraws of the previous input line, then the output.
    """
    child.expect(PROMPT_PATTERN, timeout=-1 if timeout is None else timeout)
    return strip_ansi(child.before or "")


def send_line(child: pexpect.spawn, text: str) -> None:
    """Type ``text`` and press Enter (a carriage return, as a real terminal sends)."""
    child.send(text + "\r")


def ctrl_c(child: pexpect.spawn) -> None:
    child.sendcontrol("c")


def ctrl_d(child: pexpect.spawn) -> None:
    child.sendcontrol("d")


def run_co(
    args: list[str], env: dict[str, str], cwd: Path, input: str | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run ``co ARGS`` to completion without a terminal; ``input`` is piped to stdin (empty if None)."""
    return subprocess.run(
        [*CO_COMMAND, *args],
        env=co_environment(env),
        cwd=cwd,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
