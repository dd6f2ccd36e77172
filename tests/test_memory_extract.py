"""Automatic extraction with FunctionModel answering the typed reading: what is kept, what replaces what, in
several languages; what is dropped; the fallback that only suggests; the background worker and its queue."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from co_cli.config import Settings
from co_cli.context import plans, standing
from co_cli.memory import people, revise
from co_cli.memory.extract import (
    ExtractionWorker,
    Fact,
    Reading,
    extract_changes,
    new_value_for,
    plan,
    suggestions,
    topic_key,
    whom_named,
    whose,
    worth_extracting,
)
from co_cli.memory.inject import relevant_memories, render_memory_section
from co_cli.memory.review import describe
from co_cli.models import ModelChoice, build_model
from co_cli.store.memories import Memories, Memory, Subject
from co_cli.store.queue import ExtractionQueue
from tests.support.scripted_server import ScriptedServer, Text

pytestmark = pytest.mark.allow_model_requests
PROJECT = "/repo/one"
USER = Subject(about="user")
TOOL_ONLY = ModelProfile(supports_json_schema_output=False)
"""A model asked with a forced output tool (a server co cannot name), not a JSON schema."""


def fact(text: str, quote: str | None = None, **fields: Any) -> dict[str, Any]:
    """One fact of a reading, as a model answers it (about the user, a fact, replacing nothing, by default)."""
    return {"text": text, "quote": quote if quote is not None else text, "about": "user", "person": None,
            "topic": "misc", "kind": "lasting_fact", "replaces": None, **fields}  # fmt: skip


def _prompt_of(messages: list[ModelMessage]) -> str:
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def reply(info: AgentInfo, payload: dict[str, Any]) -> ModelResponse:
    """``payload`` as the structured answer asked for: the output tool's call, or the JSON text (native output)."""
    if info.output_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, payload)])
    return ModelResponse(parts=[TextPart(json.dumps(payload))])


def reading(
    facts: list[dict[str, Any]] | None = None,
    calls: list[str] | None = None,
    *,
    rules_hold: bool = True,
    persons: bool = True,
    steps_read_as: str = "later",
    step_questions: list[str] | None = None,
) -> FunctionModel:
    """A model that answers every message with the reading ``facts`` (in the mode it is asked in), a part read as a
    rule, asked about alone, as a rule (``rules_hold``) or a task for now, a part read as the next step, asked about
    alone, as ``steps_read_as`` (each question's text added to ``step_questions`` when given), and whom a fact is
    about, other than the user, as a person (``persons``) or not."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.instructions and info.instructions.startswith(standing.INSTRUCTIONS[:40]):
            return reply(info, {"answer": "rule" if rules_hold else "task"})
        if info.instructions and info.instructions.startswith(plans.INSTRUCTIONS[:40]):
            if step_questions is not None:
                step_questions.append(_prompt_of(messages))
            return reply(info, {"answer": steps_read_as})
        if info.instructions and info.instructions.startswith(people.INSTRUCTIONS[:40]):
            return reply(info, {"answer": "person" if persons else "place"})
        if calls is not None:
            calls.append(_prompt_of(messages))
        return reply(info, {"facts": facts or []})

    return FunctionModel(answer)


def run_worker(store: Memories, model: Any, message: str, mode: str = "review") -> ExtractionWorker:
    async def go() -> ExtractionWorker:
        worker = ExtractionWorker(store, ExtractionQueue(store.db), lambda: model, mode, PROJECT)  # type: ignore[arg-type]
        worker.submit(message, "sess1", 4)
        await worker.drain()
        return worker

    return asyncio.run(go())


def active(store: Memories) -> list[str]:
    return [m.text for m in store.list()]


# ----- what is kept, in the user's own words and language -----


def test_a_fact_becomes_a_proposal_in_the_users_words_with_provenance(store: Memories) -> None:
    calls: list[str] = []
    message = "Ich heiße Jonas und programmiere meistens in Elixir"
    facts = [fact("Ich heiße Jonas", topic="name"), fact("Ich programmiere meistens in Elixir",
             quote="programmiere meistens in Elixir", topic="main_language")]  # fmt: skip
    worker = run_worker(store, reading(facts, calls), message)
    proposals = store.review.proposals(PROJECT)
    assert [(p.text, p.topic, p.about) for p in proposals] == [
        ("Ich heiße Jonas", "name", "user"),
        ("Ich programmiere meistens in Elixir", "main_language", "user"),
    ]
    assert all(p.proposal == "add" and p.source_session == "sess1" and p.source_seq == 4 for p in proposals)
    assert store.list() == []  # nothing active until reviewed
    assert len(calls) == 1 and message in calls[0]  # one request per message
    assert worker.last_error is None and len(ExtractionQueue(store.db)) == 0


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ("My shell prompt is oh-my-posh with the atomic theme", "My shell prompt is oh-my-posh with the atomic theme"),
        ("We deploy my-app with make ship-it every Thursday", "We deploy my-app with make ship-it every Thursday"),
        ("I keep my dotfiles in ~/src/dot-files", "I keep my dotfiles in ~/src/dot-files"),
    ],
)
def test_names_stay_as_the_user_wrote_them(store: Memories, message: str, text: str) -> None:
    run_worker(store, reading([fact(text, quote=message)]), message, "auto")
    assert active(store) == [text]


def test_a_standing_rule_is_kept_as_an_instruction(store: Memories) -> None:
    message = "Antworte mir bitte immer auf Deutsch, auch wenn ich Englisch schreibe"
    rule = fact("Antworte immer auf Deutsch, auch wenn ich Englisch schreibe", quote="immer auf Deutsch",
                topic="answer_language", kind="rule_for_assistant")  # fmt: skip
    run_worker(store, reading([rule]), message, "auto")
    [memory] = store.list()
    assert (memory.kind, memory.topic) == ("instruction", "answer_language")
    assert store.instructions(PROJECT) == [memory]  # sent first with every request


def test_a_question_is_read_by_the_model_and_keeps_nothing(store: Memories) -> None:
    calls: list[str] = []
    for message in ("How would I rebase my-app onto the release branch?", "¿Qué hora es ahora en Osaka?",
                    "Как настроить автодополнение в zsh?"):  # fmt: skip
        run_worker(store, reading([], calls), message, "auto")
    assert len(calls) == 3  # no question detector: the model says there is nothing
    assert store.list(statuses=("active", "proposed")) == []


@pytest.mark.parametrize("message", ["", "   ", "/memory", "thanks!", "ok", "go on", "danke"])
def test_trivial_messages_are_not_sent(store: Memories, message: str) -> None:
    calls: list[str] = []
    assert not worth_extracting(message)
    run_worker(store, reading([fact("x y z")], calls), message)
    assert calls == []


@pytest.mark.parametrize("message", ["I use Nix", "東京に住んでいます", "Vivo en Quito", "Я живу в Казани"])
def test_short_sentences_in_any_script_are_sent(message: str) -> None:
    assert worth_extracting(message)


# ----- what replaces what -----


@pytest.mark.parametrize("answer", ["m1", "none"])
def test_a_change_with_the_key_of_a_memory_not_shown_is_asked_about(store: Memories, answer: str) -> None:
    """The German change shares no word with the memory, so it is not shown; the model gives its topic key from
    the keys in use. Which memory it makes out of date is asked, shown that memory: the answer decides."""
    old = store.add("I live in Bremen", actor="extractor", subject=Subject("home_city", "user"))
    store.add("I use Fedora on my laptop", actor="extractor", subject=Subject("laptop_os", "user"))
    message = "Seit dem Sommer wohne ich in Leipzig, die Kisten sind endlich ausgepackt"
    moved = fact("Seit dem Sommer wohne ich in Leipzig", topic="home_city", kind="change")  # names no memory
    asked: list[str] = []
    run_worker(store, superseding([moved], answer, asked), message, "auto")
    asked = [q for q in asked if q.startswith("Said:")]  # not the rewrite of the memory replaced
    assert len(asked) == 1 and f"- {old.ref} | I live in Bremen" in asked[0]
    if answer == "none":
        assert active(store) == [
            "I live in Bremen",
            "I use Fedora on my laptop",
            "Seit dem Sommer wohne ich in Leipzig",
        ]
        return
    [new] = store.list(statuses=("active",))[-1:]
    assert active(store) == ["I use Fedora on my laptop", "Seit dem Sommer wohne ich in Leipzig"]
    assert store.get(old.id).replaced_by == new.id and new.topic == "home_city"
    store.history.undo()  # the old memory stays in the log, and comes back
    assert active(store) == ["I live in Bremen", "I use Fedora on my laptop"]


def test_the_model_is_told_the_topic_keys_in_use(store: Memories) -> None:
    store.add("I live in Bremen", actor="extractor", subject=Subject("home_city", "user"))
    calls: list[str] = []
    run_worker(store, reading([], calls), "Seit dem Sommer wohne ich in Leipzig", "auto")
    assert "Other topic keys in use: home_city" in calls[0]


def test_a_change_the_model_names_replaces_the_shown_memory(store: Memories) -> None:
    old = store.add("Uso Sublime para escribir código", actor="user")  # /remember: no topic, no subject
    message = "Dejé Sublime, ahora escribo código en Zed"
    calls: list[str] = []
    change = fact("Ahora escribo código en Zed", quote="ahora escribo código en Zed", topic="editor",
                  replaces=old.ref)  # fmt: skip
    run_worker(store, reading([change], calls), message)
    assert f"{old.ref} | ? | - | Uso Sublime para escribir código" in calls[0]  # shown with its id
    [proposal] = store.review.proposals(PROJECT)
    assert (proposal.proposal, proposal.target_id, proposal.text) == ("update", old.id, "Ahora escribo código en Zed")
    assert f"replaces {old.ref}: Uso Sublime para escribir código" in describe(store, proposal)[1]


def test_a_memory_the_model_names_of_another_topic_is_not_replaced(store: Memories) -> None:
    """The model names the language memory for a fact about the editor: both stay."""
    language = store.add("Ich schreibe meist Rust", actor="extractor", subject=Subject("main_language", "user"))
    message = "Für Rust nehme ich VS Code als Editor"
    editor = fact(message, topic="editor", replaces=language.ref)
    calls: list[str] = []
    run_worker(store, reading([editor], calls), message, "auto")
    assert language.ref in calls[0]  # shown, and named
    assert active(store) == ["Ich schreibe meist Rust", message]


@pytest.mark.parametrize(
    ("text", "old", "same_topic", "replaces"),
    [
        ("Kite slipped", "Kite is a build tool in Go", True, False),  # only takes a value away
        ("a lot calmer about Kite", "Kite is a build tool in Go", True, False),
        ("Helix is my editor now", "I edit in Sublime", True, True),  # a name that starts the sentence
        ("I no longer edit in Sublime", "I edit in Sublime", True, True),  # keeps every value
        ("Wir sitzen jetzt in Halle 3", "Unser Team sitzt in Halle 1", True, True),
        ("大阪に引っ越しました", "東京に住んでいます", True, True),  # no names to compare: the model decides
        ("Kite's new date is March 3", "Kite ships on Feb 9", False, True),  # a date moved, another key
        ("Standup is at 9:45", "Kite ships on Feb 9", False, False),  # no name shared
        ("I write Kotlin at Kite", "Kite ships on Feb 9", False, False),  # no number of its own
    ],
)
def test_a_replacement_must_be_a_new_value_of_the_memory(text: str, old: str, same_topic: bool, replaces: bool) -> None:
    assert new_value_for(text, old, same_topic=same_topic) is replaces


def test_a_named_memory_the_fact_only_takes_from_stays(store: Memories) -> None:
    """The model names a project's memory as replaced by a part that says less of it, and the deadline under
    another key by the part that moves it: the project stays, the deadline is replaced."""
    project = store.add("Kite is a build tool in Go", actor="extractor", subject=Subject("project", "user"))
    deadline = store.add("Kite ships on Feb 9", actor="extractor", subject=Subject("kite_deadline", "user"))
    message = "Kite slipped again, the new date is March 3"
    facts = [fact("Kite slipped", quote="Kite slipped again", kind="change", topic="project", replaces=project.ref),
             fact("Kite's new date is March 3", quote="the new date is March 3", kind="change", topic="project",
                  replaces=deadline.ref)]  # fmt: skip
    asked: list[str] = []
    run_worker(store, superseding(facts, project.ref, asked), message, "auto")
    assert store.get(project.id).status == "active"
    assert store.get(deadline.id).replaced_by is not None
    assert "Kite's new date is March 3" in active(store)


def _replace_project(
    store: Memories, old: str, message: str, text: str, quote: str, edit: tuple[str, str]
) -> tuple[Memory, list[str]]:
    """A project's memory ``old``, then ``message`` read as the change ``text`` (from ``quote``) that names it as
    replaced, the question of which words change answered with ``edit`` (old, new): the memory, and the questions
    asked."""
    project = store.add(old, actor="extractor", subject=Subject("project", "user"))
    moved = fact(text, quote=quote, kind="change", topic="project", replaces=project.ref)
    asked: list[str] = []
    run_worker(store, superseding([moved], "none", asked, edit), message, "auto")
    return project, asked


def test_a_change_that_replaces_part_of_a_memory_rewrites_it(store: Memories) -> None:
    """A memory kept whole (a project and its date) and a change that holds the new date only: the model is asked
    which words of the memory are the old value and which of the user's sentence replace them, shown the memory
    and the sentence; co makes the edit, and the project is kept."""
    message = "Kite verschiebt sich, neuer Termin ist der 3. März"
    old, asked = _replace_project(store, "Kite ist ein Build-Tool in Go und erscheint am 9. Februar", message,
                                  "Kite erscheint am 3. März", "neuer Termin ist der 3. März",
                                  ("am 9. februar", "der 3. märz"))  # fmt: skip
    assert asked == [f'Memory: "{old.text}"\nSaid: "{message}"']
    assert active(store) == ["Kite ist ein Build-Tool in Go und erscheint der 3. März"]
    assert store.get(old.id).replaced_by is not None
    store.history.undo()
    assert active(store) == [old.text]


@pytest.mark.parametrize(
    "edit",
    [
        ("Feb 9", "now"),  # no value of the user's
        ("Go", "March 3"),  # not the value the sentence replaces
        ("Feb 10", "March 3"),  # not in the memory
        ("Feb 9", "March 30"),  # not in the sentence
        ("Kite is a build tool in Go and ships on Feb 9", "March 3"),  # the whole memory: nothing kept
    ],
)
def test_an_edit_that_does_not_check_out_leaves_the_change_as_read(store: Memories, edit: tuple[str, str]) -> None:
    _, asked = _replace_project(store, "Kite is a build tool in Go and ships on Feb 9",
                                "Kite slipped, the new date is March 3", "Kite ships on March 3",
                                "the new date is March 3", edit)  # fmt: skip
    assert len(asked) == 1 and active(store) == ["Kite ships on March 3"]


def test_a_change_that_takes_only_from_the_memory_it_names_rewrites_it(store: Memories) -> None:
    """A change that says only that something moved ("Kite slipped") with the new value in the same sentence:
    the memory the question links it to is edited from the sentence (replaced by "Kite slipped", it would
    lose what it says)."""
    old = store.add("Kite ships on Feb 9", actor="extractor", subject=Subject("kite_deadline", "user"))
    message = "Kite slipped to March 3"
    asked: list[str] = []
    run_worker(store, superseding([fact("Kite slipped", kind="change", topic="delay")], old.ref, asked,
                                  ("Feb 9", "March 3")), message, "auto")  # fmt: skip
    assert [q.split("\n")[0] for q in asked] == ['Said: "Kite slipped"', 'Memory: "Kite ships on Feb 9"']
    assert active(store) == ["Kite ships on March 3"]


@pytest.mark.parametrize("kept_apart", [True, False])
def test_an_edit_takes_no_new_words_from_another_fact_of_the_message(store: Memories, kept_apart: bool) -> None:
    """The new words of an edit come from the change itself, or from a clause not kept on its own: a clause the
    reading keeps as a fact of its own holds that fact's value, not the new value of the memory the change
    replaces."""
    old = store.add("Tomasz signs off every release", actor="extractor", subject=Subject("release_signoff", "user"))
    message = "Tomasz moved to the data team, so Hanna signs off releases on kite-web now"
    moved = fact("Tomasz moved to the data team", kind="change", topic="team")
    hanna = fact("Hanna signs off releases on kite-web now", topic="signoff_on_kite_web")
    asked: list[str] = []
    edit = ("signs off every release", "signs off releases on kite-web")
    run_worker(store, superseding([moved, hanna] if kept_apart else [moved], old.ref, asked, edit), message, "auto")
    assert store.get(old.id).replaced_by is not None
    if kept_apart:
        assert sorted(active(store)) == ["Hanna signs off releases on kite-web now", "Tomasz moved to the data team"]
    else:
        assert active(store) == ["Tomasz signs off releases on kite-web"]


def test_a_moved_date_is_taken_from_another_fact_of_the_message(store: Memories) -> None:
    """A date is a value wherever the message says it: the reading may keep "the new date" as a fact of its own
    and read "Kite slipped" as the change; the memory is edited to the new date."""
    old = store.add(
        "Kite is a build tool in Go and ships on Feb 9", actor="extractor", subject=Subject("project", "user")
    )
    message = "Kite slipped, the new date is March 3"
    facts = [fact("Kite slipped", kind="change", topic="project"),
             fact("The new date is March 3", quote="the new date is March 3", topic="kite_date")]  # fmt: skip
    run_worker(store, superseding(facts, old.ref, [], ("Feb 9", "March 3")), message, "auto")
    assert "Kite is a build tool in Go and ships on March 3" in active(store)
    assert store.get(old.id).replaced_by is not None


@pytest.mark.parametrize(
    ("text", "old", "loses"),
    [
        ("Kite ships on March 3", "Kite is a build tool in Go and ships on Feb 9", True),
        ("I write go and use nano", "I write go and use vim and fish", True),  # no names: words
        ("大阪に住んでいます", "東京に住んでいます", True),
        ("Now I live in Lyon, not Paris", "I live in Paris", False),  # it says all the memory says
    ],
)
def test_a_replacement_that_may_lose_words_of_the_memory_is_rewritten(text: str, old: str, loses: bool) -> None:
    assert revise.loses(text, old) is loses


@pytest.mark.parametrize(
    ("edit", "result"),
    [
        (("3. März", "14. April"), "Unser Projekt Kestrel erscheint am 14. April"),
        ((" am 3. MÄRZ.", "den 14.  april"), "Unser Projekt Kestrel erscheint den 14. April"),  # as the user wrote it
        (("3. März", "3. März"), None),  # the memory as it was
        (("Kestrel", "Falke"), None),  # a name no one said
        (("3. März", "verschiebt sich"), None),  # no value of the user's sentence
        (("März", "April"), None),  # the day left as it was: "am 3. April"
        (("", "14. April"), None),
    ],
)
def test_an_edit_is_checked_by_its_names_and_numbers(edit: tuple[str, str], result: str | None) -> None:
    old, sentence = "Unser Projekt Kestrel erscheint am 3. März", "Kestrel verschiebt sich auf den 14. April"
    assert revise.edited(old, sentence, revise.Revision(old=edit[0], new=edit[1])) == result


@pytest.mark.parametrize(
    ("edit", "result"),
    [
        (("vim", "nano"), "uso nano para todo y mi shell es bash"),  # the value the sentence names, in lower case
        (("bash", "nano"), None),  # a word in lower case the sentence does not name: no value known
        (("vim", "vim a nano"), "uso vim a nano para todo y mi shell es bash"),  # the model's words, checked
    ],
)
def test_an_edit_may_replace_a_value_written_in_lower_case(edit: tuple[str, str], result: str | None) -> None:
    old, sentence = "uso vim para todo y mi shell es bash", "la semana pasada cambié de vim a nano"
    assert revise.edited(old, sentence, revise.Revision(old=edit[0], new=edit[1])) == result


def test_an_edit_in_a_script_without_spaces() -> None:
    old, sentence = "私はVS Codeとzshを使っています", "エディタはZedに変えました"
    assert revise.edited(old, sentence, revise.Revision(old="VS Code", new="Zed")) == "私はZedとzshを使っています"


def test_a_topic_key_alone_replaces_nothing(store: Memories) -> None:
    """A small model copies the topic keys it is shown onto unrelated facts: a fact not read as a change, with the
    key of a memory, is added beside it."""
    language = store.add("Ich schreibe meist Rust", actor="extractor", subject=Subject("programming_language", "user"))
    message = "Mein Editor ist VS Code"
    run_worker(store, reading([fact(message, topic="programming_language")]), message, "auto")
    assert active(store) == ["Ich schreibe meist Rust", message] and store.get(language.id).status == "active"


@pytest.mark.parametrize(
    ("message", "asked", "answer"),
    [
        ("Der Umzug ist jetzt am 2. Juni", True, "m1"),  # the date moved, as the model says
        ("Für den Umzug brauche ich 3 Kisten mehr", True, "none"),  # a number and a word too: the model says no
        ("Am 2. Juni habe ich Urlaub", False, "m1"),  # no word shared
        ("Der Umzug nach Bremen wird teuer", False, "m1"),  # no number of its own
    ],
)
def test_a_lasting_fact_that_may_move_the_date_of_a_memory_with_its_key_asks_which_it_replaces(
    store: Memories, message: str, asked: bool, answer: str
) -> None:
    """A small model reads many a slipped date as a lasting fact, with the key of the memory it moves: under the
    same subject and key, a fact that may move its number (each holds one the other lacks, a word shared) is
    asked about as a stated change; the model's answer decides. Other facts with a copied key are added beside
    it, nothing asked."""
    old = store.add("Der Umzug nach Bremen ist am 12. Mai", actor="extractor", subject=Subject("move_date", "user"))
    questions: list[str] = []
    run_worker(store, superseding([fact(message, topic="move_date")], answer, questions), message, "auto")
    assert bool([q for q in questions if q.startswith("Said:")]) is asked
    replaced = asked and answer == old.ref
    assert (store.get(old.id).replaced_by is not None) is replaced
    assert active(store) == ([message] if replaced else [old.text, message])


def test_no_replacement_without_the_model_or_a_matching_topic(store: Memories) -> None:
    pets = store.add("I have a cat called Miso", actor="extractor", subject=Subject("pet", "user"))
    message = "We also adopted a dog called Pixel last spring"
    run_worker(store, reading([fact("We adopted a dog called Pixel", quote="adopted a dog called Pixel",
                                    topic="second_pet")]), message, "auto")  # fmt: skip
    assert active(store) == ["I have a cat called Miso", "We adopted a dog called Pixel"]
    assert store.get(pets.id).status == "active"


def superseding(
    facts: list[dict[str, Any]],
    answer: str,
    asked: list[str],
    edit: tuple[str, str] | None = None,
    *,
    step: str = "later",
) -> FunctionModel:
    """A model that reads every message as ``facts``, answers the question of which memory a change makes out
    of date with ``answer`` (an id, or "none"), and the question of which words of a memory change with ``edit``
    (old, new; none when
    not given: the answer fails), noting each such question in ``asked``; a name it is asked about is a
    person's, and a next step asked about alone is ``step``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = _prompt_of(messages)
        if info.instructions and info.instructions.startswith(people.INSTRUCTIONS[:40]):
            return reply(info, {"answer": "person"})
        if info.instructions and info.instructions.startswith(plans.INSTRUCTIONS[:40]):
            return reply(info, {"answer": step})
        if prompt.startswith("Said:"):
            asked.append(prompt)
            return reply(info, {"replaces": answer})
        if prompt.startswith("Memory:"):
            asked.append(prompt)
            return reply(info, {"old": edit[0], "new": edit[1]} if edit is not None else {})
        return reply(info, {"facts": facts})

    return FunctionModel(respond)


@pytest.mark.parametrize("mode", ["review", "auto"])
def test_a_stated_change_with_no_shared_topic_asks_which_memory_it_replaces(store: Memories, mode: str) -> None:
    """The reading calls it a change but names no memory and gives a topic key no memory has: one focused
    question, shown the memories it could be about (here, by a word they share), says which one it makes out of
    date."""
    old = store.add("Vivo en Oporto", actor="extractor", subject=Subject("home_city", "user"))
    store.add("Toco el bajo en un grupo", actor="extractor", subject=Subject("hobby", "user"))
    message = "Ya no vivo en Oporto, me trasladé a Turín hace unas semanas"
    moved = fact("Me trasladé a Turín", quote="no vivo en Oporto, me trasladé a Turín", topic="moved", kind="change")
    asked: list[str] = []
    run_worker(store, superseding([moved], old.ref, asked), message, mode)
    asked = [q for q in asked if q.startswith("Said:")]  # not the rewrite of the memory replaced
    assert len(asked) == 1 and f"- {old.ref} | Vivo en Oporto" in asked[0] and "me trasladé a Turín" in asked[0]
    if mode == "auto":
        assert active(store) == ["Toco el bajo en un grupo", "Me trasladé a Turín"]
        store.history.undo()
        assert active(store) == ["Vivo en Oporto", "Toco el bajo en un grupo"]
    else:
        [proposal] = store.review.proposals(PROJECT)
        assert (proposal.proposal, proposal.target_id) == ("update", old.id)


def test_a_change_the_question_links_to_nothing_is_kept_as_it_is(store: Memories) -> None:
    store.add("Toco el bajo en un grupo", actor="extractor", subject=Subject("hobby", "user"))
    asked: list[str] = []
    store.add("Bebo café cada mañana", actor="extractor", subject=Subject("drink", "user"))
    message = "Ya no bebo café"
    run_worker(store, superseding([fact(message, kind="change")], "none", asked), message, "auto")
    assert len(asked) == 1 and active(store) == ["Toco el bajo en un grupo", "Bebo café cada mañana", message]


def test_a_change_that_shares_no_word_or_key_with_a_memory_asks_nothing(store: Memories) -> None:
    """Shown the newest memories for such a change, a small model names unrelated ones: it is kept as it is."""
    store.add("Vivo en Oporto", actor="extractor", subject=Subject("home_city", "user"))
    asked: list[str] = []
    message = "Me trasladé a Turín hace unas semanas"
    moved = fact("Me trasladé a Turín", topic="relocation", kind="change")
    run_worker(store, superseding([moved], "m1", asked), message, "auto")
    assert asked == [] and active(store) == ["Vivo en Oporto", "Me trasladé a Turín"]


@pytest.mark.parametrize("step", ["fact", "now"])
def test_a_statement_read_as_the_next_step_but_alone_a_fact_is_asked_which_memory_it_replaces(
    store: Memories, step: str
) -> None:
    """A change said with a time word is sometimes read as the next step; asked alone, it is a fact, so which
    memory it makes out of date is asked as for a stated change. One answered "for now" is not asked about (the
    model answers so for requests and moods too): it is kept beside the memory."""
    old = store.add("I deploy kite-web with Ansible", actor="extractor", subject=Subject("deploy_tool", "user"))
    message = "I deploy kite-web with Helm these days."
    helm = fact("I deploy kite-web with Helm these days", kind="next_step", topic="deployment")
    asked: list[str] = []
    run_worker(store, superseding([helm], old.ref, asked, step=step), message, "auto")
    if step == "fact":
        assert [q for q in asked if q.startswith("Said:")] and active(store) == [message.rstrip(".")]
        assert store.get(old.id).replaced_by is not None
    else:
        assert asked == [] and active(store) == ["I deploy kite-web with Ansible", message.rstrip(".")]


def test_a_next_step_for_later_is_not_asked_which_memory_it_replaces(store: Memories) -> None:
    store.add("I deploy kite-web with Ansible", actor="extractor", subject=Subject("deploy_tool", "user"))
    message = "Next I want to deploy kite-web with Helm."
    helm = fact("deploy kite-web with Helm", kind="next_step", topic="next_step", form="request")
    asked: list[str] = []
    run_worker(store, superseding([helm], "m1", asked), message, "auto")
    assert asked == [] and active(store) == ["I deploy kite-web with Ansible"]


def test_a_name_the_index_stems_to_a_short_word_shows_no_memory(store: Memories) -> None:
    """The full-text index stems "Ines" to "in": a memory holding "in" shares no word with the change."""
    store.add("Kite is a build tool in Go", actor="extractor", subject=Subject("project", "user"))
    message = "Ines looks after the releases now"
    ines = fact(message, topic="release_owner", kind="change")
    asked: list[str] = []
    run_worker(store, superseding([ines], "m1", asked), message, "auto")
    assert asked == [] and active(store) == ["Kite is a build tool in Go", message]


def test_only_a_stated_change_is_asked_about(store: Memories) -> None:
    store.add("Toco el bajo en un grupo", actor="extractor", subject=Subject("hobby", "user"))
    asked: list[str] = []
    run_worker(store, superseding([fact("Tengo dos gatos")], "m1", asked), "Tengo dos gatos", "auto")
    assert asked == [] and len(store.list()) == 2


def test_two_memories_with_the_topic_key_are_left_alone(store: Memories) -> None:
    store.add("Я говорю по-французски", actor="extractor", subject=Subject("language", "user"))
    store.add("Я говорю по-испански", actor="extractor", subject=Subject("language", "user"))
    message = "Ещё я немного говорю по-японски"
    run_worker(store, reading([fact("Я немного говорю по-японски", quote="немного говорю по-японски",
                                    topic="language")]), message, "auto")  # fmt: skip
    assert len(store.list()) == 3  # which one would it replace? neither


def test_a_colleagues_fact_is_about_them_not_the_user(store: Memories) -> None:
    mine = store.add("I write code in Helix", actor="extractor", subject=Subject("editor", "user"))
    message = "Мой коллега Дмитрий пишет код только в Emacs"
    theirs = fact(
        "Мой коллега Дмитрий пишет код только в Emacs", about="another_person", person="Дмитрий", topic="editor"
    )
    run_worker(store, reading([theirs]), message, "auto")
    assert store.get(mine.id).status == "active"  # the user's editor stays
    colleague = store.list()[-1]
    assert (colleague.about, colleague.person, colleague.whose) == ("other", "Дмитрий", "about Дмитрий")
    # a later fact about the colleague on the same topic replaces theirs, never the user's
    again = fact("Дмитрий перешёл на Neovim", about="another_person", person="Дмитрий", topic="editor", kind="change")
    run_worker(store, reading([again]), "Дмитрий перешёл на Neovim", "auto")
    assert active(store) == ["I write code in Helix", "Дмитрий перешёл на Neovim"]


def _tomaszs(store: Memories) -> Memory:
    """A colleague's memory: Tomasz's role."""
    return store.add("Tomasz owns the kite release checklist", actor="extractor",
                     subject=Subject("release_owner", "other", "Tomasz"))  # fmt: skip


def _aikos() -> dict[str, Any]:
    """A change read as another colleague's: Aiko has the role now."""
    return fact("Aiko owns the kite release checklist", about="another_person", person="Aiko",
                topic="checklist_owner", kind="change")  # fmt: skip


def test_a_role_handed_from_one_colleague_to_another_replaces_the_first_ones(store: Memories) -> None:
    """A change about one person takes the place of another person's memory when the message names both and the
    supersede question says so; the user's own memory on the topic is never shown for it."""
    mine = store.add("I cut the kite releases on Fridays", actor="extractor", subject=Subject("releases", "user"))
    theirs = _tomaszs(store)
    message = "Tomasz switched teams, Aiko owns the kite release checklist from now on"
    aiko = _aikos()
    asked: list[str] = []
    run_worker(store, superseding([aiko], theirs.ref, asked), message, "auto")
    [question] = [q for q in asked if q.startswith("Said:")]
    assert f"- {theirs.ref} | Tomasz owns" in question and mine.ref not in question
    assert active(store) == ["I cut the kite releases on Fridays", "Aiko owns the kite release checklist"]
    assert store.get(theirs.id).replaced_by is not None


def test_a_role_handed_from_a_colleague_to_the_user_replaces_theirs(store: Memories) -> None:
    theirs = _tomaszs(store)
    message = "Tomasz switched teams, so I own the kite release checklist from now on"
    mine = fact("I own the kite release checklist", topic="checklist_owner", kind="change")
    asked: list[str] = []
    run_worker(store, superseding([mine], theirs.ref, asked), message, "auto")
    assert active(store) == ["I own the kite release checklist"]


def test_a_colleagues_change_never_replaces_the_users_memory(store: Memories) -> None:
    store.add("I own the kite release checklist", actor="extractor", subject=Subject("release_owner", "user"))
    message = "Aiko owns the kite release checklist from now on, I said"
    aiko = _aikos()
    asked: list[str] = []
    run_worker(store, superseding([aiko], "m1", asked), message, "auto")
    assert asked == [] and len(active(store)) == 2


def test_a_colleagues_change_that_does_not_name_the_other_leaves_their_memory(store: Memories) -> None:
    theirs = _tomaszs(store)
    message = "Aiko owns the kite release checklist from now on"
    aiko = _aikos()
    asked: list[str] = []
    run_worker(store, superseding([aiko], theirs.ref, asked), message, "auto")
    assert asked == [] and store.get(theirs.id).status == "active"


def test_a_fact_the_model_calls_the_users_is_another_persons_when_its_subject_names_them(store: Memories) -> None:
    mine = store.add("Vivo en Valencia", actor="extractor", subject=Subject("home_city", "user"))
    message = "Mi hermana Irene vive en Bilbao desde enero."
    # a small model says "user" yet copies whom the sentence is about
    hers = fact("Mi hermana Irene vive en Bilbao", subject="Mi hermana Irene", topic="home_city")
    run_worker(store, reading([hers]), message, "auto")
    assert store.get(mine.id).status == "active"  # the user's city is not replaced by the sister's
    sister = store.list()[-1]
    assert (sister.text, sister.about, sister.person) == (
        "Mi hermana Irene vive en Bilbao",
        "other",
        "Mi hermana Irene",
    )


def test_a_subject_that_is_no_person_leaves_the_fact_the_users(store: Memories) -> None:
    """The reading copies a place (or a project) as the subject; asked about that name alone, the model says it
    is no person: the fact is the user's, and replaces the user's memory on the same topic (said to be a person,
    the sister's fact in the test above is kept as hers)."""
    old = store.add("Vivo en Valencia", actor="extractor", subject=Subject("home_city", "user"))
    message = "Ahora vivo en Bilbao, me mudé en enero."
    city = fact("Ahora vivo en Bilbao", subject="Bilbao", kind="change", topic="home_city")
    run_worker(store, reading([city], persons=False), message, "auto")
    [mine] = store.list()
    assert (mine.text, mine.about, mine.person) == ("Ahora vivo en Bilbao", "user", None)
    assert store.get(old.id).replaced_by == mine.id


@pytest.mark.parametrize(
    ("fields", "message", "expected"),
    [
        ({"subject": "I"}, "I moved to Bilbao in January.", ("user", None)),
        ({"subject": "i"}, "Ich bin nach Bilbao gezogen.", ("user", None)),
        ({"subject": ""}, "I moved to Bilbao in January.", ("user", None)),
        # a subject the message does not name is not taken for someone else
        ({"subject": "the user"}, "I moved to Bilbao in January.", ("user", None)),
        ({"subject": "Joana"}, "Joana moved to Bilbao in January.", ("other", "Joana")),
        ({"about": "another_person", "person": "Joana", "subject": "I"}, "Joana moved to Bilbao.", ("other", "Joana")),
        (
            {"about": "another_person", "subject": "my neighbour"},
            "My neighbour moved to Bilbao.",
            ("other", "my neighbour"),
        ),
        ({"about": "nobody", "subject": "Joana"}, "Joana moved to Bilbao.", ("none", None)),
    ],
)
def test_whose_fact_it_is(fields: dict[str, Any], message: str, expected: tuple[str, str | None]) -> None:
    read = Fact.model_validate(fact("moved to Bilbao", quote="Bilbao", **fields))
    about = whose(read, message)
    assert (about, whom_named(read, message) if about == "other" else None) == expected


def test_a_fact_about_a_colleague_in_japanese(store: Memories) -> None:
    store.add("朝はコーヒーを飲みます", actor="extractor", subject=Subject("morning_drink", "user"))
    message = "同僚の佐藤さんは毎朝緑茶を飲んでいます"
    colleague = fact(message, quote="佐藤さんは毎朝緑茶を飲んで", about="another_person", person="佐藤",
                     topic="morning_drink")  # fmt: skip
    run_worker(store, reading([colleague]), message, "auto")
    assert [(m.text, m.about, m.person) for m in store.list()] == [
        ("朝はコーヒーを飲みます", "user", None),
        ("同僚の佐藤さんは毎朝緑茶を飲んでいます", "other", "佐藤"),
    ]


def test_the_users_own_memories_come_before_others_unless_the_question_names_them(store: Memories) -> None:
    store.add("Ольга пишет на Kotlin каждый день", actor="extractor", subject=Subject("language", "other", "Ольга"))
    store.add("Я пишу на Kotlin для Android", actor="extractor", subject=Subject("language", "user"))
    mine = [s.text for s in relevant_memories(store, "Kotlin: что мне почитать?", PROJECT, 800, 0.0)]
    assert mine == ["Я пишу на Kotlin для Android", "Ольга пишет на Kotlin каждый день"]
    hers = [s.text for s in relevant_memories(store, "Ольга и Kotlin", PROJECT, 800, 0.0)]
    assert hers[0] == "Ольга пишет на Kotlin каждый день"
    assert "(about Ольга) Ольга пишет" in render_memory_section(relevant_memories(store, "Kotlin", PROJECT, 800, 0.0))


# ----- what is dropped -----


def test_a_quote_not_in_the_message_is_dropped(store: Memories) -> None:
    message = "Ayer terminé la migración de la base de datos"
    invented = fact("Trabajo como ingeniera de datos", quote="trabajo como ingeniera de datos", topic="job")
    run_worker(store, reading([invented]), message, "auto")
    assert store.list(statuses=("active", "proposed")) == []


def test_a_name_or_number_the_user_did_not_write_is_dropped(store: Memories) -> None:
    message = "Our release train leaves on the 14th"
    facts = [fact("Our release train leaves on the 15th", quote="release train leaves"),
             fact("Our release train is run by Kubernetes", quote="Our release train")]  # fmt: skip
    run_worker(store, reading(facts), message, "auto")
    assert store.list() == []


def test_a_statement_naming_what_the_message_lacks_is_kept_in_the_users_words(store: Memories) -> None:
    """Every German noun is capitalised, so a rewording's noun reads as a name the message lacks: the quote,
    which holds the statement's name, is kept instead."""
    message = "Moin, ich bin Lotte und mag Tee"
    reworded = fact("Mein Vorname ist Lotte", quote="ich bin Lotte", topic="name")
    run_worker(store, reading([reworded]), message, "auto")
    assert active(store) == ["ich bin Lotte"]


def test_a_rewording_that_holds_none_of_the_users_names_is_dropped(store: Memories) -> None:
    """A request reworded with what the model knows: its "SQLite" is the message's word capitalised, not a name
    the user wrote, so the request is not kept in its own words either."""
    message = "write me a sqlite query that counts the rows"
    reworded = fact("The user wants a SQLite query written in Python", quote=message, topic="database")
    run_worker(store, reading([reworded]), message, "auto")
    assert active(store) == []


def test_a_statement_written_in_another_language_than_the_message_is_kept_as_its_quote(store: Memories) -> None:
    message = "Seit Montag arbeite ich im Büro in Graz, nicht mehr in Linz."
    read = fact("Since Monday I work in the office in Graz", quote="Seit Montag arbeite ich im Büro in Graz")
    run_worker(store, reading([read]), message, "auto")
    assert active(store) == ["Seit Montag arbeite ich im Büro in Graz"]


def test_a_fact_too_short_to_say_anything_is_dropped(store: Memories) -> None:
    message = "Grazie mille, adesso è chiaro"
    run_worker(store, reading([fact("Grazie", topic="greeting")]), message, "auto")
    assert active(store) == []


def test_a_statement_cut_from_a_sentence_loses_its_trailing_comma(store: Memories) -> None:
    message = "Wohne in Kiel, arbeite in Hamburg"
    run_worker(store, reading([fact("Wohne in Kiel,", topic="home_city")]), message, "auto")
    assert active(store) == ["Wohne in Kiel"]


@pytest.mark.parametrize(
    ("message", "short"), [("Hello there, I'm Ana", "I'm Ana"), ("こんにちは。私は学生", "私は学生")]
)
def test_a_short_statement_is_kept(store: Memories, message: str, short: str) -> None:
    run_worker(store, reading([fact(short, topic="misc")]), message, "auto")
    assert active(store) == [short]


@pytest.mark.parametrize(
    ("message", "passing"),
    [
        ("Heute bin ich total müde, lange Nacht gehabt", fact("Heute bin ich total müde", kind="passing_state")),
        ("Estoy de mal humor esta mañana", fact("Estoy de mal humor esta mañana", kind="passing_state")),
        ("The CI broke again after the merge", fact("The CI broke again after the merge", about="nobody")),
    ],
)
def test_a_passing_state_or_a_fact_about_no_one_is_not_stored(
    store: Memories, message: str, passing: dict[str, Any]
) -> None:
    run_worker(store, reading([passing]), message, "auto")
    assert store.list(statuses=("active", "proposed")) == []


@pytest.mark.parametrize(
    ("message", "asked"),
    [
        ("Kann ich in Rust Traits erben?", fact("Kann ich in Rust Traits erben?", form="question")),
        # a question the model called a statement: its question mark says otherwise
        ("Как сравнить две ветки в git?", fact("Как сравнить две ветки в git?")),
        # a one-off question the model called a rule: it would be sent with every later request
        (
            "¿Cómo se declara un enum en TypeScript?",
            fact("¿Cómo se declara un enum en TypeScript?", kind="rule_for_assistant"),
        ),
        (
            "Sort these invoices by due date",
            fact("The user wants invoices sorted by due date", quote="Sort these invoices by due date", form="request"),
        ),  # fmt: skip
    ],
)
def test_a_question_or_one_off_request_is_not_stored(store: Memories, message: str, asked: dict[str, Any]) -> None:
    run_worker(store, reading([asked]), message, "auto")
    assert store.list(statuses=("active", "proposed")) == []


def test_a_rule_that_reads_alone_as_a_task_for_now_is_not_kept(store: Memories) -> None:
    """The reading calls a one-off request a rule; asked about it alone, the model says it is a task for now:
    nothing is kept, and the message is read as only asking."""
    message = "Nenn die Variable bitte tmp_puffer"
    rule = fact(message, form="request", kind="rule_for_assistant", topic="naming")
    calls: list[str] = []
    run_worker(store, reading([rule], calls, rules_hold=False), message, "auto")
    assert store.list(statuses=("active", "proposed")) == [] and len(calls) == 1


@pytest.mark.parametrize(
    ("read_as", "form", "stored", "parts"),
    [
        ("later", "statement", [], ["next_step"]),
        ("fact", "statement", ["Ich sitze wieder am Abrechnungsmodul"], []),
        ("fact", "request", ["Ich sitze wieder am Abrechnungsmodul"], []),
        ("now", "statement", ["Ich sitze wieder am Abrechnungsmodul"], []),
        ("now", "request", [], []),
    ],
)
def test_a_next_step_is_asked_about_alone_and_stays_one_only_as_a_plan(
    store: Memories, read_as: str, form: str, stored: list[str], parts: list[str]
) -> None:
    """The reading calls a sentence the next step; asked about its sentence alone, one for later stays the next
    step (not a memory, quoted by compaction), a fact becomes a lasting fact, and one for now is what the reading
    said it is: a statement is a lasting fact (a small model answers "now" for a change said with "now", or a new
    date), a request keeps nothing."""
    message = "Hallo! Ich sitze wieder am Abrechnungsmodul. Hast du kurz Zeit?"
    step = fact("Ich sitze wieder am Abrechnungsmodul", kind="next_step", topic="next_step", form=form)
    asked: list[str] = []

    async def go() -> Any:
        return await extract_changes(
            reading([step], steps_read_as=read_as, step_questions=asked), store, message, PROJECT
        )

    extracted = asyncio.run(go())
    assert asked == ['"Ich sitze wieder am Abrechnungsmodul."']  # the user's sentence, not the model's copy
    assert [change.text for change in extracted.changes] == stored
    assert [part.kind for part in extracted.parts] == parts


def test_a_rule_asked_as_a_request_is_stored_as_an_instruction(store: Memories) -> None:
    message = "Schreib mir bitte immer zuerst die Kurzfassung"
    rule = fact(message, form="request", kind="rule_for_assistant", topic="answer_order")
    run_worker(store, reading([rule]), message, "auto")
    assert [(m.text, m.kind) for m in store.list()] == [(message, "instruction")]


@pytest.mark.parametrize("mode", ["review", "auto"])
@pytest.mark.parametrize(
    ("secret", "quote"),
    [
        ("Mein DB_PASSWORD=quokka77 gilt für Staging", "DB_PASSWORD=quokka77"),
        ("My GITHUB_TOKEN=abc123def456ghi7", "GITHUB_TOKEN=abc123def456ghi7"),
        ("The staging database is on db2", "staging database"),  # from the sentence holding the password
    ],
)
def test_secrets_are_refused(store: Memories, mode: str, secret: str, quote: str) -> None:
    message = (
        "Mein DB_PASSWORD=quokka77 gilt für Staging. My GITHUB_TOKEN=abc123def456ghi7. "
        "The staging database password is tulip-9-orange on db2. I deploy on Fridays"
    )
    facts = [fact(secret, quote=quote), fact("I deploy on Fridays", topic="deploy_day")]
    run_worker(store, reading(facts), message, mode)
    assert [m.text for m in store.list(statuses=("active", "proposed"))] == ["I deploy on Fridays"]


def test_at_most_three_changes_and_no_restated_fact(store: Memories) -> None:
    message = "I use tmux, kitty, fish and helix, with tmux everywhere"
    facts = [fact("I use tmux", topic="multiplexer"), fact("I use tmux", topic="terminal_tool")] + [
        fact(f"I use {tool}", quote=tool, topic=tool) for tool in ("kitty", "fish", "helix")
    ]
    run_worker(store, reading(facts), message)
    assert [p.text for p in store.review.proposals(None)] == ["I use tmux", "I use kitty", "I use fish"]


def test_a_fact_already_kept_is_not_added_again(store: Memories) -> None:
    store.add("Ich nutze Arch Linux", actor="extractor", subject=Subject("os", "user"))
    run_worker(store, reading([fact("Ich nutze Arch Linux", topic="os")]), "Wie gesagt, ich nutze Arch Linux", "auto")
    assert len(store.list()) == 1 and len(store.history.log()) == 1


def test_plan_is_pure_and_one_memory_is_replaced_once(store: Memories) -> None:
    old = store.add("I work at Initech", actor="extractor", subject=Subject("employer", "user"))
    message = "I left Initech; I work at Globex now and I lead the Globex billing team"
    answer = Reading(
        facts=[
            Fact(**fact("I work at Globex now", topic="employer", replaces=old.ref)),
            Fact(**fact("I lead the Globex billing team", topic="employer", replaces=old.ref)),
            Fact(**fact("I work at Globex now", topic="employer", replaces="m999")),
        ]
    )
    changes = plan(answer, message, [old], [old])
    assert [(c.op, c.target, c.text) for c in changes] == [
        ("update", old.id, "I work at Globex now"),
        ("add", None, "I lead the Globex billing team"),
    ]


@pytest.mark.parametrize(("raw", "key"), [("Home City", "home_city"), ("editor", "editor"), ("  -- ", None)])
def test_topic_keys_are_snake_case(raw: str, key: str | None) -> None:
    assert topic_key(raw) == key


# ----- failures, and the fallback that only suggests -----


def _later(store: Memories) -> None:
    """Move the queue's clock past RETRY_AFTER."""
    with store.db.transaction() as tx:
        tx.execute("UPDATE memory_queue SET claimed_at = claimed_at - ?", (ExtractionQueue.RETRY_AFTER + 1,))


def prose(calls: list[str]) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(_prompt_of(messages))
        return ModelResponse(parts=[TextPart("Sure! The user seems nice and uses fish.")])

    return FunctionModel(answer, profile=TOOL_ONLY)


def test_no_readable_answer_suggests_by_word_cues_without_acting(store: Memories) -> None:
    shell = store.add("I use zsh", actor="extractor", subject=Subject("shell", "user"))
    calls: list[str] = []
    message = "I switched to fish as my shell. How do I port my aliases?"
    worker = run_worker(store, prose(calls), message, "auto")
    # the prose answer, then the same question for JSON; nothing changed, kept for later
    assert len(calls) == 2 and worker.prompted and worker.last_error
    assert store.review.proposals(None) == [] and len(ExtractionQueue(store.db)) == 1

    async def next_turn() -> None:
        worker.start()
        await worker.drain()

    asyncio.run(next_turn())
    assert len(calls) == 2  # too early to try again
    _later(store)
    asyncio.run(next_turn())
    assert len(calls) == 3 and len(ExtractionQueue(store.db)) == 0  # tried once more, then given up
    # the cues only suggest: a proposal even in auto mode, replacing nothing
    [suggestion] = store.review.proposals(None)
    assert (suggestion.text, suggestion.proposal) == ("I switched to fish as my shell.", "add")
    assert suggestion.target_id is None
    assert suggestion.cue == "a statement about you"
    assert active(store) == [shell.text]
    shown = "\n".join(describe(store, suggestion))
    assert "suggestion: remember" in shown and "co memory add 'I switched to fish as my shell.'" in shown


def test_the_cues_suggest_nothing_in_other_languages_or_for_questions() -> None:
    assert suggestions("Ich bin nach Graz gezogen. Wie spät ist es?") == []
    assert suggestions("Can you explain how my Makefile works?") == []
    assert suggestions("I'm so tired today") == []
    [rule] = suggestions("Never force-push to main. Thanks")
    assert (rule.kind, rule.cue) == ("instruction", "a stated rule")


def test_a_failed_request_changes_nothing_and_suggests_nothing(store: Memories) -> None:
    kept = store.add("I use tabs in Go", actor="user")

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("provider down")

    worker = run_worker(store, FunctionModel(broken), "I always use tabs when I write Go code")
    assert worker.last_error and "provider down" in worker.last_error
    _later(store)
    worker = run_worker(store, FunctionModel(broken), "I always use tabs when I write Go code")
    assert store.list() == [kept] and store.review.proposals(None) == []


def test_an_invalid_tool_answer_is_asked_again_as_json_at_once(store: Memories) -> None:
    calls: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(_prompt_of(messages))
        if info.output_tools:  # a tool call missing the required fields
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"facts": [{"text": "I use Nix"}]})])
        return ModelResponse(parts=[TextPart(json.dumps({"facts": [fact("I use Nix on every machine")]}))])

    worker = run_worker(store, FunctionModel(answer, profile=TOOL_ONLY), "I use Nix on every machine", "auto")
    assert active(store) == ["I use Nix on every machine"] and len(calls) == 2
    assert not worker.prompted  # the server honours tool calls: the next message is asked the same way


def test_a_native_answer_cut_short_is_asked_again_as_json_without_switching(store: Memories) -> None:
    """A schema-constrained answer cut at the token cap is not prose: asked again at once as prompted JSON, and
    the next message is asked with the schema again."""
    modes: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        modes.append(info.model_request_parameters.output_mode)
        if info.model_request_parameters.output_mode == "native":
            return ModelResponse(parts=[TextPart('{"facts": [{"text": "Ich nutze Nix überall", "quote": "Ich nu')])
        return reply(info, {"facts": [fact("Ich nutze Nix auf jedem Rechner")]})

    worker = run_worker(store, FunctionModel(answer), "Ich nutze Nix auf jedem Rechner", "auto")
    assert modes == ["native", "prompted"] and active(store) == ["Ich nutze Nix auf jedem Rechner"]
    assert not worker.prompted


def test_worker_never_blocks_the_caller_and_drains_at_exit(store: Memories) -> None:
    release = asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await release.wait()
        return reply(info, {"facts": [fact("I write Go daily")]})

    async def go() -> tuple[bool, list[str]]:
        model = FunctionModel(slow)
        worker = ExtractionWorker(store, ExtractionQueue(store.db), lambda: model, "review", PROJECT)
        worker.submit("I write Go daily at work", "s", 0)  # returns at once
        busy = worker.busy
        notices: list[str] = []
        asyncio.get_running_loop().call_later(0.2, release.set)
        await worker.drain(notices.append, after=0.05)
        return busy, notices

    busy, notices = asyncio.run(go())
    assert busy and notices and "Finishing memory extraction" in notices[0]
    assert [p.text for p in store.review.proposals(None)] == ["I write Go daily"]


def test_queued_work_of_an_interrupted_co_is_resumed(store: Memories) -> None:
    ExtractionQueue(store.db).put("old-session", 7, "Prefiero temas oscuros en cada editor", PROJECT)
    item = ExtractionQueue(store.db).claim()  # a co that died while working on it
    assert item is not None
    with store.db.transaction() as tx:
        tx.execute("UPDATE memory_queue SET claimed_at = claimed_at - 3600")
    model = reading([fact("Prefiero temas oscuros", quote="Prefiero temas oscuros", topic="theme")])

    async def go() -> None:
        worker = ExtractionWorker(store, ExtractionQueue(store.db), lambda: model, "review", PROJECT)
        worker.start()
        await worker.drain()

    asyncio.run(go())
    [proposal] = store.review.proposals(None)
    assert (proposal.text, proposal.source_session, proposal.source_seq) == ("Prefiero temas oscuros", "old-session", 7)


# ----- servers that ignore a forced tool call (scripted OpenAI-compatible server) -----


def _server_model(server: ScriptedServer) -> Any:
    """The server as co builds a ``base_url`` model (not assumed to honour a JSON schema: a forced tool first)."""
    settings = Settings(data_dir="/nonexistent/data", config_dir="/nonexistent/config", api_key="test-key")
    return build_model(ModelChoice("scripted", "test", base_url=server.base_url), settings)


def _ignores_tool_choice(prose: str, facts: list[dict[str, Any]]) -> Any:
    """A server that never enforces tool_choice: with tools offered the model answers ``prose``; asked for JSON
    in its instructions (prompted output) it answers the reading."""

    def respond(request: dict[str, Any]) -> Text:
        if request.get("tools"):
            return Text(prose)
        return Text(json.dumps({"facts": facts}))

    return respond


def test_a_server_that_answers_prose_gets_prompted_json(store: Memories) -> None:
    first = "Vivo en Rosario con mis dos gatos"
    with ScriptedServer() as server:
        server.responder = _ignores_tool_choice("Vive en Rosario.", [fact(first, topic="home_city")])
        model = _server_model(server)
        worker = run_worker(store, model, first, "auto")
        assert worker.prompted and worker.last_error is None and len(worker.queue) == 0
        assert active(store) == [first]
        requests = server.chat_requests
        assert len(requests) == 2  # the forced tool call answered in prose, then the same question for JSON
        assert requests[0].body and requests[0].body.get("tool_choice") == "required"
        assert requests[1].body and not requests[1].body.get("tools") and '"replaces"' in requests[1].all_text

        async def next_message() -> None:  # from now on JSON at once: one request
            worker.submit("Mis gatos se llaman Tito y Luna", "s", 2)
            await worker.drain()

        server.responder = _ignores_tool_choice("prose", [fact("Mis gatos se llaman Tito y Luna", topic="cats")])
        asyncio.run(next_message())
        assert len(server.chat_requests) == 3
    assert len(store.list()) == 2


def test_json_in_text_is_accepted_in_one_request(store: Memories) -> None:
    fenced = "```json\n" + json.dumps({"facts": [fact("I use neovim every day")]}) + "\n```"
    with ScriptedServer() as server:
        server.responder = _ignores_tool_choice(fenced, [])
        run_worker(store, _server_model(server), "I use neovim every day for everything", "auto")
        requests = server.chat_requests
    assert active(store) == ["I use neovim every day"]
    assert len(requests) == 1


def test_never_more_than_one_request_per_attempt_in_prompted_mode(store: Memories) -> None:
    store.add("I live in Porto", actor="user")
    with ScriptedServer() as server:
        server.responder = lambda request: Text("I cannot comply, here is some prose about Porto.")
        model = _server_model(server)

        async def go() -> None:
            worker = ExtractionWorker(store, ExtractionQueue(store.db), lambda: model, "auto", PROJECT)
            worker.prompted = True  # in prompted mode an invalid answer is not asked again at once
            worker.submit("Ich bin von Porto nach Braga gezogen", "s", 0)
            await worker.drain()
            _later(store)
            worker.start()
            await worker.drain()

        asyncio.run(go())
        requests = server.chat_requests
    assert len(requests) == 2  # two attempts of one request each, the second later
    assert active(store) == ["I live in Porto"]
    assert store.review.proposals(None) == []  # the English cues suggest nothing for a German message
