"""Whether a part of a message read as a rule holds for every later answer: one focused question per such part.

A small model reading a whole message calls many one-off requests rules ("Rename the variable", "Give me three
names"), and a rule kept by mistake goes with every later request. So each part the reading calls a rule is
asked about once more, alone: does it hold for every later answer, or for this answer only? The answer's schema
allows only those two. Rules are rare, so the question costs little; nothing here reads the words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.models.structured_answer import ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model

Scope = Literal["every_later_answer", "this_answer_only"]

INSTRUCTIONS = """A user wrote a message to an assistant. Say whether the quoted words tell the assistant how to
answer or work in EVERY later answer (a standing rule, kept from now on), or ask for something in THIS answer
only (a task, a question, a wish for one reply).

Examples:
"Réponds-moi toujours en tutoyant." -> {"holds_for": "every_later_answer"}
"Add the new flag to the changelog." -> {"holds_for": "this_answer_only"}
"Benenne Variablen künftig auf Englisch." -> {"holds_for": "every_later_answer"}
"Schreib mir ein Gedicht über den Herbst." -> {"holds_for": "this_answer_only"}
"これからは敬語を使わないで。" -> {"holds_for": "every_later_answer"}
"Enséñame el log completo de ayer." -> {"holds_for": "this_answer_only"}"""


class RuleScope(BaseModel):
    holds_for: Scope = Field(description="every later answer (a standing rule), or this answer only")


def question(quote: str, message: str) -> str:
    if " ".join(quote.split()) == " ".join(message.split()):
        return f'"{message}"'
    return f'The message: "{message}"\nThe words: "{quote}"'


async def holds_later(model: Model, quote: str, message: str, *, prompted: bool = False) -> bool:
    """Whether the words ``quote`` of ``message`` hold for every later answer, as the model answers."""
    answer = await ask(model, RuleScope, INSTRUCTIONS, question(quote, message), prompted=prompted)
    return answer.holds_for == "every_later_answer"
