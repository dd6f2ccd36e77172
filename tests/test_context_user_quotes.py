"""What compaction does with the summariser's typed answer: every quote checked against the user's own words,
rules offered as pins, the next step quoted under "Pending", changes placed last, invented quotes dropped and
counted; and without a typed answer, English cues that only suggest. In several languages."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from co_cli.context.compact import CompactionResult, compact_all, compact_middle, compaction_line
from co_cli.context.summarize import Change, SummaryAnswer
from co_cli.context.user_quotes import (
    CHANGES_HEADING,
    NEXT_STEP_HEADING,
    StatedChange,
    Suggestion,
    carried_suggestions,
    changes_block,
    quote_next_step,
    read_answer,
    said_key,
    suggest,
)
from co_cli.context.user_words import USER_WORDS_HEADING, Entry
from co_cli.store import ReadPart
from tests.support.chatty import FILLER, chatty
from tests.support.messages import reply, texts_of, user
from tests.support.summariser import prose_summariser, scripted_summariser, typed_summariser, typed_summary

pytestmark = pytest.mark.anyio

BODY = "## Goal\nShip v3.2.\n\n## Pending and next step\n- Review the linter output of tools/check.py."


@dataclass(frozen=True)
class Said:
    """One conversation's sentences in one language, and what a summariser's typed answer quotes of them."""

    rule: str
    one_off: str
    change: str
    old: str
    next_step: str
    person: str
    rule_fragment: str
    change_fragment: str
    step_fragment: str
    invented_rule: str

    def prompts(self) -> list[str]:
        return [self.rule, self.one_off, f"{self.change} {self.person}", self.next_step]

    def answer(self) -> dict[str, object]:
        return {
            "standing_instructions": [self.rule_fragment, self.invented_rule],
            "changes": [{"quote": self.change_fragment, "old": self.old, "new": "?"}],
            "next_step": self.step_fragment,
            "people": [self.person.split()[0]],
        }


ENGLISH = Said(
    rule="From now on, write every commit message in the imperative mood.",
    one_off="Please run the linter on tools/check.py now.",
    change="Small update: the review meeting moved from Tuesday to Thursday.",
    old="Tuesday",
    next_step="The next step, once that is merged: draft the release notes for v3.2.",
    person="Priya reads the notes.",
    rule_fragment="write every commit message in the imperative mood",
    change_fragment="the review meeting moved from Tuesday to Thursday",
    step_fragment="draft the release notes for v3.2",
    invented_rule="Always answer in French.",
)
GERMAN = Said(
    rule="Schreib Commit-Nachrichten ab sofort immer im Imperativ.",
    one_off="Lass bitte jetzt den Linter über tools/check.py laufen.",
    change="Kleine Änderung: das Review-Treffen ist von Dienstag auf Donnerstag verschoben.",
    old="Dienstag",
    next_step="Danach entwerfen wir die Release-Notizen für v3.2.",
    person="Jürgen prüft die Notizen.",
    rule_fragment="Commit-Nachrichten ab sofort immer im Imperativ",
    change_fragment="das Review-Treffen ist von Dienstag auf Donnerstag verschoben",
    step_fragment="entwerfen wir die Release-Notizen für v3.2",
    invented_rule="Antworte immer auf Französisch.",
)
SPANISH = Said(
    rule="A partir de ahora, escribe los mensajes de commit siempre en imperativo.",
    one_off="Ejecuta ahora el linter sobre tools/check.py, por favor.",
    change="Un cambio: la reunión de revisión pasó del martes al jueves.",
    old="martes",
    next_step="Después redactamos las notas de la versión v3.2.",
    person="Lucía revisa las notas.",
    rule_fragment="escribe los mensajes de commit siempre en imperativo",
    change_fragment="la reunión de revisión pasó del martes al jueves",
    step_fragment="redactamos las notas de la versión v3.2",
    invented_rule="Responde siempre en francés.",
)
JAPANESE = Said(
    rule="これからはコミットメッセージを必ず命令形で書いてください。",
    one_off="今すぐ tools/check.py にリンターをかけてください。",
    change="変更です：レビュー会議は火曜日から木曜日に移りました。",
    old="火曜日",
    next_step="その後、v3.2のリリースノートを書きます。",
    person="佐藤 さんがノートを確認します。",
    rule_fragment="コミットメッセージを必ず命令形で書いて",
    change_fragment="レビュー会議は火曜日から木曜日に移りました",
    step_fragment="v3.2のリリースノートを書きます",
    invented_rule="常にフランス語で答えてください。",
)
RUSSIAN = Said(
    rule="Отныне всегда пиши сообщения коммитов в повелительном наклонении.",
    one_off="Запусти сейчас линтер на tools/check.py.",
    change="Изменение: встреча по ревью перенесена со вторника на четверг.",
    old="вторника",
    next_step="Потом пишем заметки к релизу v3.2.",
    person="Ольга проверяет заметки.",
    rule_fragment="всегда пиши сообщения коммитов в повелительном наклонении",
    change_fragment="встреча по ревью перенесена со вторника на четверг",
    step_fragment="пишем заметки к релизу v3.2",
    invented_rule="Всегда отвечай по-французски.",
)
LANGUAGES = pytest.mark.parametrize(
    "said", [ENGLISH, GERMAN, SPANISH, JAPANESE, RUSSIAN], ids=["en", "de", "es", "ja", "ru"]
)


def summary_of(result: CompactionResult) -> str:
    return texts_of([result.replacement[result.head]])


@LANGUAGES
async def test_a_typed_answer_is_verified_then_acted_on(said: Said) -> None:
    model = typed_summariser(BODY, **said.answer())
    result = await compact_middle(chatty(said.prompts()), model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    # the verified rule is offered as a pin, as the user wrote it; the one-off request the model did not list
    # is not, and neither is the rule the model invented: that one is dropped and counted
    assert result.standing_instructions == (said.rule,)
    assert said.one_off not in result.standing_instructions
    assert result.dropped_quotes == 1 and result.dropped_names == 0
    assert "; 1 quote not found in your messages, dropped." in compaction_line(result)
    assert result.suggestions == ()
    text = summary_of(result)
    # the next step, the user's sentence, right under the summary's "Pending" heading
    step = text.index(f"{NEXT_STEP_HEADING}\n> {said.next_step}")
    assert text.index("## Pending and next step") < step < text.index("- Review the linter output")
    # the change closes the summary: after the user's words, the last thing before the recent messages
    assert text.index(USER_WORDS_HEADING) < text.index(CHANGES_HEADING)
    assert text.rstrip().endswith(f"{CHANGES_HEADING}\n> {said.change}  (before: {said.old})")


@LANGUAGES
async def test_without_a_typed_answer_nothing_is_pinned_or_quoted_and_cues_only_suggest(said: Said) -> None:
    model = prose_summariser(BODY + "\n\n## Standing instructions\n> " + said.rule)
    result = await compact_middle(chatty(said.prompts()), model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    assert result.standing_instructions == ()
    text = summary_of(result)
    assert NEXT_STEP_HEADING not in text and CHANGES_HEADING not in text
    expected = (
        (
            Suggestion("rule", ENGLISH.rule),
            Suggestion("change", ENGLISH.change),
            Suggestion("next step", ENGLISH.next_step),
        )
        if said is ENGLISH
        else ()  # the cues know English phrasings only
    )
    assert result.suggestions == expected
    assert carried_suggestions(result.replacement[result.head]) == list(expected)
    if expected:
        assert "/compact show reads it and lists 3 suggestions from your words" in compaction_line(result)
        assert [s.command for s in expected] == [
            f"/pin {ENGLISH.rule}",
            f"/pin {ENGLISH.change}",
            f"/tasks add {ENGLISH.next_step}",
        ]


async def test_a_digest_suggests_too_and_pins_nothing() -> None:
    result = await compact_middle(chatty(ENGLISH.prompts()), None, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.standing_instructions == ()
    assert Suggestion("rule", ENGLISH.rule) in result.suggestions
    assert carried_suggestions(result.replacement[result.head]) == list(result.suggestions)


def test_read_answer_checks_every_quote_name_and_earlier_value() -> None:
    users = ["Ab morgen liegt das Archiv auf nas-7 statt auf nas-2.", "Frag bitte Henrike, bevor du löschst."]
    stretch = [*users, "Verstanden, ich frage Henrike vorher."]
    answer = SummaryAnswer(
        summary="…",
        changes=[
            Change(quote="das Archiv auf nas-7 statt auf nas-2", old="nas-2", new="nas-7"),
            Change(quote="Das Archiv liegt jetzt auf nas-9.", old="nas-7", new="nas-9"),  # invented
            Change(quote="liegt das Archiv auf nas-7", old="nas-1", new="nas-7"),  # the same sentence again
        ],
        next_step="Henrike fragen",  # not the user's words (they wrote "Frag bitte Henrike")
        people=["Henrike", "Konstantin"],
    )
    reading = read_answer(answer, users, stretch)
    assert reading.changes == (StatedChange("Ab morgen liegt das Archiv auf nas-7 statt auf nas-2.", "nas-2"),)
    assert reading.next_step is None
    assert reading.people == ("Henrike",)
    assert (reading.dropped_quotes, reading.dropped_names, reading.unsure_changes) == (2, 1, 0)
    # the value it replaces occurs nowhere, or is not named: the model's "change" is not placed (counted)
    for old in ("nas-1", ""):
        change = Change(quote="liegt das Archiv auf nas-7", old=old, new="nas-7")
        unsure = read_answer(answer.model_copy(update={"changes": [change]}), users, stretch)
        assert unsure.changes == () and unsure.unsure_changes == 1


def test_the_next_step_goes_under_the_pending_heading_or_at_the_end() -> None:
    text = quote_next_step(BODY, "Después redactamos las notas.")
    assert text.index("## Pending and next step") < text.index(NEXT_STEP_HEADING) < text.index("- Review the")
    assert quote_next_step("## Goal\nShip it.", "Next: the notes.").endswith(f"{NEXT_STEP_HEADING}\n> Next: the notes.")
    assert quote_next_step(text, "después redactamos las notas.") == text  # held already
    assert quote_next_step(BODY, None) == BODY


def test_changes_block() -> None:
    assert changes_block(()) == ""
    assert changes_block([StatedChange("Сервер теперь в Казани.", "Москве"), StatedChange("B moved.", "A")]) == (
        f"{CHANGES_HEADING}\n> Сервер теперь в Казани.  (before: Москве)\n> B moved.  (before: A)"
    )


def test_suggestions_come_from_english_cues_over_the_users_sentences_only() -> None:
    entries = [
        Entry("Never force-push to the release branch. How do tags work?"),
        Entry("~ Correction: the bucket moved to eu-north-1. … [eu-north-1]"),
        Entry("Nie wieder auf den Release-Branch force-pushen."),  # German: no cue reads it
        Entry("What is the next step?"),  # a question suggests nothing
    ]
    assert suggest(entries) == (
        Suggestion("rule", "Never force-push to the release branch."),
        Suggestion("change", "Correction: the bucket moved to eu-north-1."),
    )


async def test_a_later_compaction_keeps_each_quote_once_and_the_changes_last() -> None:
    """A summariser that copies the earlier summary (its quotes too) and lists nothing new: the earlier
    next step and change are carried, verified against what the earlier summary quoted, each once, and the
    change still closes the summary."""
    model = typed_summariser(BODY, **SPANISH.answer())
    first = await compact_middle(chatty(SPANISH.prompts()), model, max_history_messages=4)
    assert isinstance(first, CompactionResult)
    copied = summary_of(first).split("\n", 1)[1].split("\n\n" + USER_WORDS_HEADING)[0]
    copied += f"\n\n{CHANGES_HEADING}\n> {SPANISH.change}  (before: {SPANISH.old})"
    later = [*first.messages[:-1], *chatty(["¿Y el registro?", "¿Qué nivel?", "¿Y el formato?"])]
    second = await compact_middle(later, typed_summariser(copied), max_history_messages=4)
    assert isinstance(second, CompactionResult) and second.method == "summary"
    text = summary_of(second)
    assert text.count(f"> {SPANISH.next_step}") == 1 and text.count(f"> {SPANISH.change}") == 1
    assert text.rstrip().endswith(f"> {SPANISH.change}  (before: {SPANISH.old})")
    assert second.dropped_quotes == 0


async def test_compact_all_verifies_as_compact_middle_does() -> None:
    messages = chatty(GERMAN.prompts())
    result = await compact_all(messages, typed_summariser(BODY, **GERMAN.answer()))
    assert result.method == "summary"
    assert result.standing_instructions == (GERMAN.rule,)
    assert result.dropped_quotes == 1
    assert summary_of(result).count(f"> {GERMAN.change}") == 1


@pytest.mark.parametrize("read_as", ["task", "fact", None], ids=["task", "fact", "no answer"])
async def test_a_rule_not_confirmed_when_asked_alone_is_not_pinned(read_as: str | None) -> None:
    """Each rule the summariser names and the user wrote is asked about alone before it is pinned: read as a task
    for now or a fact, or not answered, it is not pinned and is counted; the summary and the rest of its reading
    stand."""
    model = typed_summariser(BODY, rules_read_as=read_as, **SPANISH.answer())  # type: ignore[arg-type]
    result = await compact_middle(chatty(SPANISH.prompts()), model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    assert result.standing_instructions == () and result.unconfirmed_rules == 1
    assert result.dropped_quotes == 1  # the invented rule is dropped before any question
    line = compaction_line(result)
    assert "; 1 quote not found in your messages, dropped; 1 rule not a rule when asked alone, not pinned." in line
    text = summary_of(result)
    assert f"{NEXT_STEP_HEADING}\n> {SPANISH.next_step}" in text and f"> {SPANISH.change}" in text


async def test_the_rule_question_asks_about_the_users_sentence_once_and_not_about_a_message_read_already() -> None:
    """The question carries the user's whole sentence; a rule the message's own reading found (and so asked about)
    is pinned without a second question."""
    asked: list[str] = []
    read_rule = "Keep every changelog entry under eighty characters."
    answer = {"standing_instructions": [ENGLISH.rule_fragment, read_rule]}
    model = scripted_summariser(lambda messages, info: typed_summary(info, BODY, **answer), rule_questions=asked)
    prompts = [*ENGLISH.prompts(), read_rule]
    said = {said_key(read_rule): [ReadPart("rule", read_rule)]}
    result = await compact_middle(chatty(prompts), model, max_history_messages=4, said=said)
    assert isinstance(result, CompactionResult)
    assert set(result.standing_instructions) == {ENGLISH.rule, read_rule} and result.unconfirmed_rules == 0
    assert len(asked) == 1 and ENGLISH.rule in asked[0] and read_rule not in asked[0]


@pytest.mark.parametrize(
    ("users", "answer"),
    [
        (
            ["Pasa ahora el linter sobre tools/check.py, por favor.", "La demo ya no es el martes, es el jueves."],
            {
                "standing_instructions": ["Pasa ahora el linter sobre tools/check.py", "la demo ya no es el martes"],
                "changes": [{"quote": "La demo ya no es el martes, es el jueves.", "old": "martes"}],
                "next_step": "Pasa ahora el linter sobre tools/check.py, por favor.",
            },
        ),
        (
            ["今すぐ tools/check.py にリンターをかけてください。", "デモは火曜日から木曜日に変わりました。"],
            {
                "standing_instructions": ["リンターをかけてください", "デモは火曜日から木曜日に変わりました"],
                "changes": [{"quote": "デモは火曜日から木曜日に変わりました", "old": "火曜日"}],
                "next_step": "今すぐ tools/check.py にリンターをかけてください。",
            },
        ),
    ],
    ids=["es", "ja"],
)
def test_a_sentence_the_model_puts_under_two_kinds_is_not_pinned(users: list[str], answer: dict[str, object]) -> None:
    """A small model lists one sentence as a rule and as a change or the next step: it is not pinned (counted
    apart), and still placed as the change or next step it was also named."""
    reading = read_answer(SummaryAnswer(summary="…", **answer), users, users)  # type: ignore[arg-type]
    assert reading.rules == () and reading.unsure_rules == 2 and reading.dropped_quotes == 0
    assert reading.changes and reading.next_step


@pytest.mark.parametrize(
    "question",
    ["Should the cache really live on that host?", "¿Usamos siempre la rama develop?", "この設定は毎回必要ですか？"],
)
def test_a_question_quoted_as_a_rule_is_not_pinned(question: str) -> None:
    """Whatever the summariser calls it, a sentence said as a question is not a rule to pin (counted apart)."""
    users = [question, "Indent with two spaces in every YAML file."]
    answer = SummaryAnswer(summary="…", standing_instructions=[question, "Indent with two spaces in every YAML file"])
    reading = read_answer(answer, users, users)
    assert reading.rules == ("Indent with two spaces in every YAML file.",) and reading.unsure_rules == 1


async def test_the_compaction_line_counts_what_was_found_but_not_acted_on() -> None:
    """The one-off request named a rule and a change (with no earlier value): neither pinned nor placed."""
    said = ENGLISH
    answer = {**said.answer(), "standing_instructions": [said.one_off], "changes": [{"quote": said.one_off}]}
    result = await compact_middle(chatty(said.prompts()), typed_summariser(BODY, **answer), max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.standing_instructions == ()
    assert CHANGES_HEADING not in summary_of(result)
    assert (
        "; 1 rule also named as a change or the next step, not pinned; 1 change without the earlier value, "
        "not placed." in compaction_line(result)
    )


def read_one_at_a_time(said: Said, *, rule: bool = True) -> dict[str, tuple[ReadPart, ...]]:
    """What memory extraction read in each of the conversation's messages, by the message's text: the rule (as
    the user's sentence), nothing in the one-off request, the change, the next step."""
    return {
        said_key(said.rule): (ReadPart("rule", said.rule),) if rule else (),
        said_key(said.one_off): (),
        said_key(f"{said.change} {said.person}"): (ReadPart("change", said.change),),
        said_key(said.next_step): (ReadPart("next_step", said.next_step),),
    }


@LANGUAGES
async def test_what_each_message_was_read_to_say_is_acted_on_with_a_plain_summary(said: Said) -> None:
    """A summariser that answered in prose names nothing; the messages read one at a time do: the rule is pinned,
    the next step quoted under "Pending" and the change closes the summary (no earlier value needed: the message
    alone was read), in any language, and no cue suggests what a model has read."""
    model = prose_summariser(BODY)
    result = await compact_middle(chatty(said.prompts()), model, max_history_messages=4, said=read_one_at_a_time(said))
    assert isinstance(result, CompactionResult) and result.method == "summary"
    assert result.standing_instructions == (said.rule,) and result.suggestions == ()
    text = summary_of(result)
    assert text.index("## Pending and next step") < text.index(f"{NEXT_STEP_HEADING}\n> {said.next_step}")
    assert text.rstrip().endswith(f"{CHANGES_HEADING}\n> {said.change}")


async def test_a_message_read_one_at_a_time_overrules_the_summariser_on_it() -> None:
    """The summariser calls the one-off request a rule and invents the next step's place; the messages' own
    readings say the request is none and the rule is not read as one: nothing is pinned from those messages,
    while what the summariser found in a message nobody read on its own still counts."""
    said = GERMAN
    answer = {**said.answer(), "standing_instructions": [said.one_off, said.rule_fragment]}
    readings = read_one_at_a_time(said, rule=False)
    del readings[said_key(said.next_step)]  # not read yet: the summariser's next step stands
    result = await compact_middle(
        chatty(said.prompts()), typed_summariser(BODY, **answer), max_history_messages=4, said=readings
    )
    assert isinstance(result, CompactionResult) and result.standing_instructions == ()
    text = summary_of(result)
    assert f"{NEXT_STEP_HEADING}\n> {said.next_step}" in text
    assert text.rstrip().endswith(f"> {said.change}")


async def test_a_digest_pins_the_rule_a_message_was_read_to_state() -> None:
    said = SPANISH
    result = await compact_middle(chatty(said.prompts()), None, max_history_messages=4, said=read_one_at_a_time(said))
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.standing_instructions == (said.rule,)
    assert all(s.text != said.rule for s in result.suggestions)


async def _compacted_with_a_change(said: Said) -> tuple[CompactionResult, str]:
    """A first compaction (prose summariser, each message read one at a time), and its summary's text as a
    summariser copies it next time, the change's block included."""
    first = await compact_middle(
        chatty(said.prompts()), prose_summariser(BODY), max_history_messages=4, said=read_one_at_a_time(said)
    )
    assert isinstance(first, CompactionResult)
    copied = summary_of(first).split("\n", 1)[1].split("\n\n" + USER_WORDS_HEADING)[0]
    return first, copied + f"\n\n{CHANGES_HEADING}\n> {said.change}"


async def test_a_change_read_one_at_a_time_is_carried_by_the_next_compaction() -> None:
    """Placed without an earlier value, the change is still placed by the next compaction, once, from the earlier
    summary's block (its message is gone from the context by then)."""
    said = RUSSIAN
    first, copied = await _compacted_with_a_change(said)
    later = [*first.messages[:-1], *chatty(["А логи?", "Какой уровень?", "А формат?"])]
    second = await compact_middle(later, typed_summariser(copied), max_history_messages=4)
    assert isinstance(second, CompactionResult) and second.method == "summary"
    assert summary_of(second).count(f"> {said.change}") == 1


async def test_a_plain_summary_that_copies_an_earlier_block_has_one_block_of_changes() -> None:
    """A summariser answering in prose copies the earlier summary's changes; a later message was read to state
    another: one block holds both, the earlier one verified again."""
    said = RUSSIAN
    first, copied = await _compacted_with_a_change(said)
    moved = "Сервер теперь в Казани, не в Омске."
    later = [*first.messages[:-1], *chatty([moved, "Какой уровень?", "А формат?", "А тесты?"])]
    readings = {said_key(moved): (ReadPart("change", moved),)}
    second = await compact_middle(later, prose_summariser(copied), max_history_messages=4, said=readings)
    assert isinstance(second, CompactionResult) and second.method == "summary"
    text = summary_of(second)
    assert text.count(CHANGES_HEADING) == 1 and text.count(f"> {said.change}") == 1 and f"> {moved}" in text


async def test_a_digest_quotes_the_next_step_and_changes_of_the_messages_read_one_at_a_time() -> None:
    """With no summary (the summariser failed or was not asked), the digest still quotes what each message's own
    reading found: the next step under the digest, the change closing it, both in the user's words."""
    prompts = SPANISH.prompts()
    said = {
        said_key(prompts[2]): [ReadPart("change", SPANISH.change)],
        said_key(prompts[3]): [ReadPart("next_step", SPANISH.next_step)],
    }
    result = await compact_middle(chatty(prompts), None, max_history_messages=4, said=said)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    text = summary_of(result)
    assert f"{NEXT_STEP_HEADING}\n> {SPANISH.next_step}" in text
    assert text.rstrip().endswith(f"{CHANGES_HEADING}\n> {SPANISH.change}")


async def test_a_digest_carries_the_quotes_of_an_earlier_summary_whole_and_once() -> None:
    """An earlier summary's quoted next step and changes ride whole in a digest that replaces it, even when its
    prose is cut to fit, and are not repeated; a next step a message read later states takes the step's place."""
    from co_cli.synthetic import summary_request
    from tests.support.messages import ack

    prose = "## Goal\nShip v3.2.\n\n" + "The user walked through the release checklist. " * 60
    body = "\n\n".join(
        [prose, f"{NEXT_STEP_HEADING}\n> {ENGLISH.next_step}", changes_block([StatedChange(ENGLISH.change, "")])]
    )
    messages = chatty(["Let us look at the packaging scripts now.", "And the signing keys after that."])
    messages[2:2] = [summary_request(40, body), ack()]
    result = await compact_middle(messages, None, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    text = summary_of(result)
    assert text.count("The user walked through the release checklist.") < 60  # the prose was cut
    assert text.count(f"> {ENGLISH.next_step}") == 1 and text.count(f"> {ENGLISH.change}") == 1
    later = "Then we write the migration notes for the signing keys."
    said = {said_key(later): [ReadPart("next_step", later)]}
    messages[-5:-5] = [user(later), reply(FILLER)]
    result = await compact_middle(messages, None, max_history_messages=4, said=said)
    assert isinstance(result, CompactionResult)
    text = summary_of(result)
    assert f"{NEXT_STEP_HEADING}\n> {later}" in text and f"> {ENGLISH.next_step}" not in text
    assert text.count(f"> {ENGLISH.change}") == 1
