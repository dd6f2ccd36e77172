"""Reading what a real co sent the scripted server: which requests are the summariser's, how to answer them, the chat
turns and the summaries they carried."""

from __future__ import annotations

import json
import re
from typing import Any

from co_cli.context import standing
from tests.support.scripted_server import (
    JSON,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedServer,
    Text,
    ToolCalls,
    message_text,
)

SUMMARISER_INSTRUCTIONS = "You summarise conversations between a user and an AI assistant"

SUMMARY_RE = re.compile(r"\A\[Summary of (\d+) earlier messages\]\n")


def _system_says(body: JSON | None, words: str) -> bool:
    messages = (body or {}).get("messages", [])
    return any(m.get("role") == "system" and words in message_text(m) for m in messages)


def is_rule_question(body: JSON | None) -> bool:
    """Whether the request asks whether one sentence a summary named a rule is one (``context.standing``)."""
    return _system_says(body, standing.INSTRUCTIONS)


def is_summariser_request(body: JSON | None) -> bool:
    """A request of the summarisation model: a summary, or the question asked of a rule it named."""
    return _system_says(body, SUMMARISER_INSTRUCTIONS) or is_rule_question(body)


def summariser_reply(body: JSON, text: str, *, delay: float = 0.0, **fields: Any) -> Reply:
    """The summariser's typed answer with ``text`` as its summary and ``fields`` (standing_instructions,
    changes, next_step, people): a call of the output tool the request offers; the JSON object as text when the
    request asks for prompted output (the schema in its instructions); ``text`` alone for a plain-text request
    (a merge of partial summaries). Asked about a rule it named, it says it is one."""
    answer = {"answer": "rule"} if is_rule_question(body) else {"summary": text, **fields}
    tools = [tool["function"]["name"] for tool in body.get("tools", []) if tool.get("type") == "function"]
    if tools:
        return ToolCalls([(tools[0], answer)], delay=delay)
    if is_rule_question(body) or _system_says(body, '"SummaryAnswer"'):
        return Text(json.dumps(answer), delay=delay)
    return Text(text, delay=delay)


def summariser_answers(text: str, **fields: Any) -> Responder:
    """A responder that answers summariser requests with a typed answer (``summariser_reply``) and leaves chat
    requests to the script."""

    def respond(body: JSON) -> Reply | None:
        return summariser_reply(body, text, **fields) if is_summariser_request(body) else None

    return respond


def summariser_prose(text: str) -> Responder:
    """A responder that answers summariser requests in plain text, whatever they ask for."""

    def respond(body: JSON) -> Reply | None:
        return Text(text) if is_summariser_request(body) else None

    return respond


def chat_turns(server: ScriptedServer) -> list[RecordedRequest]:
    """The chat model's requests, in order (summariser requests left out)."""
    return [r for r in server.chat_requests if not is_summariser_request(r.body)]


def summariser_calls(server: ScriptedServer) -> list[RecordedRequest]:
    return [r for r in server.chat_requests if is_summariser_request(r.body)]


def summary_messages(request: RecordedRequest) -> list[str]:
    return [t for t in request.texts("user") if SUMMARY_RE.match(t)]


def long_prompt(step: int) -> str:
    """A prompt long enough that summarising a few of them is clearly worth it."""
    return f"step {step}: " + " ".join(f"keep detail {step}-{i} about the checklist item" for i in range(10))
