"""The user's own words beside a summary, a summary holding none of them rejected, and no rule pinned for its
wording alone."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelMessage

from co_cli.context.compact import CompactionResult, compact_all, compact_middle, compaction_line
from co_cli.context.policy import GovernorConfig, user_words_budget
from co_cli.context.report import context_report
from co_cli.context.user_content import reject_reason
from co_cli.context.user_words import (
    SHORT_LINE_CHARS,
    USER_WORDS_HEADING,
    Entry,
    carried_words,
    keep_user_words,
    shorten,
)
from co_cli.synthetic import is_summary
from co_cli.text_tokens import estimate_text_tokens
from tests.support.chatty import FILLER, chatty
from tests.support.messages import recording_model, reply, texts_of, user

pytestmark = pytest.mark.anyio


# --- keeping the user's words ------------------------------------------------------------------------


def test_newest_messages_are_verbatim_and_older_ones_shortened() -> None:
    entries = [
        Entry(
            "We tried upgrading pydantic 2.9.1 last week and it broke the validators. It took the whole afternoon "
            "to find out why. So we pin 2.8.2 now."
        ),
        Entry(
            "Maria Keller must approve changes to billing. She is back on Monday, and until then nothing in "
            "billing moves, whatever the release plan says."
        ),
        Entry("short one"),
    ]
    words = keep_user_words(entries, budget_tokens=55)
    assert words.verbatim == ("short one",)
    # each older message keeps the sentences that carry an identifier (a version, a name)
    assert words.shortened == (
        "We tried upgrading pydantic 2.9.1 last week and it broke the validators. … So we pin 2.8.2 now.",
        "Maria Keller must approve changes to billing. …",
    )
    rendered = words.render()
    assert rendered.startswith(USER_WORDS_HEADING)
    assert rendered.index("~ We tried") < rendered.index("~ Maria") < rendered.index("- short one")
    assert keep_user_words(entries, budget_tokens=1_000).verbatim == tuple(e.text for e in entries)


def test_everything_stays_within_the_budget_and_the_oldest_are_counted_past_it() -> None:
    entries = [Entry(f"old line {i} about the parser", shortened=True) for i in range(100)] + [Entry("new")]
    words = keep_user_words(entries, budget_tokens=400)
    assert words.verbatim == ("new",)
    assert words.shortened[-1] == "old line 99 about the parser"
    assert words.omitted == 100 - len(words.shortened) > 0
    assert "older messages of the user omitted" in words.render()
    assert estimate_text_tokens(words.render()) <= 400 + 40  # the heading and the count line
    assert not keep_user_words(entries, budget_tokens=0)


def test_past_the_budget_the_lines_that_name_nothing_go_before_the_oldest_named_one() -> None:
    named = Entry("The staging box answers on 7781 behind the VPN.", shortened=True)
    plain = [Entry(f"Could you explain once more how the retries work, part {word}?", shortened=True)
             for word in ("one", "two", "three", "four", "five", "six")]  # fmt: skip
    words = keep_user_words([named, *plain, Entry("new")], budget_tokens=60)
    assert words.verbatim == ("new",)
    assert words.shortened[0] == named.text
    assert 0 < words.omitted < len(plain)
    assert words.shortened[1:] == tuple(e.text for e in plain[len(plain) - len(words.shortened) + 1 :])


def test_a_message_the_user_repeats_later_in_full_is_kept_once() -> None:
    first = "Why does the nightly import skip the archived rows?"
    words = keep_user_words(
        [Entry(first), Entry("ok"), Entry(f"{first}   (asking again after the fix)"), Entry("ok")], budget_tokens=1_000
    )
    assert words.verbatim == ("ok", f"{first}   (asking again after the fix)", "ok")
    assert words.omitted == 0


def test_shorten_keeps_a_one_sentence_message_whole() -> None:
    assert shorten("Deploy to eu-central-2.") == "Deploy to eu-central-2."


def test_shorten_keeps_the_sentences_that_say_something_not_the_greeting() -> None:
    # the first sentence is a reply to the assistant; the fact is in the second, the request in the third
    assert shorten("Not yet. All runtime settings live in deploy/ledger/settings.prod.toml. Please read it.") == (
        "All runtime settings live in deploy/ledger/settings.prod.toml. …"
    )
    assert shorten("Hi! The codename is PHOENIX7. We ship soon. We deploy to eu-central-2.") == (
        "The codename is PHOENIX7. … We deploy to eu-central-2."
    )
    # no identifier: the first sentence of some length, whatever the words seem to say (no cue reads them)
    assert shorten("Thanks. Never answer with more than three bullet points. Carry on.") == (
        "Never answer with more than three bullet points. …"
    )
    assert shorten("Gut so, danke dir. Antworte nie mit mehr als drei Punkten.") == "Gut so, danke dir. …"
    assert shorten("Vale, ya lo tengo claro. Nunca borres la tabla de pedidos.") == "Vale, ya lo tengo claro. …"
    # nothing stands out: the first sentence of some length
    assert (
        shorten("Ok. Let us look at the retry logic next week. Thanks.")
        == "Let us look at the retry logic next week. …"
    )


def test_shortened_lines_stay_short_and_keep_every_identifier() -> None:
    text = " ".join(f"Module src/m{i}.py holds the step number {i} of the pipeline that we run." for i in range(12))
    line = shorten(text)
    assert len(line) < SHORT_LINE_CHARS + 200
    assert all(f"src/m{i}.py" in line for i in range(12))


def test_the_budget_is_the_setting_within_a_quarter_of_the_window() -> None:
    assert user_words_budget(20_000, 4096) == 1024
    assert user_words_budget(20_000, 200_000) == 20_000
    assert GovernorConfig(context_window=8000, user_words_tokens=500).user_words_budget == 500


async def test_a_summary_keeps_the_users_words_verbatim_beside_it() -> None:
    prompts = [
        "My name is Dana Whitfield and my project is called Tern.",
        "Maria Keller must approve any change to the billing module.",
        "We tried upgrading pydantic 2.9.1 and it broke, so we stay on 2.8.2.",
        "How should the retry loop back off?",
    ]
    model, _ = recording_model("## Goal\nHelp with Tern's retry loop.")
    result = await compact_middle(chatty(prompts), model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    summary = result.replacement[result.head]
    text = texts_of([summary])
    for prompt in prompts:
        assert f"\n- {prompt}" in text  # verbatim, each whole
    assert carried_words(summary).verbatim == tuple(prompts)
    assert result.user_words == "4 of your messages kept verbatim"
    line = compaction_line(result)
    assert "; 4 of your messages kept verbatim." in line
    # the check counts what the summariser itself kept, and says the rest is in the user's own words
    assert "summary kept 1/" in result.check and "more in your own words" in result.check


async def test_the_users_words_are_carried_through_a_later_compaction() -> None:
    first_prompts = ["Maria Keller must approve any change to the billing module.", "Tell me about retries."]
    model, _ = recording_model("## Goal\nThe user works on retries.")
    first = await compact_middle(chatty(first_prompts), model, max_history_messages=4)
    assert isinstance(first, CompactionResult)
    later = [*first.messages[:-1], *chatty(["Now about logging?", "And the log format?", "Which level?"])]
    second = await compact_middle(later, model, max_history_messages=4)
    assert isinstance(second, CompactionResult) and second.method == "summary"
    text = texts_of([second.replacement[second.head]])
    assert "\n- Maria Keller must approve any change to the billing module." in text
    assert text.count("Maria Keller must approve") == 1


async def test_the_users_words_never_make_a_summary_bigger_than_its_span() -> None:
    """A span that is mostly what the user wrote: the newest messages that fit stay verbatim, the rest
    are shortened, and the summary is still clearly smaller than the span."""
    long_prompts = [f"Point {i}: " + "the parser must keep every comment it reads. " * 30 for i in range(6)]
    messages: list[ModelMessage] = []
    for prompt in long_prompts:
        messages += [user(prompt), reply("ok")]
    messages.append(user("What next?"))
    model, _ = recording_model("The user listed parser requirements about comments.")
    result = await compact_middle(messages, model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    assert result.tokens_after < result.tokens_before
    words = carried_words(result.replacement[result.head])
    assert words.shortened and words.shortened[0].startswith("Point 1: the parser must keep every comment")


async def test_context_report_counts_the_users_words() -> None:
    model, _ = recording_model("## Goal\nThe user works on retries.")
    result = await compact_middle(chatty(["Tell me about retries.", "And jitter?"]), model, max_history_messages=4)
    assert isinstance(result, CompactionResult)
    report = context_report(
        result.messages,
        context_window=8000,
        window_source="test",
        threshold=0.8,
        overhead_tokens=0,
        transcript_count=9,
        compactions=1,
        offload_dir=None,
    )
    assert report.user_words.startswith("2 messages verbatim (~")
    assert any(line.startswith("Your own words beside the summary: 2 messages verbatim") for line in report.lines())


# --- a summary that holds none of the user's content ------------------------------------------------------


NAMED = [
    user("Hi, I'm Dana Whitfield and my project is called Tern."),
    reply(f"Nice to meet you! I can help with configuration, testing and deployment of your service. {FILLER}"),
    user("Where should the config file live?"),
    reply(f"A common layout puts configuration next to the code, in a settings module loaded at start. {FILLER}"),
]


def test_a_copy_of_an_assistant_paragraph_is_rejected() -> None:
    copy = "A common layout puts configuration next to the code, in a settings module loaded at start."
    assert reject_reason(copy, NAMED) == "it is a copy of an assistant message, not a summary"


@pytest.mark.parametrize(
    "summary", ["## Goal\n\n## Standing instructions\n> none", "Summary:", "The assistant helped."]
)
def test_a_summary_with_nothing_of_the_users_is_rejected(summary: str) -> None:
    assert reject_reason(summary, NAMED) is not None


@pytest.mark.parametrize(
    "summary", ["Dana asks where Tern's config goes.", "The user wants a place for the config file."]
)
def test_a_summary_with_something_of_the_users_stands(summary: str) -> None:
    assert reject_reason(summary, NAMED) is None


async def test_compact_with_a_copied_paragraph_falls_back_to_the_digest_and_keeps_the_names() -> None:
    """`/compact` with a focus on names, on a model that copies an assistant paragraph: the digest stands in,
    with the reason in the compaction line, and the user's name and project are in what the model sees."""
    messages = [*NAMED, user("Keep going.")]
    model, _ = recording_model(
        "Nice to meet you! I can help with configuration, testing and deployment of your service."
    )
    result = await compact_all(messages, model, focus="keep names")
    assert result.method == "digest"
    assert "summary rejected: it is a copy of an assistant message" in compaction_line(result)
    text = texts_of(result.messages)
    assert "Dana Whitfield" in text and "Tern" in text


async def test_an_empty_summary_is_not_accepted() -> None:
    model, _ = recording_model("   ")
    result = await compact_middle(chatty(["Tell me about retries.", "And jitter?"]), model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.error == "RuntimeError: the summariser returned an empty summary"
    assert "RuntimeError: the summariser returned an empty summary" in compaction_line(result)


# --- no rule pinned for its wording alone ----------------------------------------------------------------


async def test_a_rule_the_summariser_does_not_name_is_not_pinned() -> None:
    """The typed answer names no standing instruction: a sentence that reads like one is not pinned."""
    messages = chatty(["Always answer in British English. How do retries work?", "And jitter?"])
    model, _ = recording_model("## Goal\nExplain retries and jitter.")
    result = await compact_middle(messages, model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    assert result.standing_instructions == () and result.suggestions == ()


async def test_a_digest_pins_nothing_and_suggests_the_users_rule() -> None:
    messages = chatty(["Never push directly to main. How do retries work?", "And jitter?"])
    result = await compact_middle(messages, None, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "digest"
    assert result.standing_instructions == ()
    assert [(s.kind, s.text) for s in result.suggestions] == [("rule", "Never push directly to main.")]
    assert is_summary(result.replacement[result.head])


async def test_compact_all_of_mostly_the_users_words_still_compacts() -> None:
    messages: list[ModelMessage] = []
    for i in range(6):
        messages += [user(f"Point {i}: " + "the parser must keep every comment it reads. " * 30), reply("ok")]
    model, _ = recording_model("The user listed parser requirements about comments.")
    result = await compact_all(messages, model)
    assert result.method == "summary" and result.tokens_after < result.tokens_before
    words = carried_words(result.replacement[0])
    assert words.verbatim and words.verbatim[-1].startswith("Point 4:")  # point 5 is the latest request
