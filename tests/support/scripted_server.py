"""A scripted OpenAI-compatible chat-completions server for end-to-end tests.

Stdlib only. Start it as a context manager and point a client at ``server.base_url``::

    with ScriptedServer() as server:
        server.script(Text("hello"), ToolCalls([("read_file", {"path": "a.txt"})]))
        ...
        assert server.chat_requests[0].headers["authorization"] == "Bearer test-key"

Replies are taken from ``server.responder`` (if it returns one), then from the scripted queue, then from
``server.default`` (which echoes the last user message).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

JSON = dict[str, Any]
DISCONNECT_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


@dataclass(frozen=True)
class Usage:
    """Token counts a reply reports instead of the chars/4 estimate."""

    prompt_tokens: int
    completion_tokens: int


@dataclass
class Text:
    """A text answer, streamed ``chunk_size`` characters at a time with ``delay`` seconds between chunks."""

    text: str
    chunk_size: int = 8
    delay: float = 0.0
    finish_reason: str = "stop"
    usage: Usage | None = None
    cut_off: bool = False
    """Stream the text, then close the connection with no finish reason and no ``[DONE]``."""


@dataclass
class ToolCalls:
    """One response holding tool calls (optionally after some text); finish_reason "tool_calls".

    Each call is ``(name, args)``; ``args`` is a dict (sent as JSON) or a raw string (sent as is, e.g. to test
    malformed arguments).
    """

    calls: list[tuple[str, dict[str, Any] | str]]
    text: str = ""
    chunk_size: int = 8
    delay: float = 0.0
    usage: Usage | None = None


@dataclass
class Error:
    """An HTTP error with an OpenAI error body.

    ``should_retry`` is sent as the ``x-should-retry`` header, which the OpenAI SDK obeys: False (the default)
    makes one scripted error produce exactly one failure; None sends no header, so the SDK's own retry rules
    apply (and a retry consumes the next scripted reply).
    """

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    should_retry: bool | None = False
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Send nothing for ``seconds``, then drop the connection (for client timeouts)."""

    seconds: float


Reply = Text | ToolCalls | Error | Hang
Responder = Callable[[JSON], Reply | None]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received. Header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: JSON | None
    reply: Reply | None = None

    @property
    def messages(self) -> list[JSON]:
        return list((self.body or {}).get("messages", []))

    @property
    def stream(self) -> bool:
        return bool((self.body or {}).get("stream"))

    def texts(self, role: str | None = None) -> list[str]:
        """The text of every message (of ``role``, if given), in order."""
        return [message_text(m) for m in self.messages if role is None or m.get("role") == role]

    @property
    def all_text(self) -> str:
        """Every message's text joined by newlines, for substring assertions."""
        return "\n".join(self.texts())


def message_text(message: JSON) -> str:
    """The text of a chat message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def last_user_text(request: JSON) -> str:
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    return message_text(users[-1]) if users else ""


def echo_reply(request: JSON) -> Reply:
    """The built-in default: answer ``echo: <last user message text>``."""
    return Text(f"echo: {last_user_text(request)}")


def estimate_tokens(chars: int) -> int:
    return max(1, chars // 4)


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _arguments_json(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _completion_chars(reply: Text | ToolCalls) -> int:
    if isinstance(reply, Text):
        return len(reply.text)
    return len(reply.text) + sum(len(name) + len(_arguments_json(args)) for name, args in reply.calls)


class ScriptedServer:
    """An OpenAI chat-completions server on 127.0.0.1 answering from a script. Thread-safe."""

    def __init__(self, models: tuple[str, ...] = ("scripted",)) -> None:
        self.models: tuple[str, ...] = models
        self.default: Responder = echo_reply
        self.responder: Responder | None = None
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ScriptedServer:
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"scripted": self})
        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._serve, name="scripted-server", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        if self._httpd is not None:
            self._httpd.serve_forever(poll_interval=0.02)

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # script and records

    def script(self, *replies: Reply) -> None:
        """Queue replies, consumed in order by chat-completion requests."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until at least ``count`` chat-completion requests arrived; return them."""
        deadline = time.monotonic() + timeout
        while len(requests := self.chat_requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"expected {count} chat requests, got {len(requests)}")
            time.sleep(0.01)
        return requests

    def _choose_reply(self, request: JSON) -> Reply:
        if self.responder is not None and (reply := self.responder(request)) is not None:
            return reply
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.default(request)

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(record)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server stops first; True if it is still running."""
        return not self._stopping.wait(seconds) if seconds > 0 else not self._stopping.is_set()


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Client disconnects are part of the tests (Ctrl-C, timeouts); anything else still reports.
        if not isinstance(sys.exc_info()[1], DISCONNECT_ERRORS):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """As a real model server does: without TCP_NODELAY each answer on a kept-alive connection waits 40 ms for
    the client's delayed ACK."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # routing

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        self._safely(lambda: self._handle_get(path))

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        self._safely(lambda: self._handle_post(path))

    def _safely(self, action: Callable[[], None]) -> None:
        try:
            action()
        except DISCONNECT_ERRORS:
            self.close_connection = True

    def _handle_get(self, path: str) -> None:
        self.scripted._record(RecordedRequest("GET", path, self._header_dict(), None))
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.scripted.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, _error_body(f"Unknown path {path}", "invalid_request_error", None))

    def _handle_post(self, path: str) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self.scripted._record(RecordedRequest("POST", path, self._header_dict(), None))
            self._send_json(400, _error_body("Request body is not valid JSON", "invalid_request_error", None))
            return
        if path != "/v1/chat/completions":
            self.scripted._record(RecordedRequest("POST", path, self._header_dict(), body))
            self._send_json(404, _error_body(f"Unknown path {path}", "invalid_request_error", None))
            return
        reply = self.scripted._choose_reply(body)
        self.scripted._record(RecordedRequest("POST", path, self._header_dict(), body, reply))
        self._answer(body, len(raw), reply)

    def _header_dict(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    # answers

    def _answer(self, body: JSON, request_chars: int, reply: Reply) -> None:
        if isinstance(reply, Error):
            headers = dict(reply.headers)
            if reply.should_retry is not None:
                headers["x-should-retry"] = "true" if reply.should_retry else "false"
            self._send_json(reply.status, _error_body(reply.message, reply.type, reply.code), headers)
        elif isinstance(reply, Hang):
            self.scripted._wait(reply.seconds)
            self.close_connection = True
        else:
            builder = _CompletionBuilder(self.scripted._next_id("chatcmpl"), str(body.get("model", "")))
            usage = reply.usage or Usage(estimate_tokens(request_chars), estimate_tokens(_completion_chars(reply)))
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._stream(builder, reply, usage if include_usage else None)
            else:
                self._send_json(200, builder.completion(reply, usage))

    def _stream(self, builder: _CompletionBuilder, reply: Text | ToolCalls, usage: Usage | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, chunk in enumerate(builder.stream_chunks(reply, usage)):
            if index > 0 and reply.delay and not self.scripted._wait(reply.delay):
                self.close_connection = True
                return
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n")
        if isinstance(reply, Text) and reply.cut_off:
            self.close_connection = True
        else:
            self._write_chunk("data: [DONE]\n\n")
        self._write_chunk("")

    def _write_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_json(self, status: int, payload: JSON, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _error_body(message: str, type_: str, code: str | None) -> JSON:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _usage_json(usage: Usage) -> JSON:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


@dataclass
class _CompletionBuilder:
    """Builds chat.completion objects and chat.completion.chunk streams for one reply."""

    id: str
    model: str
    created: int = field(default_factory=lambda: int(time.time()))

    def _tool_call_ids(self, reply: ToolCalls) -> list[str]:
        return [f"call_{self.id.rsplit('-', 1)[-1]}_{i}" for i in range(len(reply.calls))]

    def completion(self, reply: Text | ToolCalls, usage: Usage) -> JSON:
        message: JSON = {"role": "assistant", "content": reply.text or None}
        if isinstance(reply, ToolCalls):
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": _arguments_json(args)},
                }
                for call_id, (name, args) in zip(self._tool_call_ids(reply), reply.calls, strict=True)
            ]
            finish_reason = "tool_calls"
        else:
            message["content"] = reply.text
            finish_reason = reply.finish_reason
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
            "usage": _usage_json(usage),
        }

    def _chunk(self, delta: JSON, finish_reason: str | None = None) -> JSON:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }

    def stream_chunks(self, reply: Text | ToolCalls, usage: Usage | None) -> Iterator[JSON]:
        """The role chunk, content/tool-call deltas, the finish chunk, then the usage chunk if asked for."""
        yield self._chunk({"role": "assistant", "content": ""})
        for piece in _chunks(reply.text, reply.chunk_size):
            yield self._chunk({"content": piece})
        if isinstance(reply, ToolCalls):
            for index, (call_id, (name, args)) in enumerate(zip(self._tool_call_ids(reply), reply.calls, strict=True)):
                first = {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                yield self._chunk({"tool_calls": [first]})
                for piece in _chunks(_arguments_json(args), reply.chunk_size):
                    yield self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            yield self._chunk({}, "tool_calls")
        elif reply.cut_off:
            return
        else:
            yield self._chunk({}, reply.finish_reason)
        if usage is not None:
            yield {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": _usage_json(usage),
            }
