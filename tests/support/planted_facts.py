"""A scripted conversation with facts planted early, for recall tests and the recall benchmark.

Twelve facts of the kinds long conversations lose (a codename, a region, a port, a config path, an error
code and its fix, a decision and its reason, a hard rule, a style preference, a failed upgrade, a reviewer,
a date, the next step) are stated by the user in the first turns; ordinary questions follow, some answered
with tool calls whose outputs are of a realistic size. The assistant's answers never repeat a fact's key, so
a fact survives only if what the user wrote does.

Three facts of harder kinds follow (``NEW_KIND_FACTS``, counted apart from the twelve): a name the assistant
proposed and the user accepted without repeating it, a value found only in a tool output the user refers to,
and a host the user later changes (the old one must not come back as current).

``planted_script`` gives the turns (prompts, answers, tool calls) to drive a real model with;
``planted_conversation`` builds the pydantic-ai messages of the whole scripted conversation. Both take a
``PlantedScript``: ``LEDGER``, this module's conversation, by default; the recall bench has conversations of the
same shape in other words and another language (bench/recall_variants.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

T0 = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
DEFAULT_TURNS = 36


@dataclass(frozen=True)
class PlantedFact:
    kind: str
    key: str
    """The identifier whose presence shows the fact was kept (verbatim, case-sensitive)."""
    statement: str
    """The sentence of the user's message that states the fact."""
    question: str
    """A question whose answer is the fact (for asking the model at the end)."""
    also: tuple[str, ...] = ()
    """Further identifiers of the same fact (the fix of an error, the reason of a decision)."""
    stale: tuple[str, ...] = ()
    """Values the fact had before the user changed it: an answer naming one of them and not ``key`` is wrong."""


@dataclass(frozen=True)
class ScriptedToolCall:
    name: str
    args: dict[str, Any]
    output: str


@dataclass(frozen=True)
class ScriptedTurn:
    prompt: str
    answer: str
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    facts: tuple[PlantedFact, ...] = ()
    """The facts this turn's prompt states."""


@dataclass
class PlantedConversation:
    turns: list[ScriptedTurn]
    facts: list[PlantedFact]
    messages: list[ModelMessage] = field(default_factory=list)


@dataclass(frozen=True)
class PlantedScript:
    """One conversation of this shape in one wording: the facts, the turns that state them, and what the
    ordinary turns after them are made of."""

    facts: tuple[PlantedFact, ...]
    """The twelve, of the kinds in the module's docstring, in that order."""
    harder: tuple[PlantedFact, ...]
    """The three of harder kinds: a proposal accepted, a value only a tool output shows, a value changed later."""
    planting: tuple[ScriptedTurn, ...]
    """The turns that state the twelve facts, then the two of the harder kinds."""
    change: ScriptedTurn
    """The user's correction of the changed value: the ordinary turn ``CHANGE_AT`` (when there are enough)."""
    topics: tuple[tuple[str, str | None], ...]
    """The ordinary questions and how each is answered: a path read, ``pytest``, ``grep`` or no tool."""
    answer_sentences: tuple[str, ...]
    """What the assistant's ordinary answers are made of (no sentence names a fact)."""
    again: str
    """Added to an ordinary question asked a second time."""
    service: str
    """The code base's name in the ordinary tool outputs (module docstrings, grep results)."""


CODENAME = PlantedFact(
    "codename",
    "PHOENIX7",
    "The project codename is PHOENIX7; use it in branch names and release notes.",
    "What is the project codename?",
)
REGION = PlantedFact(
    "region",
    "eu-central-2",
    "We deploy to eu-central-2, not the default region.",
    "Which region do we deploy to?",
)
PORT = PlantedFact(
    "port",
    "8443",
    "The ledger service listens on port 8443 behind the proxy.",
    "Which port does the ledger service listen on?",
)
CONFIG_PATH = PlantedFact(
    "config path",
    "deploy/ledger/settings.prod.toml",
    "All runtime settings live in deploy/ledger/settings.prod.toml.",
    "Where do the runtime settings live?",
)
ERROR_FIX = PlantedFact(
    "error code and fix",
    "E4471",
    "Error E4471 at startup means the lock file is stale; the fix is to delete /var/run/ledger.lock before restarting.",
    "What does error E4471 mean and how is it fixed?",
    also=("/var/run/ledger.lock",),
)
DECISION = PlantedFact(
    "decision and reason",
    "SQLite",
    "We decided to store events in SQLite rather than Postgres, because the tool must run offline on field laptops.",
    "Which database did we choose for events, and why?",
    also=("offline",),
)
HARD_RULE = PlantedFact(
    "hard rule",
    "prod-db-01",
    "Never run migrations against prod-db-01 without a fresh snapshot.",
    "What is the rule about running migrations?",
)
STYLE = PlantedFact(
    "style preference",
    "f-strings",
    "I prefer f-strings over str.format() and type hints on every public function.",
    "What is my style preference for string formatting?",
)
FAILED_UPGRADE = PlantedFact(
    "failed upgrade",
    "2.9.1",
    "We tried upgrading to pydantic 2.9.1 last week and it broke the validators, so we are pinned to 2.8.2.",
    "Which upgrade failed, and what are we pinned to?",
    also=("2.8.2",),
)
REVIEWER = PlantedFact(
    "reviewer",
    "@okafor-d",
    "Every pull request goes to @okafor-d for review.",
    "Who reviews pull requests?",
)
DATE = PlantedFact(
    "date",
    "March 14",
    "The demo for the client is on March 14.",
    "When is the client demo?",
)
NEXT_STEP = PlantedFact(
    "next step",
    "scripts/backfill_ledger.py",
    "Next step once we are done here: write scripts/backfill_ledger.py to backfill last month's events.",
    "What is the next step?",
)

PROPOSED = PlantedFact(
    "assistant proposal, accepted",
    "ledger_outbox_v2",
    "I suggest a dedicated outbox table named ledger_outbox_v2, one row per pending event, deleted once the sync "
    "confirms it.",
    "What is the name of the outbox table we agreed on?",
)
TOOL_ONLY = PlantedFact(
    "only in a tool output",
    "7350",
    "12:lock_timeout_ms = 7350",
    "What is the lock timeout in the production settings, in milliseconds?",
)
CHANGED = PlantedFact(
    "changed later",
    "staging-db-05",
    "Correction: the staging database moved to staging-db-05 this morning; the old host is being retired.",
    "Which host is the staging database on now?",
    stale=("staging-db-02",),
)
NEW_KIND_FACTS: tuple[PlantedFact, ...] = (PROPOSED, TOOL_ONLY, CHANGED)
"""Facts of the harder kinds, stated after the twelve (see the module's docstring)."""
CHANGE_AT = 8
"""The ordinary turn (0-based) whose question is replaced by the correction of ``CHANGED``."""

FACTS: tuple[PlantedFact, ...] = (
    CODENAME,
    REGION,
    PORT,
    CONFIG_PATH,
    ERROR_FIX,
    DECISION,
    HARD_RULE,
    STYLE,
    FAILED_UPGRADE,
    REVIEWER,
    DATE,
    NEXT_STEP,
)

_FILLER = (
    "For context, the service ingests events from the field devices, validates them, writes them to the local "
    "store and syncs them upstream when a connection is available; most of the code is plain Python with a "
    "small CLI on top, and the test suite runs in about forty seconds on a laptop."
)


def _new_kind_turns() -> list[ScriptedTurn]:
    """Two turns after the twelve facts: the assistant proposes a name the user accepts without repeating it,
    the user states the staging host (changed later) and asks for a value only a tool output shows."""
    return [
        ScriptedTurn(
            "The staging database is on staging-db-02 for now. Where should pending events wait before they are "
            "synced?",
            PROPOSED.statement,
        ),
        ScriptedTurn(
            "Yes, let's do that. Also look up the lock timeout in the production settings; we will need that "
            "value for the retry design.",
            "Found it; I will use that value when we design the retries.",
            tool_calls=(
                ScriptedToolCall(
                    "run_shell",
                    {"command": f"grep -n lock_timeout {CONFIG_PATH.key}"},
                    f"exit code: 0\nstdout:\n{TOOL_ONLY.statement}\nstderr: (empty)",
                ),
            ),
        ),
    ]


def _fact_turns() -> list[ScriptedTurn]:
    """The first seven turns: the user states the twelve facts (some inside long messages)."""
    return [
        ScriptedTurn(
            f"Hi! I'm picking up the ledger service again and want you to help me with it. {CODENAME.statement} "
            f"{REGION.statement}",
            "Got it. I'll keep those in mind. What would you like to start with?",
            facts=(CODENAME, REGION),
        ),
        ScriptedTurn(
            f"{_FILLER} {PORT.statement} The proxy terminates TLS and forwards plain HTTP to the service, and the "
            "health check hits /healthz every ten seconds. " + _FILLER,
            "Understood: TLS ends at the proxy and the service sees plain HTTP. Anything specific about the "
            "health check you want to change?",
            facts=(PORT,),
        ),
        ScriptedTurn(
            f"Not yet. {CONFIG_PATH.statement} Please read it so you know the layout.",
            "The settings file has three sections: the store, the sync client and logging. The store section "
            "points at the local database file; the sync client has a batch size of 500 and a retry limit.",
            tool_calls=(ScriptedToolCall("read_file", {"path": CONFIG_PATH.key}, _settings_file()),),
            facts=(CONFIG_PATH,),
        ),
        ScriptedTurn(
            f"Two more things from last week. {ERROR_FIX.statement} {DECISION.statement}",
            "Thanks, that is useful background. A stale lock after a crash is a classic; the offline requirement "
            "explains the choice of an embedded database.",
            facts=(ERROR_FIX, DECISION),
        ),
        ScriptedTurn(
            f"{HARD_RULE.statement} {STYLE.statement}",
            "Noted, I'll follow both.",
            facts=(HARD_RULE, STYLE),
        ),
        ScriptedTurn(
            f"{FAILED_UPGRADE.statement} {REVIEWER.statement} Can you check which version is installed?",
            "The installed version matches the pin.",
            tool_calls=(
                ScriptedToolCall(
                    "run_shell",
                    {"command": "pip show pydantic"},
                    "exit code: 0\nstdout:\nName: pydantic\nVersion: 2.8.2\nSummary: Data validation using Python "
                    "type hints\nLocation: /opt/ledger/.venv/lib/python3.12/site-packages\nstderr: (empty)",
                ),
            ),
            facts=(FAILED_UPGRADE, REVIEWER),
        ),
        ScriptedTurn(
            f"{DATE.statement} {_FILLER} {NEXT_STEP.statement}",
            "Understood. Let's make sure everything is in good shape before then.",
            facts=(DATE, NEXT_STEP),
        ),
    ]


_TOPICS = (
    ("How does the sync client decide when to retry a failed batch?", "src/ledger/sync.py"),
    ("What's the cleanest way to validate an incoming event before it hits the store?", "src/ledger/events.py"),
    ("Can you explain how exponential backoff works and whether we should use it here?", None),
    ("Why does the test for the store sometimes fail on CI but never locally?", "tests/test_store.py"),
    ("How should I structure logging so that the field team can read the logs?", None),
    ("What does the batch size setting actually control?", "src/ledger/sync.py"),
    ("Is there a simple way to profile the ingestion path?", None),
    ("Run the test suite and tell me what fails.", "pytest"),
    ("How do context managers help with the database connection?", "src/ledger/store.py"),
    ("What's the difference between a dataclass and a pydantic model for our events?", None),
    ("Where is the event schema version checked?", "grep"),
    ("How would you add a --dry-run flag to the CLI?", "src/ledger/cli.py"),
    ("Should the sync client use asyncio or threads?", None),
    ("What happens if two processes write to the store at the same time?", "src/ledger/store.py"),
)

_ANSWER_SENTENCES = (
    "The short answer is that it depends on how often the operation fails and how expensive a retry is.",
    "In this code base the relevant logic sits in one function, which keeps it easy to test in isolation.",
    "A good first step is to make the behaviour explicit in a small helper and give it a docstring.",
    "Keep the happy path short and move error handling to the edges, where it can log with context.",
    "If you want, I can sketch a change and the tests that would go with it.",
    "Watch out for shared state between tests: a temporary directory per test avoids most surprises.",
    "The standard library covers this well; a dependency would add little here.",
    "Measure before changing anything: a quick timing around the call will tell you whether it matters.",
)


def _answer(index: int, sentences: tuple[str, ...]) -> str:
    picks = [sentences[(index + k) % len(sentences)] for k in range(4)]
    return " ".join(picks)


def _module_source(path: str, index: int, service: str) -> str:
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    lines = [f'"""The {stem} module of the {service} service."""', "", "from __future__ import annotations", ""]
    for k in range(6):
        lines += [
            "",
            f"def {stem}_step_{k}(batch: list[dict[str, object]], limit: int = {10 * (k + 1)}) -> int:",
            f'    """Step {k} of the {stem} pipeline (revision {index})."""',
            "    count = 0",
            "    for item in batch[:limit]:",
            "        if item.get('valid', True):",
            "            count += 1",
            "    return count",
        ]
    return "\n".join(lines)


def _settings_file() -> str:
    return (
        '[store]\npath = "/var/lib/ledger/events.db"\njournal_mode = "wal"\n\n'
        '[sync]\nbatch_size = 500\nretry_limit = 5\nendpoint = "https://sync.internal.example/api/v2"\n\n'
        '[logging]\nlevel = "info"\nformat = "json"\n'
    )


def _ordinary_turn(index: int, script: PlantedScript) -> ScriptedTurn:
    question, tool = script.topics[index % len(script.topics)]
    if index >= len(script.topics):
        question = f"{question} {script.again}"
    answer = _answer(index, script.answer_sentences)
    calls: tuple[ScriptedToolCall, ...] = ()
    if tool == "pytest":
        calls = (
            ScriptedToolCall(
                "run_shell",
                {"command": "python -m pytest -q"},
                "exit code: 1\nstdout:\n"
                + "".join(
                    f"tests/test_part_{k}.py ....                                   [{k * 7}%]\n" for k in range(12)
                )
                + "FAILED tests/test_store.py::test_concurrent_writes - AssertionError\n1 failed, 47 passed in 39.8s\n"
                "stderr: (empty)",
            ),
        )
    elif tool == "grep":
        calls = (
            ScriptedToolCall(
                "grep",
                {"pattern": "schema_version", "path": "src"},
                "\n".join(f"src/{script.service}/module_{k}.py:{10 + k}: schema_version = {k}" for k in range(15)),
            ),
        )
    elif tool is not None:
        calls = (ScriptedToolCall("read_file", {"path": tool}, _module_source(tool, index, script.service)),)
    return ScriptedTurn(question, answer, tool_calls=calls)


LEDGER = PlantedScript(
    facts=FACTS,
    harder=NEW_KIND_FACTS,
    planting=(*_fact_turns(), *_new_kind_turns()),
    change=ScriptedTurn(CHANGED.statement, "Thanks, noted."),
    topics=_TOPICS,
    answer_sentences=_ANSWER_SENTENCES,
    again="(Asking again with the latest changes in mind.)",
    service="ledger",
)
"""The ledger service's conversation (the tests' and the recall bench's default)."""


def planted_script(turns: int = DEFAULT_TURNS, script: PlantedScript | None = None) -> list[ScriptedTurn]:
    """The scripted turns of ``script`` (the ledger conversation by default): seven that plant the twelve facts,
    two for the harder kinds, then ordinary questions up to ``turns`` in all (one of them the user's correction
    of the changed value, when there are enough)."""
    script = script or LEDGER
    planted = list(script.planting)
    if turns < len(planted):
        raise ValueError(f"at least {len(planted)} turns are needed to plant every fact")
    ordinary = [_ordinary_turn(i, script) for i in range(turns - len(planted))]
    if len(ordinary) > CHANGE_AT:
        ordinary[CHANGE_AT] = script.change
    return planted + ordinary


def turn_messages(turn: ScriptedTurn, index: int) -> list[ModelMessage]:
    """The messages of one scripted turn: the prompt, any tool calls and their results, and the answer."""
    stamp = T0 + timedelta(minutes=index)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(turn.prompt, timestamp=stamp)], timestamp=stamp)]
    if turn.tool_calls:
        ids = [f"call_{index}_{k}" for k in range(len(turn.tool_calls))]
        messages.append(
            ModelResponse(
                parts=[
                    ToolCallPart(call.name, dict(call.args), call_id)
                    for call, call_id in zip(turn.tool_calls, ids, strict=True)
                ],
                timestamp=stamp,
                model_name="scripted",
            )
        )
        messages.append(
            ModelRequest(
                parts=[
                    ToolReturnPart(call.name, call.output, call_id, timestamp=stamp)
                    for call, call_id in zip(turn.tool_calls, ids, strict=True)
                ],
                timestamp=stamp,
            )
        )
    messages.append(ModelResponse(parts=[TextPart(turn.answer)], timestamp=stamp, model_name="scripted"))
    return messages


def planted_conversation(turns: int = DEFAULT_TURNS, script: PlantedScript | None = None) -> PlantedConversation:
    """The whole scripted conversation as messages, with its turns and the facts it plants."""
    turns_ = planted_script(turns, script)
    messages: list[ModelMessage] = []
    for index, turn in enumerate(turns_):
        messages.extend(turn_messages(turn, index))
    return PlantedConversation(turns=turns_, facts=list((script or LEDGER).facts), messages=messages)


def facts_kept(text: str, facts: tuple[PlantedFact, ...] | list[PlantedFact] = FACTS) -> list[PlantedFact]:
    """The facts whose key occurs in ``text``."""
    return [fact for fact in facts if fact.key in text]


def answer_is_stale(fact: PlantedFact, answer: str) -> bool:
    """The answer gives a value the user has since changed, not the current one."""
    return fact.key not in answer and any(old in answer for old in fact.stale)
