"""Long-term memory from the prompt: what is kept and what waits for review, remembering and forgetting."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from co_cli.terminal.commands.registry import CommandHost, command
from co_cli.terminal_text import printable

MEMORIES_SHOWN = 50
"""The memories /memory lists; `co memory list` shows every one."""


def _plain(text: str, style: str) -> Text:
    """Memory and pin texts shown as they are: no markup (a Text), no control characters."""
    return Text(printable(text), style=style)


def open_memories(host: CommandHost) -> tuple[Any, str] | None:
    """The memory store and this project's key, or None (with an error) when memory is off or not saved."""
    if not host.saving:
        host.error("memory needs saved sessions (not with --no-save)")
        return None
    memories = host.conv.workspace.memories
    if memories is None:
        host.error("memory is off in this run (--no-memory or the memory setting)")
        return None
    return memories, host.conv.workspace.project


@command("memory", "[review]", "long-term memory: the memories, proposals to review, what the last request used")
async def _memory(host: CommandHost, arg: str) -> None:
    from co_cli.memory.review import describe
    from co_cli.terminal.toolbar import forget_memory_note

    opened = open_memories(host)
    if opened is None:
        return
    store, project = opened
    if arg.strip().lower() == "review":
        await _memory_review(host, store, project)
        forget_memory_note()
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
    if active:
        lines = [
            f"  {m.ref} [{m.scope}, {m.kind}]{f' ({m.whose})' if m.whose else ''} {m.text}"
            for m in active[:MEMORIES_SHOWN]
        ]
        if len(active) > MEMORIES_SHOWN:
            lines.append(f"  … and {len(active) - MEMORIES_SHOWN} more (co memory list)")
        host.show(_plain("Remembered (/forget <id> forgets one):\n" + "\n".join(lines), "dim"))
    if host.conv.pins:
        lines = [f"  {n}. {pin.text}" for n, pin in enumerate(host.conv.pins, 1)]
        host.show(_plain("Pinned in this session only (/pins, /unpin N):\n" + "\n".join(lines), "dim"))
    for proposal in store.review.proposals(project):
        host.show(_plain("\n".join(describe(store, proposal)), "yellow"))
    used = host.conv.state.memory_used
    if used:
        host.show(_plain("Sent with the last request:\n" + "\n".join(f"  m{m.id} {m.text}" for m in used), "dim"))
    else:
        host.show(Text("The last request was sent no memories.", style="dim"))
    worker = host.conv.background.memory_worker
    if worker is None and host.loaded.settings.memory_extract != "off":
        host.show(
            Text(
                "Automatic extraction is off with the small model co ships as summariser (set "
                "summarization_model to a larger one, a provider's or local:/path/to/model.gguf, to have facts "
                "proposed from your messages).",
                style="dim",
            )
        )
    if worker is not None and worker.last_error:
        host.error(f"the last memory extraction failed: {worker.last_error}")


async def _memory_review(host: CommandHost, store: Any, project: str) -> None:
    from co_cli.memory.review import review

    proposals = store.review.proposals(project)
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
    opened = open_memories(host)
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
    opened = open_memories(host)
    if opened is None:
        return
    store, _ = opened
    if not arg.strip():
        host.error("usage: /forget <id> (e.g. /forget m12; /memory shows them)")
        return
    memory = store.forget(arg, actor="user")
    host.info(f"Forgot {memory.ref}: {memory.text}")
