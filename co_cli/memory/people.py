"""Whether the one a fact is about, other than the user, is a person: one focused question per such fact.

A small model reading a whole message says ``about: user`` for most facts about a relative or a colleague, yet
copies whom the fact is about into ``subject``; co takes a subject other than the user that the message names
for another person's (``extract.whose``). A subject is as often a thing: a city ("Based in Porto"), a language,
the user's own project ("Kestrel is a billing service"), and a fact kept about "Porto" is lost to the user. So
each fact that would be kept as someone else's is asked about once more, alone: is that name a person, a
place, a thing or a group? The answer's schema allows only those four (asked as two, "a person other than the
user" or "not a person", the 1.5B model said "not a person" for 8 of the tuning half's 17 people; as these four,
3 of 17, and every place, tool and project named there was not taken for a person); nothing here reads the
words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from co_cli.models.structured_answer import ask

if TYPE_CHECKING:
    from pydantic_ai.models import Model

Kind = Literal["person", "place", "thing", "group"]

INSTRUCTIONS = """The user wrote a sentence to an assistant. Say what the name in it is: "person" (a human: a
colleague, a friend, a relative, anyone called by a name or by who they are to the user), "place" (a city, a
country, a building), "thing" (a tool, a program, a language, a machine, a build) or "group" (a team, a project,
a company).

Examples:
Sentence: "Meine Schwester Jana studiert in Wien." Name: "Meine Schwester Jana" -> {"answer": "person"}
Sentence: "Je vis à Rennes depuis peu." Name: "Rennes" -> {"answer": "place"}
Sentence: "Our app Quill syncs notes to S3." Name: "Quill" -> {"answer": "group"}
Sentence: "Mi jefe Andrés odia Jira." Name: "Andrés" -> {"answer": "person"}
Sentence: "Я пишу в основном на Haskell." Name: "Haskell" -> {"answer": "thing"}
Sentence: "佐藤さんはインフラ担当です。" Name: "佐藤さん" -> {"answer": "person"}"""


class Named(BaseModel):
    answer: Kind = Field(description="what the name is")


def question(name: str, quote: str, message: str) -> str:
    """The sentence (as the reading quoted it) and the name asked about."""
    return f'Sentence: "{" ".join(quote.split()) or message}" Name: "{" ".join(name.split())}"'


async def is_person(model: Model, name: str, quote: str, message: str, *, prompted: bool = False) -> bool:
    """Whether ``name``, in the words ``quote`` of ``message``, is a person other than the user."""
    answer = await ask(model, Named, INSTRUCTIONS, question(name, quote, message), prompted=prompted)
    return answer.answer == "person"
