"""Whether a part of a message read as a rule is one: one focused question per such part.

A small model reading a whole message calls many one-off requests rules ("Rename the variable", "Give me three
names"), and a rule kept by mistake goes with every later request. So each part the reading calls a rule is
asked about once more, alone: is it a task for now, a rule for every later answer, or a fact? The answer's schema
allows only those three (asked as two, "every later answer or this one only", the 1.5B model answered no better
than chance on the tuning half; as these three, 32 of 40). Rules are rare, so the question costs little; nothing
here reads the words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.models.structured_answer import ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model

Reading = Literal["task", "rule", "fact"]

INSTRUCTIONS = """Classify the user's sentence. "task": it asks for one thing to be done or answered now. "rule": it
says how all later answers must be, from now on. "fact": it tells something about the user or their work.

Examples:
"Add the new flag to the changelog." -> {"answer": "task"}
"Réponds-moi toujours en tutoyant." -> {"answer": "rule"}
"Schreib mir ein Gedicht über den Herbst." -> {"answer": "task"}
"Benenne Variablen künftig auf Englisch." -> {"answer": "rule"}
"Enséñame el log completo de ayer." -> {"answer": "task"}
"Wir deployen jeden Montag." -> {"answer": "fact"}
"これからは敬語を使わないで。" -> {"answer": "rule"}"""


class Sorted(BaseModel):
    answer: Reading = Field(description="a task for now, a rule for every later answer, or a fact")


def question(quote: str, message: str) -> str:
    """The words asked about: the sentence of the message that holds them (as the reading quoted it)."""
    return f'"{" ".join(quote.split()) or message}"'


async def sort_rule(model: Model, quote: str, message: str, *, prompted: bool = False) -> Reading:
    """How the words ``quote`` of ``message``, read as a rule, read alone: a rule, a task for now, or a fact."""
    answer = await ask(model, Sorted, INSTRUCTIONS, question(quote, message), prompted=prompted)
    return answer.answer
