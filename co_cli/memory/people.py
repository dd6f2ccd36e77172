"""Whether the one a fact is about, other than the user, is a person: one focused question per such fact.

A small model reading a whole message says ``about: user`` for most facts about a relative or a colleague, yet
copies whom the fact is about into ``subject``; co takes a subject other than the user that the message names
for another person's (``extract.whose``). A subject is as often a thing: a city ("Based in Porto"), a language,
the user's own project ("Kestrel is a billing service"), and a fact kept about "Porto" is lost to the user. So
each fact that would be kept as someone else's is asked about once more, alone: is that name a person other
than the user, or not a person? The answer's schema allows only those two; nothing here reads the words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.models.structured_answer import ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model

Kind = Literal["person", "not_a_person"]

INSTRUCTIONS = """The user wrote the sentence below to an assistant. Say what the name is in it. "person": a person
other than the user (a colleague, a friend, a relative, named or not). "not_a_person": a place, a thing, a tool,
a language, a team, a project, a company, or the user.

Examples:
Sentence: "Meine Schwester Jana studiert in Wien." Name: "Meine Schwester Jana" -> {"answer": "person"}
Sentence: "Je vis à Nantes depuis peu." Name: "Nantes" -> {"answer": "not_a_person"}
Sentence: "Our app Quill syncs notes to S3." Name: "Quill" -> {"answer": "not_a_person"}
Sentence: "Mi jefe se llama Andrés." Name: "Mi jefe" -> {"answer": "person"}
Sentence: "Я пишу в основном на Kotlin." Name: "Kotlin" -> {"answer": "not_a_person"}
Sentence: "同僚の佐藤さんはいつもEmacsを使う。" Name: "佐藤さん" -> {"answer": "person"}"""


class Named(BaseModel):
    answer: Kind = Field(description="a person other than the user, or not a person")


def question(name: str, quote: str, message: str) -> str:
    """The sentence (as the reading quoted it) and the name asked about."""
    return f'Sentence: "{" ".join(quote.split()) or message}" Name: "{" ".join(name.split())}"'


async def is_person(model: Model, name: str, quote: str, message: str, *, prompted: bool = False) -> bool:
    """Whether ``name``, in the words ``quote`` of ``message``, is a person other than the user."""
    answer = await ask(model, Named, INSTRUCTIONS, question(name, quote, message), prompted=prompted)
    return answer.answer == "person"
