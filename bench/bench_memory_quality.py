"""Memory quality: which facts long-term memory ends up holding after a conversation where facts change, with
co's extraction and with add-only extraction on the same model and messages, in English, German and Spanish.

Run: python bench/bench_memory_quality.py [-m MODEL] [--language en|en-other|de|es|all] [--no-baseline] [--show]
                                           [--forced] [--ask [--memory-form section|plain|in-message ...]]
                                           [--trace START ...]

Three sessions of a user's messages (below, in each language): nine durable facts, four of them changed later
(a move to another city, a new editor, a new reviewer, a slipped deadline), one-off questions and passing
moods, a colleague's habit and two passwords. ``en-other`` has the same structure with other people, tools and
wording (other verbs of change, secrets said in shorthand, names that hold "my"). Each message goes through
co's extraction worker in ``auto`` mode, as after a turn. MODEL is any co model string ('local' for the
embedded model, a provider string, or a name on CO_CLI_BASE_URL's OpenAI-compatible server) or ``scripted``
(the default): a deterministic stand-in that answers each message with the reading a careful model gives (the
user's words, topic keys reused), except that its reading never names the memory a change replaces (small
models leave ``replaces`` empty), and it reports the passwords as facts; asked apart which memory a change makes
out of date, it answers the one shown with the change's topic key. It answers in prose when a tool call is forced
(``--tool-calls``: it calls the tool). The scripted stand-in measures co's side (verification, what replaces
what, recall in the user's language), not how well a model reads: for that, run a real model with -m.

Then one question per fact, in the same language (a fourth session): how many find their fact among the
memories a request is sent, with and without query expansion, and how many of the memories sent hold it.

With --ask, MODEL then answers each question as the first prompt of a fresh ``co chat`` conversation (co's
instructions and tools, the memories co chooses for that question), at temperature 0; an answer is right when it
holds the current fact's words, stale when it gives a superseded value without the new one. --memory-form says
how the memories are shown: ``section`` (co's ``## Memory`` section: intro, ids, labels), ``plain`` (a plain list,
"What you remember about the user:", texts only) or ``in-message`` (that list in the user's message, before the
question, and none in the instructions); several forms are asked in turn. The scripted stand-in answers with
every memory it is shown, in any form: it tests the path, not the wording.

With --trace, every request made for a message beginning with one of the STARTs is printed with the model's
answer (the prompt's first user text after ">>>", the answer after "<<<"): where a fact was lost or a memory
replaced, this shows which question went wrong.

Reported: current facts kept (of 9), superseded facts still active (of 4: a memory with the old value and not
the new one), junk memories (about none of the facts, the colleague or Alice leaving), secrets stored (of 2),
the requests made, and the most requests one message took.
The add-only baseline stores the text of every fact the model reads, as it is (asked for JSON in prompted mode,
so it never fails on a prose answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.profiles import ModelProfile  # noqa: E402
from pydantic_ai.settings import ModelSettings  # noqa: E402

from co_cli.context import plans, standing  # noqa: E402
from co_cli.deps import CoDeps  # noqa: E402
from co_cli.memory import people, supersede  # noqa: E402
from co_cli.memory.extract import ExtractionWorker, read_message  # noqa: E402
from co_cli.memory.inject import (  # noqa: E402
    INTRO,
    MEMORY_FORMS,
    PLAIN_INTRO,
    relevant_memories,
    render_memory_section,
)
from co_cli.memory.instructions_files import project_root  # noqa: E402
from co_cli.models import ModelChoice, ResolvedModel  # noqa: E402
from co_cli.store.db import Database  # noqa: E402
from co_cli.store.memories import Memories, Memory, Subject  # noqa: E402
from co_cli.store.queue import ExtractionQueue  # noqa: E402

PROJECT = "/repo/kestrel"


@dataclass(frozen=True)
class Read:
    """One fact as the scripted stand-in reads it."""

    text: str
    quote: str
    topic: str
    about: str = "user"
    kind: str = "lasting_fact"
    person: str | None = None
    replaces: str | None = None


@dataclass(frozen=True)
class Message:
    text: str
    facts: tuple[Read, ...] = ()


def other(text: str, quote: str, topic: str, person: str) -> Read:
    return Read(text, quote, topic, about="another_person", person=person)


@dataclass(frozen=True)
class Variant:
    """One language's conversation, the words that say each fact, and one question per fact."""

    sessions: tuple[tuple[Message, ...], ...]
    current: dict[str, tuple[str, ...]]
    """the fact -> words that an active memory must all hold"""
    superseded: dict[str, tuple[tuple[str, ...], str]]
    """the old fact -> (its words, the new value): active while a memory says the one without the other"""
    colleague: tuple[str, ...]
    questions: dict[str, str]
    secrets: tuple[str, ...] = ("tulip42", "hunter2")
    known: tuple[tuple[str, ...], ...] = field(default=())
    """further words a memory may hold without being junk (Alice leaving)"""


ENGLISH = Variant(
    sessions=(
        (
            Message("Hi, I'm Sam. I live in Paris and I write mostly Go these days.", (
                Read("My name is Sam", "I'm Sam", "name"), Read("I live in Paris", "I live in Paris", "home_city"),
                Read("I write mostly Go", "I write mostly Go", "main_language"))),
            Message("I'm in a terrible mood today, the build broke again", (
                Read("I'm in a terrible mood today", "terrible mood today", "mood", kind="passing_state"),
                Read("The build broke again", "the build broke again", "build", about="none"))),
            Message("I use vim for everything, and my shell is fish", (
                Read("I use vim for everything", "I use vim for everything", "editor"),
                Read("My shell is fish", "my shell is fish", "shell"))),
            Message("Can you explain how Go channels work?"),
            Message("Alice reviews my pull requests on this project", (
                Read("Alice reviews my pull requests", "Alice reviews my pull requests", "pr_reviewer"),)),
            Message("Our project Kestrel is a billing service in Go, the deadline is March 3", (
                Read("Our project Kestrel is a billing service in Go", "Kestrel is a billing service", "project"),
                Read("The Kestrel deadline is March 3", "the deadline is March 3", "kestrel_deadline"))),
        ),
        (
            Message("What's the difference between a mutex and a channel?"),
            Message("Always write commit messages in the imperative mood please", (
                Read("Always write commit messages in the imperative mood", "write commit messages in the imperative",
                     "commit_style", kind="rule_for_assistant"),)),
            Message("My colleague Bob uses emacs and swears by it", (
                other("My colleague Bob uses emacs", "Bob uses emacs", "editor", "Bob"),)),
            Message("The staging database password is tulip42, keep it handy", (
                Read("The staging database password is tulip42", "password is tulip42", "staging_password"),)),
            Message("Write me a regex for matching ISO dates"),
            Message("Translate 'good morning' into French for me"),
        ),
        (
            Message("I moved to Lyon last month, finally settled", (
                Read("I moved to Lyon last month", "I moved to Lyon", "home_city", kind="change"),)),
            Message("I switched from vim to helix last week", (
                Read("I switched from vim to helix", "switched from vim to helix", "editor", kind="change"),)),
            Message("Alice left the team; Carol reviews my pull requests now", (
                Read("Carol reviews my pull requests now", "Carol reviews my pull requests", "pr_reviewer",
                     kind="change"),
                other("Alice left the team", "Alice left the team", "team_membership", "Alice"))),
            Message("The Kestrel deadline slipped to April 14", (
                Read("The Kestrel deadline is April 14", "slipped to April 14", "kestrel_deadline", kind="change"),)),
            Message("my VPN password is hunter2 if you need it", (
                Read("My VPN password is hunter2", "VPN password is hunter2", "vpn_password"),)),
            Message("How do I profile a Go program for allocations?"),
            Message("Thanks, I'm feeling much better about the release now", (
                Read("I'm feeling much better about the release", "feeling much better", "mood",
                     kind="passing_state"),)),
            Message("Show me an example of a table-driven test in Go"),
        ),
    ),
    current={"name": ("sam",), "city": ("lyon",), "language": ("go",), "editor": ("helix",), "shell": ("fish",),
             "reviewer": ("carol",), "project": ("kestrel", "billing"), "deadline": ("april",),
             "commits": ("imperative",)},
    superseded={"city": (("paris",), "lyon"), "editor": (("vim",), "helix"),
                "reviewer": (("alice", "reviews"), "carol"), "deadline": (("march",), "april")},
    colleague=("bob",),
    known=(("alice",),),
    questions={
        "name": "What's my name again?",
        "city": "What is the weather like where I live?",
        "language": "Which programming language do I mostly write?",
        "editor": "How do I set up my editor for this project?",
        "shell": "Which shell should this install script target for me?",
        "reviewer": "Who should review my pull request?",
        "project": "Remind me what Kestrel is for",
        "deadline": "When is the Kestrel deadline?",
        "commits": "Write a commit message for this change",
    },
)  # fmt: skip

GERMAN = Variant(
    sessions=(
        (
            Message("Hallo, ich bin Sam. Ich wohne in Paris und schreibe zurzeit meistens Go.", (
                Read("Mein Name ist Sam", "ich bin Sam", "name"), Read("Ich wohne in Paris", "Ich wohne in Paris",
                "home_city"), Read("Ich schreibe meistens Go", "schreibe zurzeit meistens Go", "main_language"))),
            Message("Heute habe ich richtig schlechte Laune, der Build ist schon wieder kaputt", (
                Read("Heute habe ich schlechte Laune", "richtig schlechte Laune", "mood", kind="passing_state"),
                Read("Der Build ist kaputt", "der Build ist schon wieder kaputt", "build", about="none"))),
            Message("Ich nutze vim für alles, und meine Shell ist fish", (
                Read("Ich nutze vim für alles", "Ich nutze vim für alles", "editor"),
                Read("Meine Shell ist fish", "meine Shell ist fish", "shell"))),
            Message("Kannst du erklären, wie Channels in Go funktionieren?"),
            Message("Alice reviewt meine Pull Requests in diesem Projekt", (
                Read("Alice reviewt meine Pull Requests", "Alice reviewt meine Pull Requests", "pr_reviewer"),)),
            Message("Unser Projekt Kestrel ist ein Abrechnungsdienst in Go, die Deadline ist der 3. März", (
                Read("Unser Projekt Kestrel ist ein Abrechnungsdienst in Go", "Kestrel ist ein Abrechnungsdienst",
                     "project"),
                Read("Die Kestrel-Deadline ist der 3. März", "die Deadline ist der 3. März", "kestrel_deadline"))),
        ),
        (
            Message("Was ist der Unterschied zwischen einem Mutex und einem Channel?"),
            Message("Schreib Commit-Nachrichten bitte immer im Imperativ", (
                Read("Schreib Commit-Nachrichten immer im Imperativ", "immer im Imperativ", "commit_style",
                     kind="rule_for_assistant"),)),
            Message("Mein Kollege Bob nutzt emacs und schwört darauf", (
                other("Mein Kollege Bob nutzt emacs", "Bob nutzt emacs", "editor", "Bob"),)),
            Message("Das Passwort der Staging-Datenbank ist tulip42, heb es gut auf", (
                Read("Das Passwort der Staging-Datenbank ist tulip42", "Passwort der Staging-Datenbank ist tulip42",
                     "staging_password"),)),
            Message("Schreib mir eine Regex für ISO-Datumsangaben"),
            Message("Übersetze 'guten Morgen' ins Französische"),
        ),
        (
            Message("Ich bin letzten Monat nach Lyon gezogen, endlich angekommen", (
                Read("Ich bin nach Lyon gezogen", "nach Lyon gezogen", "home_city", kind="change"),)),
            Message("Letzte Woche bin ich von vim auf helix umgestiegen", (
                Read("Ich bin von vim auf helix umgestiegen", "von vim auf helix umgestiegen", "editor",
                     kind="change"),)),
            Message("Alice hat das Team verlassen; Carol reviewt jetzt meine Pull Requests", (
                Read("Carol reviewt jetzt meine Pull Requests", "Carol reviewt jetzt meine Pull Requests",
                     "pr_reviewer", kind="change"),
                other("Alice hat das Team verlassen", "Alice hat das Team verlassen", "team_membership", "Alice"))),
            Message("Die Kestrel-Deadline ist auf den 14. April gerutscht", (
                Read("Die Kestrel-Deadline ist der 14. April", "auf den 14. April gerutscht", "kestrel_deadline",
                     kind="change"),)),
            Message("Mein VPN-Passwort ist hunter2, falls du es brauchst", (
                Read("Mein VPN-Passwort ist hunter2", "VPN-Passwort ist hunter2", "vpn_password"),)),
            Message("Wie profiliere ich ein Go-Programm auf Allokationen?"),
            Message("Danke, wegen des Releases geht es mir jetzt viel besser", (
                Read("Es geht mir viel besser", "geht es mir jetzt viel besser", "mood", kind="passing_state"),)),
            Message("Zeig mir ein Beispiel für einen tabellengetriebenen Test in Go"),
        ),
    ),
    current={"name": ("sam",), "city": ("lyon",), "language": ("go",), "editor": ("helix",), "shell": ("fish",),
             "reviewer": ("carol",), "project": ("kestrel", "abrechnungsdienst"), "deadline": ("april",),
             "commits": ("imperativ",)},
    superseded={"city": (("paris",), "lyon"), "editor": (("vim",), "helix"),
                "reviewer": (("alice", "reviewt"), "carol"), "deadline": (("märz",), "april")},
    colleague=("bob",),
    known=(("alice",),),
    questions={
        "name": "Wie war noch mal mein Name?",
        "city": "Wie ist das Wetter da, wo ich wohne?",
        "language": "Welche Programmiersprache schreibe ich meistens?",
        "editor": "Wie richte ich meinen Editor für dieses Projekt ein?",
        "shell": "Für welche Shell soll das Installationsskript sein?",
        "reviewer": "Wer soll meinen Pull Request reviewen?",
        "project": "Erinnere mich, wofür Kestrel da ist",
        "deadline": "Wann ist die Kestrel-Deadline?",
        "commits": "Schreib eine Commit-Nachricht für diese Änderung",
    },
)  # fmt: skip

SPANISH = Variant(
    sessions=(
        (
            Message("Hola, soy Sam. Vivo en París y últimamente escribo sobre todo Go.", (
                Read("Me llamo Sam", "soy Sam", "name"), Read("Vivo en París", "Vivo en París", "home_city"),
                Read("Escribo sobre todo Go", "escribo sobre todo Go", "main_language"))),
            Message("Hoy estoy de un humor terrible, el build se rompió otra vez", (
                Read("Hoy estoy de un humor terrible", "humor terrible", "mood", kind="passing_state"),
                Read("El build se rompió otra vez", "el build se rompió otra vez", "build", about="none"))),
            Message("Uso vim para todo, y mi shell es fish", (
                Read("Uso vim para todo", "Uso vim para todo", "editor"),
                Read("Mi shell es fish", "mi shell es fish", "shell"))),
            Message("¿Me explicas cómo funcionan los channels de Go?"),
            Message("Alice revisa mis pull requests en este proyecto", (
                Read("Alice revisa mis pull requests", "Alice revisa mis pull requests", "pr_reviewer"),)),
            Message("Nuestro proyecto Kestrel es un servicio de facturación en Go, la fecha límite es el 3 de marzo", (
                Read("Nuestro proyecto Kestrel es un servicio de facturación en Go",
                     "Kestrel es un servicio de facturación", "project"),
                Read("La fecha límite de Kestrel es el 3 de marzo", "la fecha límite es el 3 de marzo",
                     "kestrel_deadline"))),
        ),
        (
            Message("¿Cuál es la diferencia entre un mutex y un channel?"),
            Message("Escribe siempre los mensajes de commit en imperativo, por favor", (
                Read("Escribe siempre los mensajes de commit en imperativo",
                     "Escribe siempre los mensajes de commit en imperativo", "commit_style",
                     kind="rule_for_assistant"),)),
            Message("Mi compañero Bob usa emacs y lo defiende a muerte", (
                other("Mi compañero Bob usa emacs", "Bob usa emacs", "editor", "Bob"),)),
            Message("La contraseña de la base de datos de staging es tulip42, tenla a mano", (
                Read("La contraseña de la base de datos de staging es tulip42", "contraseña de la base de datos de "
                     "staging es tulip42", "staging_password"),)),
            Message("Escríbeme una regex para fechas ISO"),
            Message("Traduce 'buenos días' al francés"),
        ),
        (
            Message("Me mudé a Lyon el mes pasado, por fin instalado", (
                Read("Me mudé a Lyon", "Me mudé a Lyon", "home_city", kind="change"),)),
            Message("La semana pasada cambié de vim a helix", (
                Read("Cambié de vim a helix", "cambié de vim a helix", "editor", kind="change"),)),
            Message("Alice dejó el equipo; ahora Carol revisa mis pull requests", (
                Read("Carol revisa mis pull requests", "Carol revisa mis pull requests", "pr_reviewer", kind="change"),
                other("Alice dejó el equipo", "Alice dejó el equipo", "team_membership", "Alice"))),
            Message("La fecha límite de Kestrel se retrasó al 14 de abril", (
                Read("La fecha límite de Kestrel es el 14 de abril", "se retrasó al 14 de abril",
                     "kestrel_deadline", kind="change"),)),
            Message("mi contraseña del VPN es hunter2 por si la necesitas", (
                Read("Mi contraseña del VPN es hunter2", "contraseña del VPN es hunter2", "vpn_password"),)),
            Message("¿Cómo perfilo un programa en Go para ver las asignaciones?"),
            Message("Gracias, ya me siento mucho mejor con el release", (
                Read("Me siento mucho mejor", "me siento mucho mejor", "mood", kind="passing_state"),)),
            Message("Enséñame un ejemplo de test dirigido por tablas en Go"),
        ),
    ),
    current={"name": ("sam",), "city": ("lyon",), "language": ("go",), "editor": ("helix",), "shell": ("fish",),
             "reviewer": ("carol",), "project": ("kestrel", "facturación"), "deadline": ("abril",),
             "commits": ("imperativo",)},
    superseded={"city": (("parís",), "lyon"), "editor": (("vim",), "helix"),
                "reviewer": (("alice", "revisa"), "carol"), "deadline": (("marzo",), "abril")},
    colleague=("bob",),
    known=(("alice",),),
    questions={
        "name": "¿Cómo me llamo?",
        "city": "¿Qué tiempo hace donde vivo?",
        "language": "¿Qué lenguaje escribo sobre todo?",
        "editor": "¿Cómo configuro mi editor para este proyecto?",
        "shell": "¿Para qué shell debe ser el script de instalación?",
        "reviewer": "¿Quién debe revisar mi pull request?",
        "project": "Recuérdame para qué sirve Kestrel",
        "deadline": "¿Cuándo es la fecha límite de Kestrel?",
        "commits": "Escribe un mensaje de commit para este cambio",
    },
)  # fmt: skip

OTHER_WORDING = Variant(
    sessions=(
        (
            Message("Hey there, Priya here. Based in Porto, and Rust is what I mostly write at work.", (
                Read("My name is Priya", "Priya here", "name"), Read("I live in Porto", "Based in Porto", "home_city"),
                Read("I mostly write Rust", "Rust is what I mostly write", "main_language"))),
            Message("Ugh, completely drained this afternoon, CI has been flaky all day", (
                Read("I'm drained this afternoon", "completely drained this afternoon", "mood", kind="passing_state"),
                Read("CI has been flaky all day", "CI has been flaky all day", "ci", about="none"))),
            Message("VS Code is my editor of choice and I run zsh with oh-my-posh", (
                Read("VS Code is my editor of choice", "VS Code is my editor of choice", "editor"),
                Read("I run zsh with oh-my-posh", "I run zsh with oh-my-posh", "shell"))),
            Message("What does the borrow checker actually complain about with two mutable references?"),
            Message("On my-app, Marek does the code reviews", (
                Read("Marek does the code reviews on my-app", "Marek does the code reviews", "pr_reviewer"),)),
            Message("We're building Heron, an ingestion pipeline in Rust; it has to ship by May 20", (
                Read("Heron is an ingestion pipeline in Rust", "Heron, an ingestion pipeline in Rust", "project"),
                Read("Heron has to ship by May 20", "ship by May 20", "heron_deadline"))),
        ),
        (
            Message("How is Arc different from Rc?"),
            Message("Put a conventional prefix like feat: or fix: on every commit message", (
                Read("Put a conventional prefix like feat: or fix: on every commit message",
                     "conventional prefix like feat: or fix: on every commit message", "commit_style",
                     kind="rule_for_assistant"),)),
            Message("Jonas on my team does everything in Kotlin and won't touch Rust", (
                other("Jonas does everything in Kotlin", "Jonas on my team does everything in Kotlin", "main_language",
                      "Jonas"),)),
            Message("office wifi key is marigold77 btw", (
                Read("The office wifi key is marigold77", "office wifi key is marigold77", "wifi_key"),)),
            Message("Give me a jq one-liner that pulls the id field out of each object"),
            Message("Convert 3 miles to kilometres"),
        ),
        (
            Message("Relocated to Turin a few weeks ago, the flat is great", (
                Read("I live in Turin", "Relocated to Turin", "home_city", kind="change"),)),
            Message("Dropped VS Code for Zed, it's much snappier", (
                Read("My editor is Zed", "Dropped VS Code for Zed", "editor", kind="change"),)),
            Message("Marek went on parental leave, so Ines handles reviews on my-app now", (
                Read("Ines handles reviews on my-app", "Ines handles reviews on my-app", "pr_reviewer", kind="change"),
                other("Marek is on parental leave", "Marek went on parental leave", "leave", "Marek"))),
            Message("Heron got pushed back, new date is June 11", (
                Read("Heron has to ship by June 11", "new date is June 11", "heron_deadline", kind="change"),)),
            Message("db pw for staging: copper19", (
                Read("The staging db pw is copper19", "db pw for staging: copper19", "staging_password"),)),
            Message("How would I benchmark a Rust function with criterion?"),
            Message("Cheers, a lot less stressed about Heron now", (
                Read("I'm less stressed about Heron", "a lot less stressed", "mood", kind="passing_state"),)),
            Message("Sketch a minimal axum handler that returns JSON"),
        ),
    ),
    current={"name": ("priya",), "city": ("turin",), "language": ("rust",), "editor": ("zed",), "shell": ("zsh",),
             "reviewer": ("ines",), "project": ("heron", "ingestion"), "deadline": ("june",),
             "commits": ("feat",)},
    superseded={"city": (("porto",), "turin"), "editor": (("vs", "code"), "zed"),
                "reviewer": (("marek", "reviews"), "ines"), "deadline": (("may",), "june")},
    colleague=("jonas",),
    secrets=("marigold77", "copper19"),
    known=(("marek",),),
    questions={
        "name": "Do you remember what I'm called?",
        "city": "Any good day trips from the city I live in?",
        "language": "Which language should code examples for me be in?",
        "editor": "What's a good keybinding setup for my editor?",
        "shell": "Which shell's config file should I add this alias to?",
        "reviewer": "Who do I ask to review my changes on my-app?",
        "project": "What is Heron again?",
        "deadline": "When does Heron need to ship?",
        "commits": "Write the commit message for a new login page",
    },
)  # fmt: skip

VARIANTS = {"en": ENGLISH, "en-other": OTHER_WORDING, "de": GERMAN, "es": SPANISH}


def _has(text: str, needed: Sequence[str]) -> bool:
    found = set(re.findall(r"\w+", text.casefold()))
    return all(w in found for w in needed)


@dataclass
class Recall:
    found: int = 0
    sent: int = 0
    relevant_sent: int = 0


def recall(store: Memories, variant: Variant, expanded: bool, project: str = PROJECT) -> Recall:
    """For each question, whether the memories a request would be sent hold the asked fact, and how many of
    those sent hold it (precision)."""
    import co_cli.memory.expansion as expansion

    saved = expansion.expand
    if not expanded:
        expansion.expand = lambda terms: []
    outcome = Recall()
    try:
        for key, question in variant.questions.items():
            sent = [s.text for s in relevant_memories(store, question, project, 800, time.time())]
            outcome.found += any(_has(t, variant.current[key]) for t in sent)
            outcome.sent += len(sent)
            outcome.relevant_sent += sum(_has(t, variant.current[key]) for t in sent)
    finally:
        expansion.expand = saved
    return outcome


def tracked(variant: Variant) -> list[tuple[str, ...]]:
    """Every word set the bench knows: a memory that holds none of them is junk."""
    return [*variant.current.values(), *(old for old, _ in variant.superseded.values()), variant.colleague,
            *variant.known]  # fmt: skip


@dataclass
class Outcome:
    kept: int = 0
    superseded: int = 0
    junk: int = 0
    secrets: int = 0
    requests: int = 0
    most_per_message: int = 0


def score(variant: Variant, texts: Sequence[str], requests: int, most: int) -> Outcome:
    outcome = Outcome(requests=requests, most_per_message=most)
    outcome.kept = sum(any(_has(t, words) for t in texts) for words in variant.current.values())
    outcome.superseded = sum(
        any(_has(t, old) and not _has(t, (new,)) for t in texts) for old, new in variant.superseded.values()
    )
    outcome.secrets = sum(any(s in t.lower() for t in texts) for s in variant.secrets)
    outcome.junk = sum(not any(_has(t, words) for words in tracked(variant)) for t in texts)
    return outcome


# ----- the scripted stand-in -----


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def scripted_model(variant: Variant, tool_calls: bool = False) -> FunctionModel:
    facts_of = {m.text: m.facts for session in variant.sessions for m in session}
    reads = [read for session in variant.sessions for m in session for read in m.facts]
    topic_of = {read.text: read.topic for read in reads}
    change_topic = {read.quote: read.topic for read in reads if read.kind == "change"}

    def superseded(question: str) -> str:
        """The shown memory with the change's topic key, as a careful model answers, else none."""
        said = question.split('Said: "', 1)[-1].split('"\n', 1)[0]
        for ref, text in re.findall(r"^- (m\d+) \| (.*)$", question, re.MULTILINE):
            if topic_of.get(text) is not None and topic_of.get(text) == change_topic.get(said):
                return ref
        return supersede.NONE

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        message = _prompt(messages).split("<message>\n", 1)[-1].split("\n</message>", 1)[0]
        payload: dict[str, Any] = {"facts": [asdict(f) for f in facts_of.get(message, ())]}
        if standing.INSTRUCTIONS in (info.instructions or ""):  # is a part read as a rule one? the reading says so
            payload = {"answer": "rule"}
        elif plans.INSTRUCTIONS in (info.instructions or ""):  # is a part read as the next step one? it says so
            payload = {"answer": "later"}
        elif people.INSTRUCTIONS in (info.instructions or ""):  # whom a fact is about: a person, as the reading says
            payload = {"answer": "person"}
        elif supersede.INSTRUCTIONS in (info.instructions or ""):  # which memory a change replaces, asked apart
            payload = {"replaces": superseded(_prompt(messages))}
        if info.output_tools and tool_calls:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, payload)])
        if info.output_tools:  # a forced tool call is ignored: the model answers in prose
            return ModelResponse(parts=[TextPart("Here is what I found about the user.")])
        return ModelResponse(parts=[TextPart(json.dumps(payload, ensure_ascii=False))])

    # a server at base_url: co asks it with a forced tool, not a JSON schema (co_cli.models)
    return FunctionModel(answer, profile=ModelProfile(supports_json_schema_output=False))


def _answer(response: ModelResponse) -> str:
    return " ".join(
        part.content if isinstance(part, TextPart) else json.dumps(part.args) if isinstance(part, ToolCallPart) else ""
        for part in response.parts
    )


class Counting:
    """Counts the model's requests per message (wraps the model the worker is given); while ``tracing`` is set,
    prints each request's prompt and the model's answer."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.total = 0
        self.tracing = False

    def wrap(self) -> Model:
        from pydantic_ai.models.wrapper import WrapperModel

        counter = self

        class _Counted(WrapperModel):
            async def request(self, messages, *args, **kwargs):  # type: ignore[no-untyped-def]
                counter.total += 1
                response = await super().request(messages, *args, **kwargs)
                if counter.tracing:
                    print(f"    >>> {_prompt(messages)}\n    <<< {_answer(response)}", flush=True)
                return response

        return _Counted(self.model)


TRACE: tuple[str, ...] = ()
"""The starts of the messages whose requests and answers are printed (``--trace``)."""


def traced(counted: Counting, text: str) -> None:
    counted.tracing = any(text.startswith(start) for start in TRACE)
    if counted.tracing:
        print(f"  --- {text}", flush=True)


async def run_co(model: Model, variant: Variant, work: Path, show: bool = False, project: str = PROJECT) -> Outcome:
    """co's extraction of the variant's conversation into ``work/co.db``, memories filed under ``project``."""
    db = Database.open(work / "co.db")
    store = Memories(db)
    counted = Counting(model)
    wrapped = counted.wrap()
    queue = ExtractionQueue(db)
    queue.RETRY_AFTER = 0.0  # no waiting here: a failed message is retried before the next one
    worker = ExtractionWorker(store, queue, lambda: wrapped, "auto", project)
    most = 0
    seq = 0
    for session in variant.sessions:
        for message in session:
            before = counted.total
            traced(counted, message.text)
            worker.submit(message.text, "bench", seq)
            await worker.drain()
            most = max(most, counted.total - before)
            seq += 2
    worker.start()  # what is left to retry
    await worker.drain()
    kept = store.list()
    replaced = [m for m in store.list(statuses=("deleted",)) if m.replaced_by is not None]
    texts = [m.text for m in kept]
    for expanded in (False, True):
        r = recall(store, variant, expanded, project)
        print(
            f"  recall {'with' if expanded else 'without'} query expansion: {r.found}/{len(variant.questions)} "
            f"questions found their fact; {r.relevant_sent}/{r.sent} memories sent held it"
        )
    db.close()
    if show:
        print("\n".join(f"  {m.ref} [{m.kind}, {m.topic}, {m.whose or 'user'}] {m.text}" for m in kept))
        print("\n".join(f"  {m.ref} replaced by m{m.replaced_by}: {m.text}" for m in replaced))
    return score(variant, texts, counted.total, most)


async def run_add_only(model: Model, variant: Variant, work: Path) -> Outcome:
    db = Database.open(work / "add-only.db")
    store = Memories(db)
    texts: list[str] = []
    counted = Counting(model)
    wrapped = counted.wrap()
    for session in variant.sessions:
        for message in session:
            try:
                reading, _ = await read_message(wrapped, store, message.text, PROJECT, prompted=True)
            except Exception:
                continue
            texts += [f.text for f in reading.facts]
    db.close()
    return score(variant, texts, counted.total, 1)


# ----- message by message, against a careful reader's memories -----

KEEPS: frozenset[str] = frozenset({"lasting_fact", "change", "rule_for_assistant"})
"""The kinds of ``Read`` a careful reader keeps (a next step and a passing state hold for now only)."""


def _subject(read: Read) -> Subject:
    about = {"user": "user", "another_person": "other"}.get(read.about, "none")
    return Subject(read.topic, about, read.person if about == "other" else None)


def careful_keeps(variant: Variant, read: Read) -> bool:
    """Whether a careful reader keeps ``read``: lasting, about someone, and no secret."""
    secret = any(s in read.text.lower() for s in variant.secrets)
    return read.kind in KEEPS and read.about != "none" and not secret


def words_of(variant: Variant, read: Read) -> tuple[str, ...] | None:
    """The words a memory must hold to say ``read``: the longest of the bench's word sets its text holds (the
    project's two words over the language it is written in), or None when it holds none (not scored)."""
    sets = [words for words in tracked(variant) if _has(read.text, words)]
    return max(sets, key=len) if sets else None


@dataclass
class MessageScore:
    """One message read against the memories a careful reader holds before it."""

    text: str
    facts: int = 0
    kept: int = 0
    replacements: int = 0
    replaced: int = 0
    wrong_removals: int = 0
    merged: int = 0
    """memories that hold two of the message's facts (a change to one would take the other with it)"""
    junk: int = 0
    secrets: int = 0
    requests: int = 0
    notes: list[str] = field(default_factory=list)


def seed(store: Memories, variant: Variant, before: Sequence[Message], project: str) -> None:
    """The memories a careful reader holds after ``before``: each fact it keeps, a change replacing the memory of
    the same subject and topic key."""
    for message in before:
        for read in message.facts:
            if not careful_keeps(variant, read):
                continue
            subject = _subject(read)
            kind = "instruction" if read.kind == "rule_for_assistant" else "fact"
            if (old := expected_removal(store, read, project)) is not None:
                store.replace(old.id, read.text, actor="extractor", kind=kind, subject=subject)
            else:
                store.add(read.text, actor="extractor", kind=kind, project=project, subject=subject)


def seed_all(path: Path, variant: Variant, project: str) -> None:
    """A store at ``path`` holding what a careful reader keeps of the whole conversation (``seed``)."""
    db = Database.open(path)
    try:
        seed(Memories(db), variant, [m for session in variant.sessions for m in session], project)
    finally:
        db.close()


def expected_removal(store: Memories, read: Read, project: str) -> Memory | None:
    """The memory a careful reader replaces with ``read``: the one of the same subject and topic key."""
    if read.kind != "change":
        return None
    same = [m for m in store.with_topics([read.topic], project) if m.subject == _subject(read)]
    return same[0] if same else None


async def read_forced(model: Model, variant: Variant, work: Path, project: str = PROJECT) -> list[MessageScore]:
    """Each message read by co's extraction worker alone, against a store holding what a careful reader keeps
    of the messages before it (``seed``), so that a wrong reading costs that message only and does not carry into
    the next. Scored per message: its facts kept (``words_of``), the memories its changes make out of date
    replaced, other memories removed, junk added, secrets stored."""
    known = tracked(variant)
    scores: list[MessageScore] = []
    before: list[Message] = []
    counted = Counting(model)
    wrapped = counted.wrap()
    for n, message in enumerate(m for session in variant.sessions for m in session):
        db = Database.open(work / f"forced-{n}.db")
        store = Memories(db)
        seed(store, variant, before, project)
        active = {m.id: m for m in store.list()}
        removals = {m.id for read in message.facts if careful_keeps(variant, read)
                    and (m := expected_removal(store, read, project)) is not None}  # fmt: skip
        queue = ExtractionQueue(db)
        queue.RETRY_AFTER = 0.0
        worker = ExtractionWorker(store, queue, lambda: wrapped, "auto", project)
        start = counted.total
        traced(counted, message.text)
        worker.submit(message.text, "bench", 2 * n)
        await worker.drain()
        worker.start()  # a failed reading is retried, as co does
        await worker.drain()
        after = store.list()
        added = [m for m in after if m.id not in active]
        gone = set(active) - {m.id for m in after}
        outcome = MessageScore(message.text, requests=counted.total - start)
        for read in message.facts:
            words = words_of(variant, read)
            if not careful_keeps(variant, read) or words is None:
                continue
            outcome.facts += 1
            if any(_has(m.text, words) for m in added):
                outcome.kept += 1
            else:
                outcome.notes.append(f"lost: {read.text}")
        facts = [w for read in message.facts if careful_keeps(variant, read) and (w := words_of(variant, read))]
        merged = [m for m in added if sum(_has(m.text, words) for words in facts) > 1]
        outcome.merged = len(merged)
        outcome.notes += [f"merged: {m.text}" for m in merged]
        outcome.replacements = len(removals)
        outcome.replaced = len(removals & gone)
        outcome.notes += [f"left active: {active[i].text}" for i in removals - gone]
        outcome.wrong_removals = len(gone - removals)
        outcome.notes += [f"removed: {active[i].text}" for i in gone - removals]
        junk = [m for m in added if not any(_has(m.text, words) for words in known)]
        outcome.junk = len(junk)
        outcome.notes += [f"junk: {m.text}" for m in junk]
        outcome.secrets = sum(any(s in m.text.lower() for s in variant.secrets) for m in added)
        outcome.notes += [f"kept: {m.text}" for m in added if m not in junk]
        db.close()
        scores.append(outcome)
        before.append(message)
    return scores


def forced_table(scores: Sequence[MessageScore]) -> str:
    lines = [
        "| message | facts kept | replaced | other removed | merged | junk | secrets | requests |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in scores:
        lines.append(f"| {s.text[:48]} | {s.kept}/{s.facts} | {s.replaced}/{s.replacements} | {s.wrong_removals} | "
                     f"{s.merged} | {s.junk} | {s.secrets} | {s.requests} |")  # fmt: skip
        lines += [f"|   {note[:100]} | | | | | | | |" for note in s.notes if not note.startswith("kept")]
    total = (sum(s.kept for s in scores), sum(s.facts for s in scores), sum(s.replaced for s in scores),
             sum(s.replacements for s in scores), sum(s.wrong_removals for s in scores), sum(s.merged for s in scores),
             sum(s.junk for s in scores), sum(s.secrets for s in scores), sum(s.requests for s in scores))  # fmt: skip
    lines.append("| all messages | {}/{} | {}/{} | {} | {} | {} | {} | {} |".format(*total))
    return "\n".join(lines)


# ----- asking the questions through co's request path -----

FORMS = (*MEMORY_FORMS, "in-message")
"""``section`` and ``plain`` (co_cli.memory.inject.MemoryForm) in the instructions; ``in-message``: the plain
list in the user's message, before the question, and none in the instructions."""
_MEMORY_LINE = re.compile(r"- (?:\[m\d+\] )?(?:\((?:instruction|about [^)]*)\) )?(.*)")


def shown_memories(messages: list[ModelMessage]) -> list[str]:
    """The memory texts the last request shows, in any form (its instructions, then its user message)."""
    request = messages[-1]
    if not isinstance(request, ModelRequest):
        return []
    prompts = [p.content for p in request.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]
    shown: list[str] = []
    inside = False
    for line in "\n".join([request.instructions or "", *prompts]).splitlines():
        if line in (INTRO, PLAIN_INTRO):
            inside = True
        elif inside and (match := _MEMORY_LINE.fullmatch(line)):
            shown.append(match.group(1))
        else:
            inside = False
    return shown


def answer_from_memories(messages: list[ModelMessage]) -> str:
    """The scripted answer: every memory the request shows, whatever its form, or that it knows nothing."""
    shown = shown_memories(messages)
    return f"From what I remember: {'; '.join(shown)}." if shown else "I don't know."


def scripted_answerer() -> FunctionModel:
    """A chat model that answers every question with the memories it is shown (``answer_from_memories``)."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(answer_from_memories(messages))])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield answer_from_memories(messages)

    return FunctionModel(answer, stream_function=stream, model_name="scripted-answers")


_DOT_RC = re.compile(r"\.(\w+)rc\b")


def judge(variant: Variant, key: str, answer: str) -> str:
    """``right`` (the current fact's words), ``stale`` (a superseded value without the new one) or ``wrong``. A
    dot file's name names its program too (".zshrc" answers zsh)."""
    answer = _DOT_RC.sub(r"\1 \g<0>", answer)
    if key in variant.superseded:
        old, new = variant.superseded[key]
        if _has(answer, old) and not _has(answer, (new,)):
            return "stale"
    return "right" if _has(answer, variant.current[key]) else "wrong"


@dataclass
class Answers:
    asked: int = 0
    right: int = 0
    stale: int = 0
    misses: list[tuple[str, str, str]] = field(default_factory=list)
    """(fact, verdict, answer) of each answer that was not right"""


class _Quiet:
    """A TurnView that shows nothing."""

    def working(self, what: str) -> None: ...
    def text(self, delta: str) -> None: ...
    def tool_call(self, name: str, args: object) -> None: ...
    def tool_result(self, name: str, content: object) -> None: ...
    def notice(self, message: str) -> None: ...
    def end(self, interrupted: bool = False) -> None: ...


async def ask(resolved: ResolvedModel, variant: Variant, db_path: Path, cwd: Path, form: str) -> Answers:
    """Each question as the first prompt of a fresh ``co chat`` conversation in ``cwd`` (memories in the store at
    ``db_path``, filed under its project), the memories written in ``form``."""
    import co_cli.memory.inject as inject
    from co_cli.config import load_settings
    from co_cli.deps import CoDeps
    from co_cli.store import Store

    loaded = load_settings(cwd=cwd)
    loaded.paths.ensure_data_dir()
    settings = loaded.settings.model_copy(update={"auto_title": False})  # no title request after each answer
    store = Store.open(db_path)
    answers = Answers()
    saved = inject.FORM
    inject.FORM = "plain" if form == "plain" else "section"
    try:
        for key, question in variant.questions.items():
            deps = CoDeps(settings=settings, paths=loaded.paths, cwd=cwd, store=store)
            reply = await answer_of(resolved, deps, question, form)
            verdict = judge(variant, key, reply)
            answers.asked += 1
            answers.right += verdict == "right"
            answers.stale += verdict == "stale"
            if verdict != "right":
                answers.misses.append((key, verdict, " ".join(reply.split())[:200]))
    finally:
        inject.FORM = saved
        store.close()
    return answers


async def answer_of(resolved: ResolvedModel, deps: CoDeps, question: str, form: str) -> str:
    """The model's answer to ``question`` as a ``co chat`` turn sends it: co's instructions, tools and memories
    for that question (in the user's message before it with ``in-message``), at temperature 0, so that forms are
    compared, not samples."""
    from pydantic_ai import CancellationToken

    from co_cli.session import Conversation

    prompt = question
    if form == "in-message":
        budget = deps.settings.memory_budget_tokens
        chosen = relevant_memories(deps.store.memories, question, deps.project, budget, time.time())
        memories = render_memory_section(chosen, "plain")
        prompt = f"{memories}\n\n{question}" if memories else question
        deps.settings = deps.settings.model_copy(update={"memory_budget_tokens": 0})  # none in the instructions
    conv = Conversation(resolved, deps)
    limits = conv.engine.agent.model_settings  # co's own (time limits): a dict
    conv.engine.agent.model_settings = ModelSettings(**limits if isinstance(limits, dict) else {}, temperature=0.0)
    try:
        outcome = await conv.run_turn(prompt, _Quiet(), CancellationToken())
    finally:
        conv.release()
    return outcome.output if outcome.status == "ok" else f"({outcome.status}: {outcome.error})"


def answers_line(form: str, answers: Answers) -> str:
    misses = "".join(f"\n    {verdict} {key}: {reply}" for key, verdict, reply in answers.misses)
    return f"  answers ({form}): {answers.right}/{answers.asked} right, {answers.stale} gave a superseded value{misses}"


def row(name: str, variant: Variant, o: Outcome) -> str:
    return (
        f"| {name} | {o.kept}/{len(variant.current)} | {o.superseded}/{len(variant.superseded)} | {o.junk} | "
        f"{o.secrets}/{len(variant.secrets)} | {o.requests} | {o.most_per_message} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", default="scripted")
    parser.add_argument("--language", choices=[*VARIANTS, "all"], default="all")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--show", action="store_true", help="print the memories co kept")
    parser.add_argument("--tool-calls", action="store_true", help="the scripted model honours forced tool calls")
    parser.add_argument("--forced", action="store_true",
                        help="read each message alone against a careful reader's memories")  # fmt: skip
    parser.add_argument("--ask", action="store_true",
                        help="then ask MODEL each question through co's requests (with --forced: "
                             "with a careful reader's memories of the whole conversation)")  # fmt: skip
    parser.add_argument("--memory-form", nargs="+", choices=FORMS, default=["section"],
                        help="with --ask: the forms of the memories to ask with (section: co's default)")  # fmt: skip
    parser.add_argument("--trace", nargs="+", default=[], metavar="START",
                        help="print every request and answer for the messages that begin with START")  # fmt: skip
    args = parser.parse_args()
    global TRACE
    TRACE = tuple(args.trace)
    languages = list(VARIANTS) if args.language == "all" else [args.language]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("CO_CLI_DATA_DIR", str(Path(tmp) / "data"))
        os.environ.setdefault("CO_CLI_CONFIG_DIR", str(Path(tmp) / "config"))
        if not args.forced:
            print("| language, extraction | current facts kept | superseded still active | junk | secrets stored "
                  "| requests | most requests for one message |")  # fmt: skip
            print("|---|---|---|---|---|---|---|")
        for language in languages:
            variant = VARIANTS[language]
            work = Path(tmp) / language
            cwd = work / "kestrel"  # the conversation's working directory: its memories' project
            cwd.mkdir(parents=True)
            if args.model == "scripted":
                model: Model = scripted_model(variant, args.tool_calls)
                answerer = ResolvedModel(scripted_answerer(), ModelChoice("scripted", "bench"), 32_768, "bench")
            else:
                from co_cli.config import load_settings
                from co_cli.models import resolve_model

                answerer = resolve_model(load_settings(model=args.model).settings, "command line")
                model = answerer.model
            print(f"{language}:", flush=True)
            if args.forced:
                project = str(project_root(cwd))
                print(forced_table(await read_forced(model, variant, work, project)), flush=True)
                if args.ask:  # the questions asked with a careful reader's memories: how memory is presented
                    careful = work / "careful.db"
                    seed_all(careful, variant, project)
                    for form in args.memory_form:
                        print(answers_line(form, await ask(answerer, variant, careful, cwd, form)), flush=True)
                continue
            outcome = await run_co(model, variant, work, args.show, str(project_root(cwd)))
            print(row(f"{language}, co", variant, outcome), flush=True)
            for form in args.memory_form if args.ask else ():
                print(answers_line(form, await ask(answerer, variant, work / "co.db", cwd, form)), flush=True)
            if not args.no_baseline:
                print(row(f"{language}, add-only", variant, await run_add_only(model, variant, work)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
