"""The identifier ledger: extraction, the summary check, the "Kept verbatim" list and its round trip."""

from __future__ import annotations

import time

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart

from co_cli.context.ledger import (
    KEPT_VERBATIM_HEADING,
    Identifier,
    append_missing,
    check_summary,
    complete_paths,
    extract_identifiers,
    find_identifiers,
    kept_verbatim,
    reconcile,
    select_missing,
    split_kept_verbatim,
)
from co_cli.synthetic import mark, summary_request
from tests.support.messages import ack, calls, reply, returns, static_marker, summary_message, user
from tests.support.planted_facts import FACTS, planted_conversation


def texts(messages: list[ModelMessage]) -> list[str]:
    return [ident.text for ident in extract_identifiers(messages)]


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("Config lives at deploy/settings/prod.toml now.", "deploy/settings/prod.toml", "path"),
        ("Edit ~/.config/co/settings.json please", "~/.config/co/settings.json", "path"),
        ("the file README.md is stale", "README.md", "path"),
        ("run ./scripts/release.sh", "./scripts/release.sh", "path"),
        ("logs go to /var/log/ledger", "/var/log/ledger", "path"),
        ("see the Makefile", "Makefile", "path"),
        ("secrets are in .env only", ".env", "path"),
        ("docs at https://example.com/docs/setup?x=1.", "https://example.com/docs/setup?x=1", "url"),
        ("it listens on port 8443 today", "8443", "number"),
        ("we have 10,000 users", "10,000", "number"),
        ("upgrade to v1.2.3 failed", "v1.2.3", "version"),
        ("python 3.11 is required", "3.11", "version"),
        ("the host is 10.0.0.12", "10.0.0.12", "address"),
        ("the freeze starts 2026-03-14.", "2026-03-14", "date"),
        ("the demo is on March 14, be ready", "March 14", "date"),
        ("due 14 March 2026", "14 March 2026", "date"),
        ("boot fails with E4471 sometimes", "E4471", "error_code"),
        ("the socket died with ECONNRESET", "ECONNRESET", "error_code"),
        ("we hit ERR_LEDGER_LOCK again", "ERR_LEDGER_LOCK", "error_code"),
        ("it raised ConnectionResetError", "ConnectionResetError", "error_code"),
        ("the codename is PHOENIX7.", "PHOENIX7", "codename"),
        ("deploy to us-east-1 first", "us-east-1", "hyphenated"),
        ("install pre-commit hooks", "pre-commit", "hyphenated"),
        ("pass --max-history-messages to it", "--max-history-messages", "flag"),
        ("call config.load() at start", "config.load", "call"),
        ("use os.path.join(a, b) here", "os.path.join", "call"),
        ("the module co_cli.context.ledger", "co_cli.context.ledger", "dotted"),
        ("the setting max_history_messages", "max_history_messages", "name"),
        ("the ContextGovernor class", "ContextGovernor", "name"),
        ("we chose SQLite", "SQLite", "name"),
        ("set LEDGER_TIMEOUT=45 first", "LEDGER_TIMEOUT=45", "setting"),
        ("ask @okafor-d for review", "@okafor-d", "handle"),
        ("run `pytest -x tests/` now", "pytest -x tests/", "command"),
        ("install `ruff` first", "ruff", "command"),
        ('the banner says "maintenance until noon" today', "maintenance until noon", "quoted"),
        ("reply with 'all systems go' when done", "all systems go", "quoted"),
        ("Maria Keller must approve any change to billing.", "Maria Keller", "proper"),
        ("changes to the parser go through Priya Raman first", "Priya Raman", "proper"),
        ("Priya must approve the schema change.", "Priya", "proper"),
        ("Hi, my name is Dana and I work on it", "Dana", "proper"),
        ("my project is called Tern, a ledger tool", "Tern", "proper"),
        ("We tried upgrading pydantic 2.9.1 and it broke", "pydantic", "package"),
        ("then pip install -U httpx-auth again", "httpx-auth", "package"),
        ("use the requests library for that", "requests", "package"),
    ],
)
def test_kinds(text: str, expected: str, kind: str) -> None:
    found = dict(find_identifiers(text))
    assert found.get(expected) == kind, found


def test_a_name_with_two_spaces_or_a_tab_inside_is_found_as_one_name() -> None:
    """The name patterns allow several spaces or a tab between its words: the name is found, its words joined by
    one space (it raised, and took compaction's fallback digest down with it)."""
    text = "The release owner is Haruto  Sato, see the Osaka\tOffice Wiki. Reviewed by Kenji   Mori"
    assert find_identifiers(text) == [("Haruto Sato", "proper"), ("Osaka Office Wiki", "proper"),
                                      ("Kenji Mori", "proper")]  # fmt: skip


def test_shell_code_block_lines_are_commands() -> None:
    found = find_identifiers("Run:\n```bash\n$ git push origin main\n# a comment\nls -la /tmp\n```\nthen wait.")
    assert ("git push origin main", "command") in found
    assert ("ls -la /tmp", "command") in found
    assert not any("comment" in text for text, _ in found)


def test_shell_comments_are_not_part_of_the_command() -> None:
    found = find_identifiers("```sh\necho '# kept' # dropped\ngit log  # show history\n```")
    assert found == [("echo '# kept'", "command"), ("git log", "command")]


def test_one_letter_code_spans_pair_their_own_backticks() -> None:
    assert find_identifiers("`y` runs it once, `n` denies it (the model is told), `a` allows") == []


def test_long_unbroken_runs_are_skipped_quickly() -> None:
    started = time.perf_counter()
    for text in ("x" * 100_000, "a_" * 20_000, "A1" * 20_000, "a-" * 20_000):
        assert find_identifiers(text) == []
    assert time.perf_counter() - started < 2.0  # seconds each before long runs were skipped


def test_code_in_other_blocks_is_read_as_text() -> None:
    found = dict(find_identifiers("```python\nresult = requests.get(url, timeout=30)\n```"))
    assert found.get("requests.get") == "call"


@pytest.mark.parametrize(
    "text",
    [
        "Yes, that is a good idea and we should do it now.",
        "It's a well-known, long-term, self-contained follow-up.",
        "Check the file(s), e.g. the big one, i.e. the log.",
        "and/or client/server",
        "We have 12 servers and 40 users.",
        "API JSON HTTP OK!!! ... --- ???",
        "`ok` and `no` and `-x`",
        "The Monday meeting is fine. Thanks!",
        "Yes, please do. Every time it fails, we try again with the same setup.",
    ],
)
def test_junk_is_not_an_identifier(text: str) -> None:
    assert find_identifiers(text) == []


def test_an_identifier_is_not_split_into_smaller_ones() -> None:
    found = [text for text, _ in find_identifiers("see https://example.com/v1.2.3/app.py and 2026-03-14")]
    assert found == ["https://example.com/v1.2.3/app.py", "2026-03-14"]


def test_sources_and_order_user_first() -> None:
    messages: list[ModelMessage] = [
        user("Deploy PHOENIX7 to us-east-1."),
        calls(("run_shell", {"command": "make deploy REGION=eu-west-3"}, "c1")),
        returns(("run_shell", "exit code: 0\nstdout: deployed to zone-42a at 10.1.2.3", "c1")),
        reply("Done: config.yaml updated and PHOENIX7 deployed."),
        user("Now open port 8443."),
    ]
    found = extract_identifiers(messages)
    assert [(i.text, i.source) for i in found] == [
        ("PHOENIX7", "user"),
        ("us-east-1", "user"),
        ("8443", "user"),
        ("config.yaml", "assistant"),
        ("make deploy REGION=eu-west-3", "tool"),
        ("REGION=eu-west-3", "tool"),
        ("zone-42a", "tool"),  # a short tool result is a source: the value looked up
        ("10.1.2.3", "tool"),
    ]


def test_only_short_tool_results_are_a_source() -> None:
    """A long output is noise; a short one is often the only place a looked-up value was written."""
    long_output = "\n".join(f"src/module_{k}.py:{k}: schema_version = {k}" for k in range(20))
    messages: list[ModelMessage] = [
        calls(("run_shell", {"command": "grep -n lock_timeout settings.toml"}, "c1")),
        returns(("run_shell", "exit code: 0\nstdout:\n12:lock_timeout_ms = 7350\nstderr: (empty)", "c1")),
        calls(("grep", {"pattern": "schema_version"}, "c2")),
        returns(("grep", long_output, "c2")),
    ]
    found = texts(messages)
    assert "7350" in found and "lock_timeout_ms" in found
    assert "src/module_3.py" not in found


def test_tool_arguments_as_json_text() -> None:
    messages: list[ModelMessage] = [calls(("read_file", '{"path": "src/app/main.py", "offset": 0}', "c1"))]
    found = extract_identifiers(messages)
    assert Identifier("src/app/main.py", "path", "tool") in found


def test_acknowledgements_are_skipped_by_mark_not_wording() -> None:
    marked = mark(ModelResponse(parts=[TextPart("Noted PHOENIX9 and /etc/ledger.conf")]), "ack")
    unmarked = ModelResponse(parts=[TextPart("Noted PHOENIX8")])
    assert texts([ack(), marked, unmarked]) == ["PHOENIX8"]


def test_thinking_is_not_a_source() -> None:
    response = ModelResponse(parts=[ThinkingPart("maybe PHOENIX9?"), TextPart("use PHOENIX8")])
    assert texts([response]) == ["PHOENIX8"]


def test_summary_is_a_source_without_its_prefix() -> None:
    summary = summary_request(120, "The user works on PHOENIX7 (port 8443).")
    found = extract_identifiers([summary])
    assert [(i.text, i.source) for i in found] == [("PHOENIX7", "summary"), ("8443", "summary")]
    assert "120" not in texts([summary])


def test_summary_ranks_with_user_messages_in_message_order() -> None:
    messages: list[ModelMessage] = [
        summary_request(8, "Earlier: codename PHOENIX7."),
        ack(),
        reply("see notes.md"),
        user("And the region is us-east-1."),
    ]
    assert texts(messages) == ["PHOENIX7", "us-east-1", "notes.md"]


def test_static_marker_has_no_identifiers_but_its_carried_request_does() -> None:
    assert texts([summary_message(static_marker(250))]) == []
    marker = summary_request(250, None, latest="fix E4471 please")
    assert texts([marker]) == ["E4471"]


def test_a_prompt_worded_like_a_summary_is_the_users() -> None:
    prompt = user("[Summary of 5 earlier messages]\nuse PHOENIX7")
    assert [(i.text, i.source) for i in extract_identifiers([prompt])] == [("PHOENIX7", "user")]


def test_kept_verbatim_items_are_read_back_whole() -> None:
    body = (
        "Worked on the deploy.\n\nKept verbatim:\n- pytest -x  tests/unit\n- PHOENIX7\n- `git push origin main`\n"
        "- never push on fridays\n\nAfterwards: nothing."
    )
    summary = summary_request(10, body)
    found = {i.text: i for i in extract_identifiers([summary])}
    assert found["pytest -x  tests/unit"].kind == "verbatim"
    assert found["PHOENIX7"].kind == "codename"
    assert found["git push origin main"].source == "summary"
    assert "never push on fridays" in found
    prose, items = split_kept_verbatim(body)
    assert "PHOENIX7" not in prose and "Afterwards: nothing." in prose
    assert items == ["pytest -x  tests/unit", "PHOENIX7", "git push origin main", "never push on fridays"]


@pytest.mark.parametrize("heading", ["Kept verbatim:", "**Kept verbatim:**", "## Kept verbatim", "kept verbatim"])
def test_kept_verbatim_heading_variants(heading: str) -> None:
    assert kept_verbatim(f"Summary.\n{heading}\n* PHOENIX7\n1. us-east-1\n") == ["PHOENIX7", "us-east-1"]


def test_check_summary_case_sensitive_and_bounded() -> None:
    idents = [
        Identifier("PHOENIX7", "codename", "user"),
        Identifier("800", "number", "user"),
        Identifier("us-east-1", "hyphenated", "user"),
        Identifier("Config.py", "path", "assistant"),
    ]
    check = check_summary("phoenix7 runs on port 8000 in us-east-1; see Config.py.", idents)
    assert [i.text for i in check.kept] == ["us-east-1", "Config.py"]
    assert [i.text for i in check.missing] == ["PHOENIX7", "800"]
    assert check.line() == "summary kept 2/4 identifiers; 2 appended"
    assert check.line(appended=1) == "summary kept 2/4 identifiers; 1 appended, 1 over the limit"


def test_check_summary_whitespace_normalised_for_commands_and_quotes() -> None:
    idents = [
        Identifier("pytest -x   tests/", "command", "user"),
        Identifier("never push on fridays", "quoted", "user"),
        Identifier("a  b.py", "path", "user"),
    ]
    check = check_summary("Run `pytest -x\ntests/` and never  push on fridays. a b.py", idents)
    assert [i.text for i in check.missing] == ["a  b.py"]


def test_check_line_when_nothing_to_check_or_all_kept() -> None:
    assert check_summary("anything", []).line() == "no identifiers to check"
    ident = Identifier("PHOENIX7", "codename", "user")
    assert check_summary("PHOENIX7", [ident]).line() == "summary kept 1/1 identifiers"


def test_append_missing_user_first_and_bounded() -> None:
    idents = [Identifier(f"tool-{i:03d}", "hyphenated", "tool") for i in range(5)]
    idents += [Identifier(f"user-{i:03d}", "hyphenated", "user") for i in range(5)]
    check = check_summary("nothing here", idents)
    text = append_missing("nothing here", check, max_items=7)
    assert kept_verbatim(text) == [f"user-{i:03d}" for i in range(5)] + ["tool-000", "tool-001"]
    small = append_missing("nothing here", check, max_chars=60)
    assert len(small) - len("nothing here") <= 62
    assert kept_verbatim(small)[0] == "user-000"


def test_append_missing_unchanged_when_nothing_missing() -> None:
    ident = Identifier("PHOENIX7", "codename", "user")
    assert append_missing("PHOENIX7 rules", check_summary("PHOENIX7 rules", [ident])) == "PHOENIX7 rules"


def test_append_missing_round_trips_every_kind() -> None:
    messages: list[ModelMessage] = [
        user(
            "Codename PHOENIX7, region us-east-1, port 8443, config deploy/prod.toml, error E4471, "
            'v2.9.1 broke, demo on March 14, run `make test FAST=1`, rule "never push on fridays", '
            "see https://example.com/x, call config.load() and co_cli.context, set LEDGER_TIMEOUT=45, ask @okafor-d."
        ),
        calls(("run_shell", {"command": "pytest -x  -q"}, "c1")),
        returns(("run_shell", "exit code: 0", "c1")),
    ]
    idents = extract_identifiers(messages)
    assert len(idents) >= 15
    text = append_missing("A lossy summary.", check_summary("A lossy summary.", idents))
    assert text.startswith("A lossy summary.\n\n" + KEPT_VERBATIM_HEADING)
    again = extract_identifiers([summary_request(3, text)])
    assert {i.text for i in again} == {i.text for i in idents}
    assert check_summary(text, idents).missing == ()


def test_reconcile_reports_what_it_appended() -> None:
    messages: list[ModelMessage] = [user("PHOENIX7 on us-east-1 port 8443")]
    result = reconcile("PHOENIX7 somewhere.", messages)
    assert result.line() == "summary kept 1/3 identifiers; 2 appended"
    # one line gives both, with the sentence they were written in
    assert kept_verbatim(result.text) == ["us-east-1 — PHOENIX7 on us-east-1 port 8443"]
    sentence = "PHOENIX7 on us-east-1 port 8443"
    assert select_missing(result.check, max_items=1) == [Identifier("us-east-1", "hyphenated", "user", sentence)]


def test_a_listed_identifier_keeps_the_sentence_it_was_written_in_through_later_summaries() -> None:
    """A bare "9321" in the list says nothing of what it numbers: the user's sentence goes with it, and is
    read back from the list, so a summary of that summary carries both again."""
    span: list[ModelMessage] = [
        user("Morning. Inside the cluster the cart service listens on 7710. Can you check the probe?"),
        reply("Sure."),
    ]
    first = reconcile("The user asked about the probe.", span)
    assert kept_verbatim(first.text) == ["7710 — Inside the cluster the cart service listens on 7710."]
    again = reconcile("Still about the probe.", [summary_request(2, first.text), ack()])
    assert kept_verbatim(again.text) == kept_verbatim(first.text)
    # a summary that keeps the number needs no line, sentence or not
    assert reconcile("The cart service listens on 7710.", [summary_request(2, first.text)]).appended == 0


def test_sentences_are_given_only_while_the_list_fits_and_never_cost_an_identifier() -> None:
    words = " ".join(f"word{i}" for i in range(25))
    span: list[ModelMessage] = [user(f"First the port 7710 {words}. Then the host db-primary-3 {words}.")]
    check = check_summary("Nothing.", extract_identifiers(span))
    roomy = kept_verbatim(append_missing("Nothing.", check))
    assert [item.split(" — ")[0] for item in roomy] == ["7710", "db-primary-3"]
    assert all(" — " in item for item in roomy)
    tight = kept_verbatim(append_missing("Nothing.", check, max_chars=260))
    assert tight[0].startswith("7710 — ") and tight[1] == "db-primary-3"  # the second sentence did not fit
    assert kept_verbatim(append_missing("Nothing.", check, max_chars=40)) == ["7710", "db-primary-3"]


def test_identifiers_survive_any_number_of_lossy_compactions() -> None:
    """A summariser that keeps nothing: the ledger alone carries every planted fact through ten rounds."""
    conversation = planted_conversation()
    messages = conversation.messages
    chunk = 12
    summary: ModelMessage | None = None
    for round_start in range(0, len(messages), chunk):
        span = ([summary, ack()] if summary is not None else []) + messages[round_start : round_start + chunk]
        result = reconcile("The user asked a few general questions.", span)
        summary = summary_request(len(span), result.text)
    assert summary is not None
    rounds = (len(messages) + chunk - 1) // chunk
    assert rounds >= 8
    final = "\n".join(part.content for part in summary.parts if isinstance(part.content, str))
    missing = [fact.key for fact in FACTS if fact.key not in final]
    assert missing == []
    assert len(final) < 2600  # bounded: the list does not grow without limit


def test_a_later_summary_that_keeps_the_identifiers_needs_no_list() -> None:
    span: list[ModelMessage] = [summary_request(9, "x\n\nKept verbatim:\n- PHOENIX7\n- us-east-1"), ack()]
    result = reconcile("Codename PHOENIX7 in us-east-1.", span)
    assert result.text == "Codename PHOENIX7 in us-east-1."
    assert result.line() == "summary kept 2/2 identifiers"


def test_names_the_user_wrote_are_kept_by_the_ledger() -> None:
    """A summary that drops a person's name or the failed library's name gets them appended verbatim."""
    span = [
        user("Maria Keller must approve changes to the billing code."),
        reply("Noted."),
        user("We tried upgrading pydantic 2.9.1 and it broke the validators."),
        reply("Understood."),
    ]
    result = reconcile("The billing code needs an approval; an upgrade to 2.9.1 failed.", span)
    assert "- Maria Keller" in result.text
    assert "- pydantic" in result.text


def test_a_bare_file_name_in_a_summary_is_written_as_the_one_path_it_stands_for() -> None:
    identifiers = [
        Identifier("deploy/ledger/settings.prod.toml", "path", "user"),
        Identifier("src/a/util.py", "path", "tool"),
        Identifier("src/b/util.py", "path", "tool"),
        Identifier("/var/run/ledger.lock", "path", "user"),
    ]
    summary = (
        "Settings live in `settings.prod.toml`; deploy/ledger/settings.prod.toml is read at start. "
        "util.py differs between packages. Delete ledger.lock on E4471; see settings.prod.toml.bak and "
        "old/settings.prod.toml."
    )
    assert complete_paths(summary, identifiers) == (
        "Settings live in `deploy/ledger/settings.prod.toml`; deploy/ledger/settings.prod.toml is read at start. "
        "util.py differs between packages. Delete /var/run/ledger.lock on E4471; see settings.prod.toml.bak and "
        "old/settings.prod.toml."
    )
    assert complete_paths("Nothing to do.", identifiers) == "Nothing to do."


def test_a_summarys_headings_names_and_cut_sentences_are_listed_bare() -> None:
    """From a summary's prose, a name the summariser capitalised and a heading carry no sentence (it would be
    the summariser's own label), nor does a sentence cut short; a sentence of the prose that says what a number
    is goes with it."""
    prose = (
        "## Goal: Improve Checkout latency\n"
        "**Basket Validation**: check a basket before stock is reserved.\n"
        "Inside the cluster the checkout API answers on 9321.\n"
        "The user said the cache lives on … so cache-node-09 is the host now."
    )
    listed = kept_verbatim(reconcile("Nothing kept.", [summary_request(12, prose), ack()]).text)
    assert "Improve Checkout" in listed and "Basket Validation" in listed and "cache-node-09" in listed
    assert "9321 — Inside the cluster the checkout API answers on 9321." in listed
    # a user's own sentence still goes with its identifier
    span: list[ModelMessage] = [user("Before the refunds table is touched, check with Priya Raman."), reply("Noted.")]
    assert kept_verbatim(reconcile("Nothing.", span).text) == [
        "Priya Raman — Before the refunds table is touched, check with Priya Raman."
    ]
