"""Verification of proposed pins: only real, whole instructions the user typed."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelMessage

from co_cli.context.pins import MAX_PIN_CHARS, is_instruction, sentences, verify_pins
from co_cli.synthetic import summary_request
from tests.support.planted_facts import HARD_RULE, STYLE, planted_conversation
from tests.test_context_fixtures import ack, reply, user

SPAN: list[ModelMessage] = [
    user("How does exponential backoff work? I keep getting E4471 on restart."),
    reply("It doubles the delay each time. Always use jitter with it."),
    user(
        "- Always run the tests with `pytest -x` before committing.\n"
        "- Never push to main on Fridays.\n"
        "Our staging region is us-east-1. I was reading about retries yesterday."
    ),
    user("please keep answers short, I don't like walls of text"),
    user("Don’t use print() for logging. We decided on SQLite because it runs offline."),
]


def test_topic_phrase_from_a_question_is_rejected() -> None:
    assert verify_pins(["exponential backoff"], SPAN) == []
    assert verify_pins(["How does exponential backoff work?"], SPAN) == []


def test_invented_quote_is_rejected() -> None:
    assert verify_pins(["Use structured logging everywhere."], SPAN) == []
    assert verify_pins(["Never push to main on Mondays."], SPAN) == []


def test_quote_from_the_assistant_is_rejected() -> None:
    assert verify_pins(["Always use jitter with it."], SPAN) == []


def test_quote_from_an_earlier_summary_is_rejected() -> None:
    span: list[ModelMessage] = [summary_request(10, "Never deploy on Sundays."), ack(), user("hello there")]
    assert verify_pins(["Never deploy on Sundays."], span) == []


def test_fragment_is_widened_to_its_whole_sentence_verbatim() -> None:
    assert verify_pins(["never push to main"], SPAN) == ["Never push to main on Fridays."]
    assert verify_pins(["keep answers short"], SPAN) == ["please keep answers short, I don't like walls of text"]


def test_normalisation_of_case_whitespace_quotes_and_code_marks() -> None:
    assert verify_pins(["ALWAYS run  the tests with pytest -x"], SPAN) == [
        "Always run the tests with `pytest -x` before committing."
    ]
    assert verify_pins(['"don\'t use print() for logging."'], SPAN) == ["Don’t use print() for logging."]


def test_a_stated_constraint_quoted_whole_is_kept_but_not_a_fragment_of_a_plain_statement() -> None:
    assert verify_pins(["Our staging region is us-east-1."], SPAN) == ["Our staging region is us-east-1."]
    assert verify_pins(["reading about retries"], SPAN) == []
    assert verify_pins(["We decided on SQLite"], SPAN) == []


def test_a_quote_over_two_sentences_keeps_each_instruction() -> None:
    assert verify_pins(["Never push to main on Fridays. Our staging region"], SPAN) == [
        "Never push to main on Fridays."
    ]


def test_too_short_quotes_and_duplicates() -> None:
    assert verify_pins(["use", "never", ""], SPAN) == []
    assert verify_pins(["Never push to main on Fridays", "never push to main"], SPAN) == [
        "Never push to main on Fridays."
    ]


def test_newest_statement_wins() -> None:
    span: list[ModelMessage] = [
        user("Use tabs for indentation in the old scripts."),
        reply("ok"),
        user("From now on use tabs for indentation everywhere."),
    ]
    assert verify_pins(["use tabs for indentation"], span) == ["From now on use tabs for indentation everywhere."]


def test_a_paragraph_without_stops_is_not_a_pin() -> None:
    long = "always " + "keep going and " * 40 + "stop"
    assert len(long) > MAX_PIN_CHARS
    assert verify_pins(["keep going and keep going"], [user(long)]) == []


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Never run migrations against prod-db-01 without a fresh snapshot.", True),
        ("Please answer in British English.", True),
        ("Use tabs.", True),
        ("Do not commit generated files.", True),
        ("I prefer f-strings over str.format().", True),
        ("We need to ship by Friday.", True),
        ("Could you please keep answers short", True),
        ("How does exponential backoff work?", False),
        ("Why does it never work?", False),
        ("Do you always use tabs", False),
        ("I want to know how retries work.", False),
        ("I keep getting E4471 on restart.", False),
        ("exponential backoff", False),
    ],
)
def test_instruction_shape(sentence: str, expected: bool) -> None:
    assert is_instruction(sentence) is expected


def test_sentences() -> None:
    assert sentences("First one. second e.g. this one! Third?\n- item one\n2) item two") == [
        "First one. second e.g. this one!",
        "Third?",
        "item one",
        "item two",
    ]


def test_planted_rules_verify_and_topic_phrases_do_not() -> None:
    span = planted_conversation().messages
    proposed = [
        "never run migrations against prod-db-01",
        "f-strings over str.format()",
        "exponential backoff",
        "the sync client",
        "Always deploy on Tuesdays.",
    ]
    assert verify_pins(proposed, span) == [HARD_RULE.statement, STYLE.statement]
