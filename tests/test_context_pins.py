"""The summariser's quotes checked against what the user typed: found (widened to the user's sentence) or
dropped and counted, in any script, with no reading of what the words mean."""

from __future__ import annotations

import unicodedata

from co_cli.context.pins import MAX_QUOTE_CHARS, find_quote, normalise, occurs, sentences, verify_quotes
from co_cli.context.user_words import user_entries
from co_cli.synthetic import summary_request
from tests.support.messages import ack, reply, user

TEXTS = [
    "How does the cache warm up? I keep seeing W-2291 after a restart.",
    "- Always tag releases with a signed tag.\n- Never rebase the shared branch.\n"
    "The build runner lives in hall-3. I was reading about queues yesterday.",
    "please keep the answers brief, long ones tire me",
    "Don’t log secrets to stdout. We chose DuckDB because it runs offline.",
]


def test_an_invented_quote_is_dropped_and_counted() -> None:
    verified = verify_quotes(["Always use structured logging.", "Never rebase the shared branch."], TEXTS)
    assert verified.kept == ("Never rebase the shared branch.",)
    assert verified.dropped == 1
    assert find_quote("Never rebase the main branch.", TEXTS) is None


def test_a_fragment_is_widened_to_the_users_whole_sentence_verbatim() -> None:
    assert find_quote("never rebase the shared", TEXTS) == "Never rebase the shared branch."
    assert find_quote("keep the answers brief", TEXTS) == "please keep the answers brief, long ones tire me"


def test_case_whitespace_punctuation_and_code_marks_are_ignored() -> None:
    assert find_quote("ALWAYS tag   releases with a `signed` tag", TEXTS) == "Always tag releases with a signed tag."
    assert find_quote('"don\'t log secrets to stdout."', TEXTS) == "Don’t log secrets to stdout."
    assert find_quote("**Never** rebase the shared branch!", TEXTS) == "Never rebase the shared branch."


def test_what_the_quote_says_is_not_judged_only_where_it_comes_from() -> None:
    """A question or a plain statement the model lists is found as well: the model classifies, co checks
    that the words are the user's."""
    assert find_quote("how does the cache warm up", TEXTS) == "How does the cache warm up?"
    assert find_quote("The build runner lives in hall-3", TEXTS) == "The build runner lives in hall-3."


def test_a_quote_over_two_sentences_is_widened_to_both() -> None:
    assert find_quote("Never rebase the shared branch. The build runner", TEXTS) == (
        "Never rebase the shared branch. The build runner lives in hall-3."
    )


def test_too_short_quotes_are_dropped_and_repeats_kept_once() -> None:
    verified = verify_quotes(["the", "", "Never rebase the shared branch", "never rebase the shared"], TEXTS)
    assert verified.kept == ("Never rebase the shared branch.",)
    assert verified.dropped == 2


def test_the_newest_message_that_holds_a_quote_wins() -> None:
    texts = ["Indent the old scripts with tabs.", "From today on, indent everything with tabs."]
    assert find_quote("indent everything with tabs", texts) == "From today on, indent everything with tabs."
    assert find_quote("with tabs", texts) == "From today on, indent everything with tabs."


def test_a_paragraph_without_stops_keeps_only_the_quote_as_written() -> None:
    long = "keep going " * 60 + "and Mind The Gap between the platforms " + "keep going " * 20
    assert len(long) > MAX_QUOTE_CHARS
    assert find_quote("mind the gap between the platforms", [long]) == "Mind The Gap between the platforms"


def test_german_spanish_and_accents_composed_or_not() -> None:
    texts = [
        "Bitte schreib Größenangaben immer in Millimetern. Danke!",
        "Nunca publiques la versión sin la revisión de Lucía.",
    ]
    decomposed = unicodedata.normalize("NFD", "nunca publiques la versión")
    assert find_quote(decomposed, texts) == "Nunca publiques la versión sin la revisión de Lucía."
    assert find_quote("GRÖSSENANGABEN IMMER IN MILLIMETERN", texts) == (
        "Bitte schreib Größenangaben immer in Millimetern."
    )  # ß case-folds to ss


def test_japanese_without_spaces_and_full_width_forms() -> None:
    texts = ["今日はありがとう。これからは必ず敬語で答えてください。ファイルはＡＢＣ－１２に置きます。"]
    assert find_quote("必ず敬語で答えて", texts) == "これからは必ず敬語で答えてください。"
    assert find_quote("ABC-12に置きます", texts) == "ファイルはＡＢＣ－１２に置きます。"
    assert find_quote("必ず英語で答えて", texts) is None


def test_russian_in_any_case() -> None:
    texts = ["Спасибо. Никогда не удаляй старые миграции! Сервер теперь в Казани."]
    assert find_quote("НИКОГДА НЕ УДАЛЯЙ старые миграции", texts) == "Никогда не удаляй старые миграции!"
    assert occurs("Казани", texts) and not occurs("Москве", texts)


def test_sentences_in_several_scripts() -> None:
    assert sentences("First one. second e.g. this one! Third?\n- item one\n2) item two") == [
        "First one. second e.g. this one!",
        "Third?",
        "item one",
        "item two",
    ]
    assert sentences("まず確認します。次はテストです！本当？") == ["まず確認します。", "次はテストです！", "本当？"]
    assert sentences('Er sagte "Stopp." Dann ging er.') == ['Er sagte "Stopp."', "Dann ging er."]


def test_normalise_keeps_letters_and_digits_of_any_script() -> None:
    assert normalise("Ｈｅｌｌｏ, World! 42") == "helloworld42"
    assert normalise("¿Dónde está?") == normalise("dónde  ESTÁ") != normalise("donde esta")  # accents count
    assert normalise("東京 タワー。") == "東京タワー"


def test_an_earlier_summary_s_prose_is_not_the_users_but_the_words_it_carries_are() -> None:
    earlier = summary_request(
        10, "Never deploy on Sundays.", carried={"user_words": {"verbatim": ["Ship on Tuesdays."]}}
    )
    span = [earlier, ack(), user("hello there"), reply("Hi. Never deploy on Sundays.")]
    texts = [entry.text for entry in user_entries(span)[0]]
    assert find_quote("Never deploy on Sundays", texts) is None  # the summary's prose and the assistant's
    assert find_quote("ship on tuesdays", texts) == "Ship on Tuesdays."
