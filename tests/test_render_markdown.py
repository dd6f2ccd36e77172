"""A model's single line breaks are shown as line breaks, in the live answer and in the resume preview."""

from __future__ import annotations

import io

from rich.console import Console

from co_cli.terminal.app_output import last_exchanges, preview_lines
from co_cli.terminal.render import MarkdownStream
from tests.support.messages import reply, user

HAIKU = "A lone wave, a silent one\nThe sea's unrelenting beauty\nEndless, blue, and deep"


def rendered(answer: str, step: int = 4) -> list[str]:
    out = io.StringIO()
    stream = MarkdownStream(Console(file=out, width=80, force_terminal=False))
    for i in range(0, len(answer), step):
        stream.feed(answer[i : i + step])
    stream.finish()
    return [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]


def test_single_newlines_are_line_breaks() -> None:
    assert rendered(HAIKU) == HAIKU.splitlines()


def test_markdown_still_renders_and_code_keeps_its_lines() -> None:
    lines = rendered("Steps:\nfirst **this**\nthen that\n\n```\nx = 1\ny = 2\n```\n")
    assert lines[:3] == ["Steps:", "first this", "then that"]
    assert any("x = 1" in line for line in lines) and any("y = 2" in line for line in lines)


def test_resume_preview_keeps_line_breaks() -> None:
    pairs = last_exchanges([user("a haiku please"), reply(HAIKU)], 3)
    assert pairs == [("you", "a haiku please"), ("co", HAIKU)]
    assert preview_lines(f"co: {HAIKU}") == ["co: A lone wave, a silent one", *HAIKU.splitlines()[1:]]
    many = "\n".join(f"line {i}" for i in range(20))
    shown = preview_lines(many)
    assert len(shown) == 6 and shown[-1].endswith("…")
