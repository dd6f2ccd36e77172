"""Whether a sentence read as a rule is one: one focused question per such sentence.

A small model reading a whole message, or summarising a stretch of conversation, calls many one-off requests and
replies rules ("Rename the variable", "Give me three names", "Sounds good, do that"), and a rule kept by mistake
goes with every later request. So each part memory extraction reads as a rule, and each rule a summariser names
before it is pinned, is asked about once more, alone: is it a task for now, a rule for every later answer, or a
fact? The answer's schema allows only those three (asked as two, "every later answer or this one only", the 1.5B
model answered no better than chance on the tuning half; as these three, 32 of 40). Rules are rare, so the
question costs little; nothing here reads the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.models.structured_answer import ProseAnswer, ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

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


async def sort_rule(
    model: Model | str,
    quote: str,
    message: str,
    *,
    prompted: bool = False,
    model_settings: ModelSettings | None = None,
) -> Reading:
    """How the words ``quote`` of ``message``, read as a rule, read alone: a rule, a task for now, or a fact."""
    prompt = question(quote, message)
    answer = await ask(model, Sorted, INSTRUCTIONS, prompt, prompted=prompted, model_settings=model_settings)
    return answer.answer


MAX_QUESTIONS = 5
"""At most this many rules of one summary are asked about; the others are not pinned (a summariser that names
more has read one-off requests as rules)."""


async def confirmed_rules(
    model: Model | str,
    rules: Sequence[str],
    *,
    prompted: bool = False,
    model_settings: ModelSettings | None = None,
) -> tuple[tuple[str, ...], int]:
    """Those of ``rules`` (the user's sentences, each named a rule by a summariser) that read alone as a rule,
    and how many did not: read as a task or a fact, past ``MAX_QUESTIONS``, or not answered (a failed question
    pins nothing; a prose answer is asked once more in prompted JSON)."""
    kept = [rule for rule in rules[:MAX_QUESTIONS] if await _reads_as_rule(model, rule, prompted, model_settings)]
    return tuple(kept), len(rules) - len(kept)


async def _reads_as_rule(model: Model | str, rule: str, prompted: bool, model_settings: ModelSettings | None) -> bool:
    for as_json in dict.fromkeys((prompted, True)):
        try:
            return await sort_rule(model, rule, rule, prompted=as_json, model_settings=model_settings) == "rule"
        except ProseAnswer:
            continue
        except Exception:  # an unconfirmed rule is not pinned; the summary stands
            return False
    return False
