"""The next step and the changes the user stated, quoted into an accepted summary."""

from __future__ import annotations

import pytest

from co_cli.context.compact import CompactionResult, compact_middle
from co_cli.context.summarize import standing_instruction_quotes
from co_cli.context.user_quotes import CHANGES, NEXT_STEP, quote_user, stated
from co_cli.context.user_words import USER_WORDS_HEADING, Entry
from tests.test_context_fixtures import recording_model, texts_of
from tests.test_context_user_words import chatty

pytestmark = pytest.mark.anyio


def test_the_users_stated_next_step_is_quoted_under_the_summarys_pending_heading() -> None:
    entries = [
        Entry("The demo is on March 14. Next step once we are done here: write scripts/backfill.py."),
        Entry("What is the next step for the parser?"),  # a question states no step
    ]
    quotes = stated(entries, NEXT_STEP)
    assert quotes == ["Next step once we are done here: write scripts/backfill.py."]
    body = "## Goal\nShip the ledger.\n\n## Pending and next step\n- Add an outbox table.\n"
    text = quote_user(body, NEXT_STEP, quotes)
    assert text.index("## Pending and next step") < text.index(NEXT_STEP.heading) < text.index("> Next step once")
    assert text.index("> Next step once") < text.index("- Add an outbox table.")
    # no such heading: at the end; already there: not repeated; nothing to quote: unchanged
    assert quote_user("## Goal\nShip it.", NEXT_STEP, quotes).endswith(
        "> Next step once we are done here: write scripts/backfill.py."
    )
    assert quote_user(text, NEXT_STEP, quotes) == text
    assert quote_user(body, NEXT_STEP, []) == body


def test_the_changes_the_user_stated_are_quoted_newest_last_and_never_become_pins() -> None:
    entries = [
        Entry("The staging database is on staging-db-02 for now."),
        Entry("~ Correction: the staging database moved to staging-db-05 this morning. … [staging-db-05]"),
        Entry("We no longer deploy on Fridays. Why did the build fail?"),
        Entry("Could we switch to Postgres instead of SQLite?"),  # a question changes nothing
    ]
    quotes = stated(entries, CHANGES)
    assert quotes == [
        "Correction: the staging database moved to staging-db-05 this morning.",
        "We no longer deploy on Fridays.",
    ]
    body = "## Goal\nShip it.\n\n## Standing instructions\n> none"
    text = quote_user(body, CHANGES, quotes)
    # before the summary's standing instructions, whose "> " lines are read as rules to pin
    assert text.index(CHANGES.heading) < text.index("## Standing instructions")
    assert standing_instruction_quotes(text) == []
    assert text.endswith("## Standing instructions\n> none")


async def test_an_accepted_summary_quotes_the_next_step_and_the_change_the_user_stated() -> None:
    """A summariser writes its own idea of the next step under "Pending"; the user's stated one is quoted
    right under that heading, the user's correction at the end of the summary, each once only after a later
    compaction."""
    prompts = [
        "The demo is on March 14. Next step once we are done here: write scripts/backfill.py for last month.",
        "How does the outbox table work?",
        "Correction: the staging database moved to staging-db-05 this morning.",
    ]
    body = "## Goal\nShip the ledger service.\n\n## Pending and next step\n- Create the outbox table."
    model, _ = recording_model(body)
    result = await compact_middle(chatty(prompts), model, max_history_messages=4)
    assert isinstance(result, CompactionResult) and result.method == "summary"
    text = texts_of([result.replacement[result.head]])
    quote = "> Next step once we are done here: write scripts/backfill.py for last month."
    assert text.index("## Pending and next step") < text.index(quote) < text.index("- Create the outbox table.")
    change = "> Correction: the staging database moved to staging-db-05 this morning."
    assert text.index("- Create the outbox table.") < text.index(change) < text.index(USER_WORDS_HEADING)
    later = [*result.messages[:-1], *chatty(["Now about logging?", "And the log format?", "Which level?"])]
    copied = texts_of([result.replacement[result.head]]).split("\n\n" + USER_WORDS_HEADING)[0]
    model, _ = recording_model(copied)  # a summariser that copies the earlier summary, quote and all
    second = await compact_middle(later, model, max_history_messages=4)
    assert isinstance(second, CompactionResult) and second.method == "summary"
    assert texts_of([second.replacement[second.head]]).count(quote) == 1
    assert texts_of([second.replacement[second.head]]).count(change) == 1
