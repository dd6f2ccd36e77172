"""What memory extraction costs, said once per user: the line the first extraction shows."""

from __future__ import annotations

import contextlib
from pathlib import Path

COST_TOLD_FILE = "memory-extraction-cost-told"
"""In co's data directory: its presence says the user was told what memory extraction costs."""


def extraction_cost_notice(data_dir: Path, model_name: str) -> str | None:
    """The line that says what memory extraction costs and how to turn it off, the first time it runs for this
    user (remembered in ``data_dir``); None every later time."""
    told = data_dir / COST_TOLD_FILE
    if told.exists():
        return None
    with contextlib.suppress(OSError):  # if it cannot be remembered, it is told again next time
        told.write_text("told\n")
    return (
        f"Memory: after each answer co sends one more request, to {model_name}, to find facts worth remembering "
        'in your message. To turn that off: memory_extract "off" in your settings (CO_CLI_MEMORY_EXTRACT=off), '
        "or --no-memory for one run."
    )
