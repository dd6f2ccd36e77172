"""The embedded local model: a GGUF file run in-process by llama.cpp's engine, as a pydantic-ai ``Model``.

The weights are loaded once per process (lazily, on the first request or ``ensure_loaded()``) and
generation runs in a worker thread, so cancelling the run stops it after the current token. The model
has no tool-call channel: tools are described in the system prompt and calls are parsed out of the
text it writes (see ``co_cli.local.toolcalls``). A structured answer in native mode (pydantic-ai's
``NativeOutput``) is enforced by the engine: a grammar built from the output's JSON schema goes with the
request and the engine samples only tokens it allows, so the text always has the schema's shape (unless the
answer is cut at ``max_tokens``: bound lists and strings in the schema). With function tools offered the
answer is left free, since the schema would forbid the text of a tool call.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import re
import threading
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponseStreamEvent,
    TextContent,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from co_cli.errors import ModelConfigError, ProviderError
from co_cli.local.engine import EngineError, start_engine
from co_cli.local.toolcalls import ParsedCall, parse_tool_calls, streamable_length
from co_cli.local.weights import DEFAULT_WEIGHTS_FILE, ENGINE_INSTALL, engine_installed, resolve_weights
from co_cli.message_view import part_kind, view_part

DEFAULT_TEMPERATURE = 0.0
"""Local models answer greedily: a small model's most likely word is its best (SmolLM2-135M named Paris, Hola and
Rome greedily, and drifted off in half its sampled answers at 0.4)."""
DEFAULT_TOP_P = 0.9
DEFAULT_REPEAT_PENALTY = 1.15
SYSTEM_NAME = "llama_cpp"

Role = Literal["system", "user", "assistant"]
TurnKind = Literal["system", "prompt", "tool_result", "assistant"]
LoadHook = Callable[[str], AbstractContextManager[object]]

_SPECIAL_TOKEN = re.compile(r"<\|[A-Za-z0-9_]{1,64}\|>")
_TRUNCATION_MARK = "\n[... cut to fit the context window ...]\n"


@dataclass
class LoadedModel:
    """A started engine with what requests need from it."""

    engine: Any
    stop: list[str]
    model_path: Path
    n_ctx: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered: bool = False
    """Whether a request has run yet (until then the engine holds no prompt a saved state could skip)."""
    active: threading.Event | None = None
    """The stop switch of the generation running now, if any."""

    def render(self, chat: list[dict[str, str]]) -> str:
        """``chat`` in the model's own template, generation prompt included."""
        return str(self.engine.apply_template(chat))

    def count_prompt_tokens(self, chat: list[dict[str, str]]) -> int:
        """Tokens of ``chat`` rendered with the model's own template, generation prompt included."""
        return len(self.engine.tokenize(self.render(chat), special=True))

    def count_text_tokens(self, text: str) -> int:
        return len(self.engine.tokenize(text, special=False)) if text else 0


_LOADED: dict[tuple[str, int, int, str], LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


def default_threads() -> int:
    """Threads for llama.cpp: half the CPUs (about one per physical core, llama.cpp's own advice).

    Each step waits for all threads at a barrier, so using every CPU is a little faster on an idle
    machine but several times slower as soon as anything else wants a CPU (measured on a busy
    two-CPU machine: 4 vs 30 tokens/s generating, 40 vs 90 tokens/s reading the prompt).
    """
    return max(1, (os.cpu_count() or 1) // 2)


def is_loaded(path: Path, n_ctx: int, n_threads: int | None = None, cache_dir: Path | None = None) -> bool:
    return _cache_key(path, n_ctx, n_threads, cache_dir) in _LOADED


def load_model(path: Path, n_ctx: int, n_threads: int | None = None, cache_dir: Path | None = None) -> LoadedModel:
    """The process-wide engine for ``path``, ``n_ctx``, thread count and state directory, started on first use."""
    key = _cache_key(path, n_ctx, n_threads, cache_dir)
    with _LOAD_LOCK:
        if key not in _LOADED:
            if not _LOADED:
                atexit.register(close_all)
            _LOADED[key] = _load(path, n_ctx, n_threads or default_threads(), cache_dir)
        return _LOADED[key]


STOP_WAIT_S = 10.0
"""How long closing waits for a generation told to stop to end."""


def close_all() -> None:
    """Stop the engines (and remove their sockets) before interpreter shutdown.

    A generation still running is told to stop first (it stops at the end of the prompt batch or token it is on,
    ``engine.PROMPT_BATCH``); an engine still busy after ``STOP_WAIT_S`` is left to the process's end rather than
    destroyed under a running request."""
    for key, loaded in list(_LOADED.items()):
        if loaded.active is not None:
            loaded.active.set()
        if loaded.lock.acquire(timeout=STOP_WAIT_S):
            try:
                loaded.engine.close()
            finally:
                loaded.lock.release()
            _LOADED.pop(key, None)


def _cache_key(path: Path, n_ctx: int, n_threads: int | None, cache_dir: Path | None) -> tuple[str, int, int, str]:
    return (str(path), n_ctx, n_threads or default_threads(), str(cache_dir or ""))


def _load(path: Path, n_ctx: int, n_threads: int, cache_dir: Path | None) -> LoadedModel:
    if not engine_installed():
        raise ModelConfigError(f"the embedded model needs its engine (xllamacpp): {ENGINE_INSTALL}")
    if not path.is_file():
        raise ModelConfigError(f"model file not found: {path}")
    try:
        engine = start_engine(
            path,
            n_ctx=n_ctx,
            n_threads=n_threads,
            # Reading the prompt is compute-bound and scales with cores; generating is memory-bound.
            n_threads_batch=os.cpu_count() or n_threads,
            slot_dir=cache_dir,
        )
    except EngineError as exc:
        raise ModelConfigError(str(exc)) from None
    try:
        props = engine.props()
    except EngineError as exc:
        engine.close()
        raise ModelConfigError(f"cannot load model file {path}: {exc}") from None
    template = props.get("chat_template")
    if not template:
        engine.close()
        raise ModelConfigError(f"model file {path} has no chat template")
    eos_token = str(props.get("eos_token") or "")
    stop = sorted(set(_SPECIAL_TOKEN.findall(template)) | ({eos_token} if eos_token else set()))
    return LoadedModel(engine=engine, stop=stop, model_path=path, n_ctx=n_ctx)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


@dataclass
class ChatTurn:
    """One message for the chat template, with what it came from (which decides what may be dropped)."""

    role: Role
    content: str
    kind: TurnKind


def tool_instructions(tools: Sequence[ToolDefinition]) -> str:
    """The system-prompt section that describes the tools and how to call them."""
    if not tools:
        return ""
    lines = [
        "# Tools",
        "",
        "You can call these tools. Call one only when you need it to answer; otherwise answer directly.",
        "",
    ]
    for tool in tools:
        lines.append(f"- {tool.name}: {' '.join((tool.description or '').split()) or 'no description'}")
        lines.append(f"  Arguments (JSON schema): {compact_schema(tool.parameters_json_schema)}")
    example = {"name": tools[0].name, "arguments": _example_arguments(tools[0].parameters_json_schema)}
    lines += [
        "",
        "To call a tool, reply with only this line, nothing before or after it:",
        f"<tool_call>{json.dumps(example, ensure_ascii=False)}</tool_call>",
        "",
        "The tool result comes back in the next message. Once you have it, answer the user in plain "
        "language using the result. Do not call the same tool again with the same arguments.",
    ]
    return "\n".join(lines)


def compact_schema(schema: dict[str, Any]) -> str:
    """A tool's JSON schema with the noise a small model's context cannot afford left out."""
    slim = {key: value for key, value in schema.items() if key not in ("additionalProperties", "title")}
    properties = slim.get("properties")
    if isinstance(properties, dict):
        slim["properties"] = {
            name: _slim_property(spec) if isinstance(spec, dict) else spec for name, spec in properties.items()
        }
    return json.dumps(slim, ensure_ascii=False, separators=(",", ":"))


def _slim_property(spec: dict[str, Any]) -> dict[str, Any]:
    slim = {key: value for key, value in spec.items() if key != "title"}
    variants = slim.get("anyOf")
    if isinstance(variants, list) and all(isinstance(variant, dict) for variant in variants):
        types = [variant.get("type") for variant in variants]
        if all(isinstance(kind, str) for kind in types) and all(len(variant) == 1 for variant in variants):
            del slim["anyOf"]
            slim["type"] = types
    if isinstance(slim.get("description"), str):
        slim["description"] = " ".join(slim["description"].split())
    return slim


def _example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = schema.get("required") or list(properties)
    placeholders = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    example: dict[str, Any] = {}
    for name in required:
        kind = (properties.get(name) or {}).get("type", "string")
        example[name] = placeholders.get(kind, "...") if isinstance(kind, str) else "..."
    return example


def render_turns(messages: Sequence[ModelMessage], system_prompt: str) -> list[ChatTurn]:
    """The conversation as chat turns: one system turn (``system_prompt`` and system parts), then the rest."""
    system_texts = [system_prompt] if system_prompt.strip() else []
    turns: list[ChatTurn] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                _render_request_part(part, system_texts, turns)
        elif isinstance(message, ModelResponse):
            content = _render_response(message)
            if content:
                turns.append(ChatTurn("assistant", content, "assistant"))
    if system_texts:
        turns.insert(0, ChatTurn("system", "\n\n".join(system_texts), "system"))
    return turns


def _render_request_part(part: Any, system_texts: list[str], turns: list[ChatTurn]) -> None:
    kind = part_kind(part)
    if kind == "system":
        if not turns:
            system_texts.append(part.content)
        else:
            turns.append(ChatTurn("user", part.content, "prompt"))
    elif kind == "user":
        turns.append(ChatTurn("user", _user_text(part), "prompt"))
    elif kind == "tool-return":
        turns.append(ChatTurn("user", _tool_result_text(part), "tool_result"))
    elif kind == "retry":
        turn_kind: TurnKind = "tool_result" if getattr(part, "tool_name", None) else "prompt"
        turns.append(ChatTurn("user", part.model_response(), turn_kind))
    elif kind == "compaction" and part.content:
        turns.append(ChatTurn("user", f"Summary of the earlier conversation:\n{part.content}", "prompt"))


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    pieces: list[str] = []
    for item in part.content:
        if isinstance(item, str):
            pieces.append(item)
        elif isinstance(item, TextContent):
            pieces.append(item.content)
        else:
            pieces.append(f"[{type(item).__name__} left out: this model reads text only]")
    return "\n".join(pieces)


def _tool_result_text(part: ToolReturnPart) -> str:
    if part.outcome in ERROR_OUTCOMES:
        header = f"The tool {part.tool_name} failed:"
        footer = "Fix the arguments and call it again, or tell the user what went wrong."
    else:
        header = f"Result of the tool {part.tool_name}:"
        footer = "Now answer the user in plain language using this result."
    return f"{header}\n{part.model_response_str()}\n\n{footer}"


def _render_response(message: ModelResponse) -> str:
    pieces: list[str] = []
    for part in message.parts:
        view = view_part(part)
        if view.kind == "text" and view.text.strip():
            pieces.append(view.text.strip())
        elif view.kind == "tool-call" and isinstance(part, ToolCallPart):
            call = {"name": part.tool_name, "arguments": part.args_as_dict()}
            pieces.append(f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>")
    return "\n".join(pieces)


def chat_messages(turns: Sequence[ChatTurn]) -> list[dict[str, str]]:
    """Turns as chat-completion messages, consecutive turns of one role merged."""
    merged: list[dict[str, str]] = []
    for turn in turns:
        if merged and merged[-1]["role"] == turn.role:
            merged[-1]["content"] += "\n\n" + turn.content
        else:
            merged.append({"role": turn.role, "content": turn.content})
    return merged


def fit_turns(
    turns: list[ChatTurn], count_tokens: Callable[[list[dict[str, str]]], int], budget: int
) -> list[ChatTurn]:
    """Fit the chat into ``budget`` tokens.

    Drops the oldest exchanges (never the system turn, nor anything from the latest prompt on), then cuts
    the longest turn in the middle. ProviderError when it still cannot fit.
    """
    turns = list(turns)
    while count_tokens(chat_messages(turns)) > budget:
        keep_from = _latest_prompt_index(turns)
        first = next((index for index, turn in enumerate(turns) if turn.kind != "system"), keep_from)
        if first >= keep_from:
            break
        # The oldest exchange goes as a whole: a prompt with the replies and tool results after it.
        end = next((index for index in range(first + 1, keep_from) if turns[index].kind == "prompt"), keep_from)
        del turns[first:end]
    for _ in range(12):
        total = count_tokens(chat_messages(turns))
        if total <= budget:
            return turns
        longest = max(range(len(turns)), key=lambda index: len(turns[index].content))
        content = turns[longest].content
        keep = int(len(content) * budget / total * 0.9) - len(_TRUNCATION_MARK)
        if keep < 16:
            break
        head = keep * 2 // 3
        turns[longest] = ChatTurn(
            turns[longest].role,
            content[:head] + _TRUNCATION_MARK + content[-(keep - head) :],
            turns[longest].kind,
        )
    raise ProviderError(f"the conversation does not fit the local model's context window ({budget} tokens)")


def _latest_prompt_index(turns: Sequence[ChatTurn]) -> int:
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].kind == "prompt":
            return index
    return len(turns) - 1 if turns else 0


@dataclass
class _Finished:
    finish_reason: str | None
    error: BaseException | None = None


@dataclass
class _Generation:
    """One chat completion running in a worker thread; its text arrives on an asyncio queue."""

    loaded: LoadedModel
    chat: list[dict[str, str]]
    sampling: dict[str, Any]
    queue: asyncio.Queue[str | _Finished] = field(default_factory=asyncio.Queue)
    stop_event: threading.Event = field(default_factory=threading.Event)
    finish_reason: str | None = None
    output_tokens: int | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._run, args=(loop,), name="co-local-generate", daemon=True).start()

    def stop(self) -> None:
        self.stop_event.set()

    def _restore_prefix(self) -> None:
        """In a fresh process, start from the saved state after the system prompt (see prefix_cache)."""
        if self.loaded.answered or not self.chat or self.chat[0]["role"] != "system":
            return
        from co_cli.local.prefix_cache import restore_or_compute

        full = self.loaded.render(self.chat)
        system_only = self.loaded.render(self.chat[:1])
        prefix = os.path.commonprefix([full, system_only])
        restore_or_compute(self.loaded.engine, prefix, full, self.loaded.model_path, self.loaded.n_ctx)

    def _put(self, loop: asyncio.AbstractEventLoop, item: str | _Finished) -> None:
        try:
            loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self.stop_event.set()

    def _on_chunk(self, loop: asyncio.AbstractEventLoop, chunk: dict[str, Any]) -> bool:
        """One streamed chunk from the engine; True tells it to stop generating."""
        if self.stop_event.is_set():
            return True
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.output_tokens = usage["completion_tokens"]
        for choice in chunk.get("choices") or []:
            if text := (choice.get("delta") or {}).get("content"):
                self._put(loop, text)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return self.stop_event.is_set()

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        error: BaseException | None = None
        with self.loaded.lock:
            if self.stop_event.is_set():
                self._put(loop, _Finished(None))
                return
            self.loaded.active = self.stop_event
            try:
                self._restore_prefix()
                body = {"messages": self.chat, "stream_options": {"include_usage": True}, **self.sampling}
                self.loaded.engine.chat(body, lambda chunk: self._on_chunk(loop, chunk))
            except Exception as exc:
                error = exc
            finally:
                self.loaded.answered = True
                self.loaded.active = None
        self._put(loop, _Finished(self.finish_reason, error))

    async def texts(self) -> AsyncIterator[str]:
        while True:
            item = await self.queue.get()
            if isinstance(item, _Finished):
                if item.error is not None:
                    raise ProviderError(f"local model failed: {_one_line(item.error)}")
                self.finish_reason = item.finish_reason
                return
            yield item


@dataclass
class LocalStreamedResponse(StreamedResponse):
    """Streams the local model's text; text that may be a tool call is held back and parsed at the end."""

    _model_name: str
    _generation: _Generation
    _tool_names: set[str]
    _prompt_tokens: int
    _single_call: bool = False
    _timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        self._usage = RequestUsage(input_tokens=self._prompt_tokens)
        produced: list[str] = []
        pending = ""
        async for text in self._generation.texts():
            produced.append(text)
            pending += text
            ready = streamable_length(pending) if self._tool_names else len(pending)
            if ready:
                for event in self._parts_manager.handle_text_delta(vendor_part_id="text", content=pending[:ready]):
                    yield event
                pending = pending[ready:]
        leftover, calls = parse_tool_calls(pending, self._tool_names)
        if self._single_call:
            calls = calls[:1]
        if leftover.strip():
            for event in self._parts_manager.handle_text_delta(vendor_part_id="text", content=leftover):
                yield event
        for index, call in enumerate(calls):
            yield self._tool_call_event(index, call)
        output_tokens = self._generation.output_tokens
        if output_tokens is None:  # stopped before the engine's own count arrived
            output_tokens = await asyncio.to_thread(self._generation.loaded.count_text_tokens, "".join(produced))
        self._usage = RequestUsage(input_tokens=self._prompt_tokens, output_tokens=output_tokens)
        self.finish_reason = _finish_reason(self._generation.finish_reason, bool(calls))

    def _tool_call_event(self, index: int, call: ParsedCall) -> ModelResponseStreamEvent:
        return self._parts_manager.handle_tool_call_part(
            vendor_part_id=f"call-{index}",
            tool_name=call.name,
            args=call.arguments,
            tool_call_id=f"call_{uuid.uuid4().hex[:24]}",
        )

    def stop_generation(self) -> None:
        self._generation.stop()

    async def close_stream(self) -> None:
        self.stop_generation()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str:
        return SYSTEM_NAME

    @property
    def provider_url(self) -> None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


def _finish_reason(reason: str | None, called_tools: bool) -> Literal["stop", "length", "tool_call"] | None:
    if called_tools:
        return "tool_call"
    if reason == "length":
        return "length"
    return "stop" if reason else None


@dataclass(init=False)
class LocalModel(Model):
    """A GGUF chat model run in-process by llama.cpp's server engine (see ``co_cli.local.engine``)."""

    # Nothing goes over a network, so ``timeout`` (an HTTP setting) has nothing to apply to and is not listed.
    unsupported_settings = frozenset({"max_retries", "extra_headers", "extra_body", "logit_bias"})
    _announces_lookalike_notes = False

    on_load: ClassVar[LoadHook | None] = None
    """Called with the model's name (e.g. ``SmolLM2-135M-Instruct.Q4_1``); the context manager it returns
    is held around the weight load (once per process), e.g. to show a spinner."""

    weights_path: Path
    cache_dir: Path | None
    n_ctx: int
    max_tokens: int
    repeat_penalty: float
    n_threads: int | None

    def __init__(
        self,
        weights_path: Path,
        *,
        n_ctx: int = 4096,
        max_tokens: int = 512,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        n_threads: int | None = None,
        settings: ModelSettings | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        """``n_threads`` defaults to half the CPUs; ``max_tokens`` is capped at half the context;
        ``cache_dir`` keeps the state after the system prompt between processes (None: no cache)."""
        self.n_threads = n_threads
        self.cache_dir = cache_dir
        self.weights_path = Path(weights_path)
        self.n_ctx = n_ctx
        self.max_tokens = min(max_tokens, n_ctx // 2)
        self.repeat_penalty = repeat_penalty
        profile = ModelProfile(
            supports_tools=True,
            supports_json_schema_output=True,
            supports_json_object_output=False,
            default_structured_output_mode="native",
            supports_image_input=False,
            supports_document_input=False,
            supports_audio_file_input=False,
            supports_video_input=False,
            may_tokenize_special_tokens_in_content=True,
            context_window=n_ctx,
        )
        super().__init__(settings=settings, profile=profile)

    @property
    def model_name(self) -> str:
        return f"local:{self.weights_path.stem}"

    @property
    def bundled(self) -> bool:
        """Whether this is the small model co ships (``local``), as opposed to a GGUF the user chose."""
        return self.weights_path.name == DEFAULT_WEIGHTS_FILE

    @property
    def system(self) -> str:
        return SYSTEM_NAME

    @property
    def provider(self) -> None:
        return None

    @property
    def context_window(self) -> int:
        return self.n_ctx

    @property
    def loaded(self) -> bool:
        return is_loaded(self.weights_path, self.n_ctx, self.n_threads, self.cache_dir)

    def ensure_loaded(self) -> LoadedModel:
        """Load the weights now (once per process), inside the ``on_load`` hook if not loaded yet."""
        if self.loaded:
            return self._load()
        with self._load_context():
            return self._load()

    async def _ensure_loaded_async(self) -> LoadedModel:
        if self.loaded:
            return self._load()
        with self._load_context():
            return await asyncio.to_thread(self._load)

    def _load(self) -> LoadedModel:
        return load_model(self.weights_path, self.n_ctx, self.n_threads, self.cache_dir)

    def _load_context(self) -> AbstractContextManager[object]:
        hook = type(self).on_load
        return hook(self.weights_path.stem) if hook is not None else nullcontext()

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        model_settings, model_request_parameters = self.prepare_request(model_settings, model_request_parameters)
        stream = await self._open_stream(messages, model_settings, model_request_parameters)
        try:
            async for _ in stream:
                pass
        finally:
            stream.stop_generation()
        return stream.get()

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        model_settings, model_request_parameters = self.prepare_request(model_settings, model_request_parameters)
        stream = await self._open_stream(messages, model_settings, model_request_parameters)
        try:
            yield stream
        finally:
            stream.stop_generation()

    async def _open_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        params: ModelRequestParameters,
    ) -> LocalStreamedResponse:
        check_allow_model_requests()
        loaded = await self._ensure_loaded_async()
        settings = model_settings or {}
        max_tokens = min(settings.get("max_tokens", self.max_tokens), self.n_ctx // 2)
        tools = [*params.function_tools, *params.output_tools]
        instructions = "\n\n".join(part.content for part in self._get_instruction_parts(messages, params) or [])
        system_prompt = "\n\n".join(text for text in (instructions, tool_instructions(tools)) if text.strip())
        turns = render_turns(messages, system_prompt)
        fitted = await asyncio.to_thread(fit_turns, turns, loaded.count_prompt_tokens, self.n_ctx - max_tokens)
        chat = chat_messages(fitted)
        prompt_tokens = await asyncio.to_thread(loaded.count_prompt_tokens, chat)
        sampling = self._sampling(settings, max_tokens, loaded.stop)
        if params.output_mode == "native" and params.output_object is not None and not params.function_tools:
            sampling.update(output_constraint(params.output_object))
        generation = _Generation(loaded=loaded, chat=chat, sampling=sampling)
        generation.start()
        return LocalStreamedResponse(
            model_request_parameters=params,
            _model_name=self.model_name,
            _generation=generation,
            _tool_names={tool.name for tool in tools},
            _prompt_tokens=prompt_tokens,
            _single_call=settings.get("parallel_tool_calls") is False,
        )

    def _sampling(self, settings: ModelSettings, max_tokens: int, stop: list[str]) -> dict[str, Any]:
        sampling: dict[str, Any] = {
            "temperature": settings.get("temperature", DEFAULT_TEMPERATURE),
            "top_p": settings.get("top_p", DEFAULT_TOP_P),
            "repeat_penalty": self.repeat_penalty,
            "max_tokens": max_tokens,
            "stop": [*stop, *settings.get("stop_sequences", [])],
            "presence_penalty": settings.get("presence_penalty", 0.0),
            "frequency_penalty": settings.get("frequency_penalty", 0.0),
        }
        if "top_k" in settings:
            sampling["top_k"] = settings["top_k"]
        if "seed" in settings:
            sampling["seed"] = settings["seed"]
        return sampling


def output_constraint(output: OutputObjectDefinition) -> dict[str, Any]:
    """The request field that has the engine constrain an answer to ``output``'s JSON schema (llama.cpp's
    server's ``json_schema``; ``Engine.chat`` sends it as a compact grammar), with no keys but the schema's."""
    return {"json_schema": closed_schema(output.json_schema)}


def closed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``additionalProperties: false`` on every object that does not say otherwise: keys the
    output type does not have are tokens a small model spends on nothing (pydantic ignores them anyway)."""
    closed: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):  # names -> schemas
            closed[key] = {name: _closed(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES:  # data, not schemas: left as written
            closed[key] = value
        else:
            closed[key] = _closed(value)
    if isinstance(closed.get("properties"), dict):
        closed.setdefault("additionalProperties", False)
    return closed


_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})
_SCHEMA_VALUES = frozenset({"default", "const", "enum", "examples", "required"})


def _closed(node: Any) -> Any:
    if isinstance(node, list):
        return [_closed(item) for item in node]
    return closed_schema(node) if isinstance(node, dict) else node


def load_local_model(spec: str, *, n_ctx: int, max_tokens: int, cache_dir: Path | None = None) -> LocalModel:
    """A LocalModel for ``local`` or ``local:/path/model.gguf``; the weights load on first use.

    ModelConfigError at once when the engine or the weights file is missing.
    """
    return LocalModel(resolve_weights(spec), n_ctx=n_ctx, max_tokens=max_tokens, cache_dir=cache_dir)
