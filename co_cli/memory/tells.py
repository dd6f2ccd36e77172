"""Whether a part of a message read as a lasting fact tells one: one focused question per such part.

A small model reading a whole message keeps some parts that tell nothing to remember: a one-off request written as
a statement ("Convert 3 miles to kilometres"), a greeting or thanks, how things are right now. Each is a junk
memory sent with later requests. So each part the reading would keep as a lasting fact is asked about once more,
alone: does it tell something that stays true, ask for something now, make small talk, or say how things are
only now? The answer's schema allows only those four, and only "fact" keeps the part; a change and a rule are not
asked (they have their own checks, and a change lost costs more than a junk memory). Nothing here reads the words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.memory.standing import question
from co_cli.models.structured_answer import ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model

Told = Literal["fact", "task", "chat"]

INSTRUCTIONS = """Classify the user's words. "fact": they tell something about the user, their work, their tools or
people they know (their name, who they are, where they live, what they use, what they are building or working on,
their deadlines and dates, their habits, their past, what is coming up).
"task": they ask the assistant to do, answer or explain one thing now. "chat": a greeting, thanks, a reaction, small
talk.

Examples:
"Translate this paragraph into Italian." -> {"answer": "task"}
"Nos déploiements passent par Buildkite." -> {"answer": "fact"}
"Danke dir, super!" -> {"answer": "chat"}
"Wir entwickeln gerade Lumen, einen Übersetzungsdienst in Go." -> {"answer": "fact"}
"Moi c'est Hélène, je suis SRE." -> {"answer": "fact"}
"Estamos migrando a Postgres 16; tiene que estar listo el 3 de abril." -> {"answer": "fact"}
"Karin aus dem Support spricht Finnisch." -> {"answer": "fact"}
"Before this job I taught maths for six years." -> {"answer": "fact"}
"Ma fille fête ses dix ans en juin." -> {"answer": "fact"}
"Сколько будет 15% от 240?" -> {"answer": "task"}
"娘は大阪の大学に通っています。" -> {"answer": "fact"}
"Hallo zusammen!" -> {"answer": "chat"}"""


class Sorted(BaseModel):
    answer: Told = Field(description="a fact, a task for now, or small talk")


async def sort_fact(model: Model, quote: str, message: str, *, prompted: bool = False) -> Told:
    """How the words ``quote`` of ``message``, read as a lasting fact, read alone."""
    answer = await ask(model, Sorted, INSTRUCTIONS, question(quote, message), prompted=prompted)
    return answer.answer
