"""Compaction you can see, steer and undo: summarise now (or preview and edit it first), undo the latest
summary, and pin the standing instructions every request of the session carries verbatim."""

from __future__ import annotations

from typing import TYPE_CHECKING

from co_cli.errors import CoError
from co_cli.terminal.commands.memory import open_memories
from co_cli.terminal.commands.registry import CommandHost, command
from co_cli.terminal_text import counted
from co_cli.vocabulary import COMPACTING

if TYPE_CHECKING:
    from co_cli.context.compact import CompactionResult


@command(
    "compact",
    "[focus] | show | preview [focus]",
    "summarise now (a focus steers it); show: the summary in force and the pins; preview: see it first",
)
async def _compact(host: CommandHost, arg: str) -> None:
    from co_cli.context.compact import NothingToCompact, compaction_line

    word, _, rest = arg.partition(" ")
    if word == "show":
        _show_compaction(host)
        return
    preview = word == "preview"
    focus = rest.strip() if preview else arg
    try:
        work = host.conv.compactions.preview(focus) if preview else host.conv.compactions.compact(focus)
        result = await host.cancellable(work, COMPACTING)
    except NothingToCompact as exc:
        host.info(exc.message[:1].upper() + exc.message[1:] + ".")
        return
    except CoError:
        raise
    except Exception as exc:
        host.error(f"compaction failed, history unchanged: {host.conv.compactions.failure_text(exc)}")
        return
    if result is None:
        host.info("Compaction cancelled; history unchanged.")
        return
    if preview:
        result = await _review_preview(host, result)
        if result is None:
            host.info("Discarded; history unchanged.")
            return
        host.conv.compactions.apply(result, focus)
    host.info(compaction_line(result))
    if host.conv.compactions.offered:
        host.info(host.conv.pins.offered_notice(host.conv.compactions.offered))


def preview_line(result: CompactionResult) -> str:
    """What a previewed summary would do, before it is applied."""
    check = f"; {result.check}" if result.check else ""
    return (
        f"Not applied yet: it would replace {counted(result.n_replaced, 'message')}, "
        f"~{result.tokens_before:,} -> ~{result.tokens_after:,} tokens{check}."
    )


def _show_compaction(host: CommandHost) -> None:
    from co_cli.context.user_words import USER_WORDS_HEADING

    summary = host.conv.compactions.current_summary()
    if summary is None:
        host.info("No compaction is in force: the model sees the whole conversation.")
    else:
        host.show(summary)
        if USER_WORDS_HEADING in summary:
            host.info(
                "Your own messages are kept word for word beside the summary (the newest first; older ones as "
                "their sentences that hold an identifier): a summary loses what you said in plain words first."
            )
        _show_suggestions(host)
    if host.conv.pins:
        host.show("\n".join(["Pins:", *(f"{n}. {pin.text}" for n, pin in enumerate(host.conv.pins, 1))]))


def _show_suggestions(host: CommandHost) -> None:
    """What English word cues read in your messages when the summariser gave no typed answer: nothing of it
    was applied; each line ends with the command that would apply it."""
    suggestions = host.conv.compactions.current_suggestions()
    if not suggestions:
        return
    lines = [
        "Suggested from your words (the summariser gave no typed answer, so nothing was pinned; English word cues "
        "read these and may be wrong; each command applies one):"
    ]
    lines += [f"  {s.kind}: {s.text}\n    {s.command}" for s in suggestions]
    host.show("\n".join(lines))


async def _review_preview(host: CommandHost, result: CompactionResult) -> CompactionResult | None:
    """Show a proposed summary and what applying it would change; apply it as it is, edit it in $EDITOR first,
    or discard it."""
    host.show(result.summary)
    host.info(preview_line(result))
    while True:
        answer = ((await host.ask("[a]pply / [e]dit / [d]iscard? ")) or "").strip().lower()[:1]
        if answer == "a":
            return result
        if answer == "d" or answer == "":
            return None
        if answer == "e":
            from co_cli.terminal.editor import edit_text

            try:
                edited = edit_text(result.summary)
            except CoError as exc:
                host.error(exc.message)
                continue
            if edited is None:
                host.error("no editor could be started (set $EDITOR); the summary is unchanged")
                continue
            if not edited.strip():
                host.error("an empty summary is not applied; the summary is unchanged")
                continue
            result = host.conv.compactions.with_summary_text(result, edited)
            host.show(result.summary)
            host.info(preview_line(result))


@command(
    "pin",
    "[--remember] [text]",
    "pin a standing instruction for this session (no text: your last message); --remember: for every session",
)
async def _pin(host: CommandHost, arg: str) -> None:
    remember = arg == "--remember" or arg.startswith("--remember ")
    arg = arg.removeprefix("--remember").strip()
    text = arg or host.conv.pins.last_user_text()
    if not text:
        host.error("nothing to pin yet: type /pin <instruction>")
        return
    pin = host.conv.pins.add(text)
    if pin is None:
        host.info("Already pinned.")
    else:
        number = len(host.conv.pins)
        host.info(f"Pinned #{number}: {pin.text}  (every request of this session carries it; /unpin {number})")
    if remember:
        opened = open_memories(host)
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
        origin = "" if pin.source == "user" else "  (found in your messages by a compaction)"
        host.info(f"{number}. {pin.text}{origin}")


@command("unpin", "[n]", "remove pin n (see /pins); alone: the pins the latest compaction found")
async def _unpin(host: CommandHost, arg: str) -> None:
    if not arg.strip():
        removed = host.conv.pins.undo_offered()
        if not removed:
            host.error("usage: /unpin <n> (see /pins); no pins found by a compaction are left to undo")
            return
        for pin in removed:
            host.info(f"Unpinned: {pin.text}")
        return
    if not arg.strip().isdigit():
        host.error("usage: /unpin <n> (see /pins)")
        return
    pin = host.conv.pins.remove(int(arg))
    host.info(f"Unpinned: {pin.text}")


@command("uncompact", "", "undo the latest compaction: the working context as it was before it")
async def _uncompact(host: CommandHost, arg: str) -> None:
    count = host.conv.compactions.undo()
    if count is None:
        host.info("Nothing to undo: no compaction is in force.")
        return
    held = counted(count, "message")
    host.info(f"Compaction undone: the working context holds {held} again (the transcript never changed).")
