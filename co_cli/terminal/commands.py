"""Slash commands: one registry, so /help and tab completion come from the same table.

Each command's logic lives with its registration, over ``CommandHost``: the few things a command needs from
the terminal side (the conversation, the store, output, a confirmation question, a cancellable task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rich.table import Table
from rich.text import Text

from co_cli.errors import CoError

if TYPE_CHECKING:
    from rich.console import Console

    from co_cli.config import LoadedSettings
    from co_cli.context.compact import CompactionResult
    from co_cli.session import Conversation, TurnOutcome
    from co_cli.store.sessions import SessionInfo, SessionStore

T = TypeVar("T")


class CommandHost(Protocol):
    """What a slash command may use."""

    store: SessionStore | None
    loaded: LoadedSettings
    console: Console
    interactive: bool
    running: bool

    @property
    def conv(self) -> Conversation: ...
    def info(self, message: str) -> None: ...
    def note(self, message: str) -> None: ...
    def error(self, message: str) -> None: ...
    def show(self, renderable: object) -> None: ...
    def show_resumed(self) -> None: ...
    async def confirm(self, question: str) -> bool: ...
    async def ask(self, question: str) -> str | None: ...
    async def cancellable(self, work: Coroutine[Any, Any, T], status: str) -> T | None: ...
    async def turn(self, prompt: str) -> TurnOutcome: ...


Handler = Callable[["CommandHost", str], Awaitable[None]]
Completer = Callable[["CommandHost"], list[str]]


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    handler: Handler
    complete: Completer | None = None
    aliases: tuple[str, ...] = ()


REGISTRY: dict[str, Command] = {}
"""Every name a command answers to (aliases included) -> the command."""


def command(
    name: str, args: str, help: str, complete: Completer | None = None, aliases: tuple[str, ...] = ()
) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        cmd = Command(name, args, help, handler, complete, aliases)
        for key in (name, *aliases):
            REGISTRY[key] = cmd
        return handler

    return register


def commands() -> list[Command]:
    """Each command once, in registration order."""
    return list(dict.fromkeys(REGISTRY.values()))


def parse(line: str) -> tuple[str, str]:
    """'/name  some args' -> ('name', 'some args')."""
    name, _, arg = line.strip()[1:].partition(" ")
    return name.lower(), arg.strip()


async def dispatch(host: CommandHost, line: str) -> None:
    name, arg = parse(line)
    cmd = REGISTRY.get(name)
    if cmd is None:
        host.error(f"unknown command /{name} (type /help for the list); nothing was sent to the model")
        return
    try:
        await cmd.handler(host, arg)
    except CoError as exc:
        host.error(exc.message)


def _session_ids(host: CommandHost) -> list[str]:
    if host.store is None:
        return []
    return [s.id for s in host.store.list(limit=30)]


def _store(host: CommandHost) -> SessionStore | None:
    if host.store is None:
        host.error("sessions are not being saved (--no-save)")
    return host.store


@command("help", "", "show the commands")
async def _help(host: CommandHost, arg: str) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    for cmd in commands():
        names = ", ".join(f"/{n}" for n in (cmd.name, *cmd.aliases))
        table.add_row(Text(f"{names} {cmd.args}".rstrip(), style="bold cyan"), cmd.help)
    host.console.print(table)
    host.console.print(
        Text(
            "Enter sends · Esc-Enter or Alt-Enter adds a newline · Ctrl-C cancels a turn · Ctrl-D quits",
            style="dim",
        )
    )


@command("quit", "", "leave co (Ctrl-D does the same)", aliases=("exit",))
async def _quit(host: CommandHost, arg: str) -> None:
    host.running = False


@command("new", "", "start a new conversation (the current one stays saved)")
async def _new(host: CommandHost, arg: str) -> None:
    host.conv.new()
    host.info("New conversation.")


@command("clear", "", "clear the screen and start a new conversation")
async def _clear(host: CommandHost, arg: str) -> None:
    host.console.clear()
    await _new(host, arg)


@command("model", "[name]", "show the model, or switch to another for this session")
async def _model(host: CommandHost, arg: str) -> None:
    from co_cli.models import resolve_model

    if not arg:
        r = host.conv.resolved
        host.info(f"Model: {r.label} ({r.choice.reason}); context window {r.context_window:,} ({r.window_source})")
        return
    resolved = resolve_model(host.loaded.settings.model_copy(update={"model": arg}), "command line", host.loaded.paths)
    host.conv.switch_model(resolved)
    host.info(f"Model: {resolved.label} ({resolved.choice.reason}); window {resolved.context_window:,}")


@command("retry", "", "send the last prompt again after an error (to go back past an answer, /rewind)")
async def _retry(host: CommandHost, arg: str) -> None:
    if not host.conv.last_prompt:
        host.error("nothing to retry yet")
        return
    await host.turn(host.conv.last_prompt)


@command(
    "compact",
    "[focus] | show | preview [focus]",
    "summarise now (a focus steers it); show: the summary in force and the pins; preview: see it first",
)
async def _compact(host: CommandHost, arg: str) -> None:
    from co_cli.context.compact import NothingToCompact, compaction_line
    from co_cli.failure_text import describe_provider_error

    word, _, rest = arg.partition(" ")
    if word == "show":
        _show_compaction(host)
        return
    preview = word == "preview"
    focus = rest.strip() if preview else arg
    try:
        work = host.conv.preview_compaction(focus) if preview else host.conv.compact(focus)
        result = await host.cancellable(work, "Compacting…")
    except NothingToCompact as exc:
        host.info(exc.message[:1].upper() + exc.message[1:] + ".")
        return
    except CoError:
        raise
    except Exception as exc:
        host.error(f"compaction failed, history unchanged: {describe_provider_error(exc)}")
        return
    if result is None:
        host.info("Compaction cancelled; history unchanged.")
        return
    if preview:
        result = await _review_preview(host, result)
        if result is None:
            host.info("Discarded; history unchanged.")
            return
        host.conv.apply_compaction(result, focus)
    host.info(compaction_line(result))


def _show_compaction(host: CommandHost) -> None:
    summary = host.conv.current_summary()
    if summary is None:
        host.info("No compaction is in force: the model sees the whole conversation.")
    else:
        host.show(summary)
    if host.conv.pins:
        host.show("\n".join(["Pins:", *(f"{n}. {pin.text}" for n, pin in enumerate(host.conv.pins, 1))]))


async def _review_preview(host: CommandHost, result: CompactionResult) -> CompactionResult | None:
    """Show a proposed summary; apply it as it is, edit it in $EDITOR first, or discard it."""
    host.show(result.summary)
    while True:
        answer = ((await host.ask("[a]pply / [e]dit / [d]iscard? ")) or "").strip().lower()[:1]
        if answer == "a":
            return result
        if answer == "d" or answer == "":
            return None
        if answer == "e":
            from co_cli.terminal.editor import edit_text

            edited = edit_text(result.summary)
            if edited is None:
                host.error("no editor could be started (set $EDITOR); the summary is unchanged")
                continue
            result = host.conv.with_summary_text(result, edited)
            host.show(result.summary)


@command("context", "", "how full the context window is, and with what")
async def _context(host: CommandHost, arg: str) -> None:
    from co_cli.terminal.context_view import render_context

    host.show(render_context(host.conv.report(), plain=not host.interactive))


@command("sessions", "[query]", "list saved sessions, or search them")
async def _sessions(host: CommandHost, arg: str) -> None:
    from co_cli.terminal.views import search_table, sessions_table

    store = _store(host)
    if store is None:
        return
    if arg:
        hits = store.search(arg, limit=20)
        if not hits:
            host.info(f"No sessions match {arg!r}.")
            return
        host.show(search_table(hits))
        return
    sessions = store.list(limit=30)
    if not sessions:
        host.info("No saved sessions yet.")
        return
    host.show(sessions_table(sessions))


@command("resume", "[id]", "switch to a saved session; without an id, pick one", complete=_session_ids)
async def _resume(host: CommandHost, arg: str) -> None:
    store = _store(host)
    if store is None:
        return
    if not arg:
        await _pick(host, store)
        return
    await _switch_to(host, store.get(arg))


async def _pick(host: CommandHost, store: SessionStore) -> None:
    """The full-screen session picker; Enter resumes, f forks, d moves to the trash."""
    if not host.interactive:
        host.error("usage: /resume <id or prefix> (the picker needs a terminal; /sessions lists the ids)")
        return
    from co_cli.terminal.picker import pick_session

    choice = await pick_session(store, cwd=str(host.conv.deps.cwd), current=host.conv.session_id)
    if choice is None:
        return
    if choice.action == "fork":
        forked = store.fork(choice.session_id)
        await _switch_to(host, forked)
        host.info(f"Forked {choice.session_id[:8]} -> {forked.id}; you are now in the fork.")
        return
    await _switch_to(host, store.get(choice.session_id))


async def _switch_to(host: CommandHost, session: SessionInfo) -> None:
    from co_cli.models import resolve_model

    conv = host.conv
    if session.id == conv.session_id:
        host.info("That is the current session.")
        return
    conv.load(session)
    if session.model and session.model != conv.resolved.label:
        # Continue with the model the session was using, as `co chat --resume` does.
        try:
            settings = host.loaded.settings.model_copy(update={"model": session.model})
            conv.switch_model(resolve_model(settings, "session", host.loaded.paths))
        except CoError as exc:
            host.error(f"keeping {conv.resolved.label}: the session's model cannot be used ({exc.message})")
    host.show_resumed()


@command("fork", "[n]", "continue in a copy of this session (up to message n); the original stays as it is")
async def _fork(host: CommandHost, arg: str) -> None:
    if _store(host) is None:
        return
    if host.conv.session is None:
        host.error("nothing to fork yet: this conversation has no messages")
        return
    upto = _message_number(arg, "/fork [n]")
    parent = host.conv.session.id
    forked = host.conv.fork(upto)
    if forked:
        at = f" at #{upto}" if upto is not None else ""
        host.info(f"Forked {parent[:8]}{at} -> {forked.id}; you are now in the fork.")


def _message_number(arg: str, usage: str) -> int | None:
    """The message number of /fork and /rewind (as `co sessions show` numbers them), or None if not given."""
    if not arg:
        return None
    try:
        return int(arg.lstrip("#"))
    except ValueError:
        raise CoError(f"usage: {usage}, n a message number as `co sessions show` prints it (#n)") from None


@command("rename", "<title>", "rename this session")
async def _rename(host: CommandHost, arg: str) -> None:
    store = _store(host)
    if store is None:
        return
    if not arg:
        host.error("usage: /rename <title>")
        return
    if host.conv.session is None:
        host.error("nothing to rename yet: this conversation has no messages")
        return
    store.rename(host.conv.session.id, arg)
    host.conv.session = store.get(host.conv.session.id)
    host.info(f"Renamed to: {host.conv.session.title}")


@command("delete", "<id>", "move a saved session to the trash (asks to confirm)", complete=_session_ids)
async def _delete(host: CommandHost, arg: str) -> None:
    store = _store(host)
    if store is None:
        return
    if not arg:
        host.error("usage: /delete <id or prefix>")
        return
    session = store.get(arg)
    if not await host.confirm(f"Move {session.id} ({session.title}) to the trash?"):
        host.info("Not deleted.")
        return
    current = session.id == host.conv.session_id
    if current:
        host.conv.new()
    store.trash(session.id)
    restore = f" `co sessions restore {session.id[:12]}` brings it back."
    host.info(f"Moved {session.id} to the trash." + (" Started a new conversation." if current else "") + restore)


# ----- compaction you can see, steer and undo ---------------------------------------------------------------


@command(
    "pin",
    "[--remember] [text]",
    "pin a standing instruction for this session (no text: your last message); --remember: for every session",
)
async def _pin(host: CommandHost, arg: str) -> None:
    remember = arg == "--remember" or arg.startswith("--remember ")
    arg = arg.removeprefix("--remember").strip()
    text = arg or host.conv.last_user_text()
    if not text:
        host.error("nothing to pin yet: type /pin <instruction>")
        return
    pin = host.conv.pin(text)
    if pin is None:
        host.info("Already pinned.")
    else:
        number = len(host.conv.pins)
        host.info(f"Pinned #{number}: {pin.text}  (every request of this session carries it; /unpin {number})")
    if remember:
        opened = _memories(host)
        if opened is None:
            return
        store, project = opened
        memory = store.add(text, actor="user", kind="instruction", project=project, source_session=host.conv.session_id)
        host.info(f"Remembered {memory.ref} as an instruction for every session  (/forget {memory.ref})")


@command("pins", "", "list the pinned standing instructions")
async def _pins(host: CommandHost, arg: str) -> None:
    if not host.conv.pins:
        host.info("No pins. /pin <instruction> keeps one verbatim in every request of this session.")
        return
    for number, pin in enumerate(host.conv.pins, 1):
        origin = "" if pin.source == "user" else "  (found by a summary)"
        host.info(f"{number}. {pin.text}{origin}")


@command("unpin", "<n>", "remove pin n (see /pins)")
async def _unpin(host: CommandHost, arg: str) -> None:
    if not arg.strip().isdigit():
        host.error("usage: /unpin <n> (see /pins)")
        return
    pin = host.conv.unpin(int(arg))
    host.info(f"Unpinned: {pin.text}")


@command("uncompact", "", "undo the latest compaction: the working context as it was before it")
async def _uncompact(host: CommandHost, arg: str) -> None:
    count = host.conv.uncompact()
    if count is None:
        host.info("Nothing to undo: no compaction is in force.")
        return
    host.info(f"Compaction undone: the working context holds {count} messages again (the transcript never changed).")


def _memories(host: CommandHost) -> tuple[Any, str] | None:
    """The memory store and this project's key, or None (with an error) when memory is off or not saved."""
    from co_cli.memory.inject import memory_on, project_key

    if host.store is None:
        host.error("memory needs saved sessions (not with --no-save)")
        return None
    if not memory_on(host.conv.deps):
        host.error("memory is off in this run (--no-memory or the memory setting)")
        return None
    return host.store.memories(), project_key(host.conv.deps)


@command("memory", "[review]", "long-term memory: counts, proposals to review, what the last request used")
async def _memory(host: CommandHost, arg: str) -> None:
    from co_cli.memory.review import describe
    from co_cli.memory.status import forget_toolbar_cache

    opened = _memories(host)
    if opened is None:
        return
    store, project = opened
    if arg.strip().lower() == "review":
        await _memory_review(host, store, project)
        forget_toolbar_cache()
        return
    if arg.strip():
        host.error("usage: /memory or /memory review")
        return
    counts = store.counts(project)
    active = store.list(project=project)
    users = sum(1 for m in active if m.scope == "user")
    host.info(
        f"Memories: {users} user, {len(active) - users} this project · {counts.get('proposed', 0)} to review · "
        f"{counts.get('deleted', 0)} forgotten (co memory log, co memory undo)"
    )
    instructions = [m for m in active if m.kind == "instruction"]
    if instructions:
        lines = [f"  {m.ref} {m.text}" for m in instructions]
        host.show(Text("Instructions for every session (memories):\n" + "\n".join(lines), style="dim"))
    if host.conv.pins:
        lines = [f"  {n}. {pin.text}" for n, pin in enumerate(host.conv.pins, 1)]
        host.show(Text("Pinned in this session only (/pins, /unpin N):\n" + "\n".join(lines), style="dim"))
    for proposal in store.proposals(project):
        host.show(Text("\n".join(describe(store, proposal)), style="yellow"))
    used = host.conv.deps.memory_used
    if used:
        host.show(Text("Sent with the last request:\n" + "\n".join(f"  m{m.id} {m.text}" for m in used), style="dim"))
    else:
        host.show(Text("The last request was sent no memories.", style="dim"))
    worker = host.conv.memory_worker
    if worker is None and host.conv.deps.settings.memory_extract != "off":
        host.show(
            Text(
                "Automatic extraction is off with the embedded model as summariser (set summarization_model "
                "to a larger model to have facts proposed from your messages).",
                style="dim",
            )
        )
    if worker is not None and worker.last_error:
        host.error(f"the last memory extraction failed: {worker.last_error}")


async def _memory_review(host: CommandHost, store: Any, project: str) -> None:
    from co_cli.memory.review import review

    proposals = store.proposals(project)
    if not proposals:
        host.info("Nothing to review.")
        return
    if not host.interactive:
        host.error("/memory review asks about each proposal: use it in a terminal, or `co memory review`")
        return
    accepted, rejected, skipped = await review(store, proposals, host.ask, host.info)
    host.info(f"{accepted} accepted, {rejected} rejected, {skipped} left to review.")


@command("remember", "<text>", "keep a fact, preference or instruction for later sessions")
async def _remember(host: CommandHost, arg: str) -> None:
    opened = _memories(host)
    if opened is None:
        return
    store, project = opened
    if not arg.strip():
        host.error("usage: /remember <text>")
        return
    memory = store.add(arg, actor="user", project=project, source_session=host.conv.session_id)
    host.info(f"Remembered {memory.ref}: {memory.text}  (/forget {memory.ref})")


@command("forget", "<id>", "forget a memory (co memory undo brings it back)")
async def _forget(host: CommandHost, arg: str) -> None:
    opened = _memories(host)
    if opened is None:
        return
    store, _ = opened
    if not arg.strip():
        host.error("usage: /forget <id> (e.g. /forget m12; /memory shows them)")
        return
    memory = store.forget(arg, actor="user")
    host.info(f"Forgot {memory.ref}: {memory.text}")


@command("rewind", "[n]", "go back to message n (default: before your last prompt) in a fork; the original stays")
async def _rewind(host: CommandHost, arg: str) -> None:
    if _store(host) is None:
        return
    if host.conv.session is None:
        host.error("nothing to rewind yet: this conversation has no messages")
        return
    upto = _message_number(arg, "/rewind [n]")
    parent = host.conv.session.id
    forked = host.conv.rewind(upto)
    if forked is None:
        return
    where = f"after message #{forked.fork_seq}" if (forked.fork_seq or 0) >= 0 else "to the start"
    host.info(f"Rewound {where}: continuing in {forked.id}; {parent[:8]} stays as it was.")
    host.show_resumed()


@command("usage", "", "tokens and cost of the last turn and of this session")
async def _usage(host: CommandHost, arg: str) -> None:
    from co_cli.store.usage import UsageTotals, session_by_role
    from co_cli.terminal.views import usage_lines

    last = host.conv.last_usage
    if last is None:
        host.info("Last turn: none yet in this run.")
    else:
        totals = UsageTotals()
        totals.add(last)
        host.info("Last turn: " + usage_lines({"chat": totals})[0].removeprefix("chat: "))
    session = host.conv.session
    if host.store is None or session is None:
        return
    by_role = session_by_role(host.store, session.id)
    if not by_role:
        host.info("This session: no usage recorded yet.")
        return
    host.info("This session:")
    for line in usage_lines(by_role):
        host.info(f"  {line}")
