"""Keep credentials out of saved messages: a response's ``provider_url`` is the configured ``base_url``,
which may carry a user and password (``https://user:pass@host``) or a key in its query (``?api-key=…``); a
request's ``instructions`` hold the instructions files, the pins and the memories sent with it, which are
read afresh for every request and never saved with the messages (nor exported)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage


def url_without_credentials(url: str) -> str:
    """``url`` without its user info, query and fragment: scheme, host, port and path only.

    The whole query goes, not only the parameters known to hold keys: a key may sit under any name
    (``key``, ``api-key``, ``code``, ``sig``, …), and the endpoint is what the saved URL is for.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if not parts.scheme and not parts.netloc:
        return "" if ("@" in url or "?" in url or "#" in url) else url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def without_credentials(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` as they are saved: every response's ``provider_url`` stripped of credentials and every
    request's instructions left out; the input is not changed."""
    from pydantic_ai.messages import ModelRequest, ModelResponse

    cleaned: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse) and message.provider_url:
            safe = url_without_credentials(message.provider_url)
            if safe != message.provider_url:
                message = replace(message, provider_url=safe or None)
        elif isinstance(message, ModelRequest) and message.instructions is not None:
            message = replace(message, instructions=None)
        cleaned.append(message)
    return cleaned


def saved_json_without_credentials(message: dict[str, Any]) -> dict[str, Any]:
    """``without_credentials`` for one message in pydantic-ai's JSON form (as it is saved); the input is not
    changed."""
    if message.get("kind") == "response" and isinstance(message.get("provider_url"), str):
        safe = url_without_credentials(message["provider_url"])
        if safe != message["provider_url"]:
            return {**message, "provider_url": safe or None}
    elif message.get("kind") == "request" and message.get("instructions") is not None:
        return {**message, "instructions": None}
    return message
