"""The terminal's approval question: shows the exact call and reads y / n / a.

Only keys typed after the question is drawn count: input typed earlier (say ``y⏎`` while the model was
still answering) is discarded, so nothing is approved that the user has not seen.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from co_cli.tools.approval import ApprovalRequest

ANSWERS = {"y": "y", "yes": "y", "n": "n", "no": "n", "": "n", "a": "a", "always": "a"}
QUESTION = "  [y]es once / [n]o / [a]lways this command: "


def question_for(request: ApprovalRequest) -> str:
    """The question, naming what "always" allows (a shell command, or one tool of an MCP server)."""
    return QUESTION.replace("this command", request.always_label)


def discard_typeahead(session: PromptSession[str] | None = None) -> None:
    """Drop input typed before now: the terminal's pending input and prompt-toolkit's saved typeahead."""
    try:
        import termios

        if sys.stdin.isatty():
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass
    if session is not None:
        from prompt_toolkit.input.typeahead import clear_typeahead

        clear_typeahead(session.input)


class TerminalApprover:
    """Asks the user about one tool call (an ``ApprovalPrompt``): "y" once, "n" deny, "a" always.

    ``before_asking`` prints what has streamed so far; ``cancel_turn`` stops the turn (Ctrl-C at the
    question). The chat app sets both when it takes the approver."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.before_asking: Callable[[], None] | None = None
        self.cancel_turn: Callable[[], None] | None = None

    async def __call__(self, request: ApprovalRequest) -> str:
        from prompt_toolkit import PromptSession

        from co_cli.tools.approval import describe_call

        if self.before_asking is not None:
            self.before_asking()
        self.console.print(Text(f"Approve {describe_call(request.tool_name, request.args)}?", style="bold yellow"))
        if request.reason:
            self.console.print(Text(f"  ({request.reason})", style="yellow"))
        session: PromptSession[str] = PromptSession()
        discard_typeahead(session)
        while True:
            try:
                answer = (await session.prompt_async(question_for(request))).strip().lower()
            except EOFError:
                return "n"
            except KeyboardInterrupt:  # Ctrl-C at the question cancels the whole turn
                if self.cancel_turn is not None:
                    self.cancel_turn()
                return "n"
            if answer in ANSWERS:
                return ANSWERS[answer]
