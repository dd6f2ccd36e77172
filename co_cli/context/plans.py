"""Whether a sentence read as the next step is one: one focused question per such sentence.

A small model reading a whole message calls many sentences the next step that are not: a greeting that says what
the user is working on, a change said with "now", a one-off request. A wrong next step is quoted under every
later summary as what the user said comes next, and the model answers "what do we do next?" from it. So each
part memory extraction reads as the next step is asked about once more, alone: does it say what the user or
their team will do later (a plan), ask the assistant for something now (a request), or tell something (a fact,
a change, a greeting)? Only "later" keeps it the next step. Asked as "plan, request or statement", the 1.5B
model called 10 of the tuning half's 15 next steps requests; asked when it happens (later, now, or a fact), 4.
Nothing here reads the words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.context.standing import question
from co_cli.models.structured_answer import ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

StepReading = Literal["later", "now", "fact"]

INSTRUCTIONS = """When does the user's sentence happen? "later": it tells what the user or their team will do
later, next, tomorrow or after something else (a plan, the next task), or what someone will do then. "now": it
asks the assistant to do or answer something right now. "fact": it tells how things are or were, what changed,
a habit, a greeting or a reply.

Examples:
"Nach dem Release räumen wir die alten Feature-Flags auf." -> {"answer": "later"}
"Sunucu artık Frankfurt'ta duruyor." -> {"answer": "fact"}
"Lo siguiente es pasar los cron a systemd." -> {"answer": "later"}
"Trim the trailing spaces in this file." -> {"answer": "now"}
"Salut, je reprends le module de facturation aujourd'hui." -> {"answer": "fact"}
"次はログの形式を揃えます。" -> {"answer": "later"}
"Our standup is at nine now." -> {"answer": "fact"}"""


class SortedStep(BaseModel):
    answer: StepReading = Field(description="later (a plan), now (a request), or a fact")


async def sort_step(
    model: Model | str, sentence: str, *, prompted: bool = False, model_settings: ModelSettings | None = None
) -> StepReading:
    """How ``sentence``, read as the next step, reads alone: later (a plan), now (a request), or a fact."""
    prompt = question(sentence, sentence)
    answer = await ask(model, SortedStep, INSTRUCTIONS, prompt, prompted=prompted, model_settings=model_settings)
    return answer.answer
