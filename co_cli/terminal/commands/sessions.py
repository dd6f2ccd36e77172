"""Saved sessions from the prompt: list and search them, switch to one, fork or rewind this one, rename it,
move one to the trash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from co_cli.errors import CoError
from co_cli.terminal.commands.registry import CommandHost, command

if TYPE_CHECKING:
    from co_cli.store import SessionInfo, Store


def _session_ids(host: CommandHost) -> list[tuple[str, str]]:
    """The latest sessions as completions: each id as co shows it, with its title beside it."""
    if not host.saving:
        return []
    from co_cli.terminal.views import format_time

    sessions = host.store.sessions.list(limit=30)
    short = host.store.sessions.short_ids(s.id for s in sessions)
    return [(short[s.id], f"{s.title or 'untitled'} · {format_time(s.updated_at)}") for s in sessions]


def _refused(host: CommandHost) -> bool:
    """Under --no-save the saved sessions are out of reach: say so (True) and do nothing."""
    if not host.saving:
        host.error("sessions are not being saved (--no-save)")
    return not host.saving


def _message_number(arg: str, usage: str) -> int | None:
    """The message number of /fork and /rewind (as `co sessions show` numbers them), or None if not given."""
    if not arg:
        return None
    try:
        return int(arg.lstrip("#"))
    except ValueError:
        raise CoError(f"usage: {usage}, n a message number as `co sessions show` prints it (#n)") from None


@command("sessions", "[query]", "list saved sessions, or search them")
async def _sessions(host: CommandHost, arg: str) -> None:
    from co_cli.terminal.views import parent_short_ids, search_lines, search_table, sessions_table

    if _refused(host):
        return
    store = host.store
    if arg:
        hits = store.search.messages(arg, limit=20)
        if not hits:
            host.info(f"No sessions match {arg!r}.")
            return
        shown_hits = store.sessions.short_ids(hit.session_id for hit in hits)
        host.show(search_lines(hits, shown_hits) if host.interactive else search_table(hits))
        return
    sessions = store.sessions.list(limit=30)
    if not sessions:
        host.info("No saved sessions yet.")
        return
    parents = parent_short_ids(store, sessions)
    if not host.interactive:  # a pipe gets whole ids and whole lines
        host.show(sessions_table(sessions, short_ids=parents))
        return
    shown = store.sessions.short_ids(s.id for s in sessions)
    host.show(sessions_table(sessions, short_ids=parents, shown_ids=shown, width=host.console.width))


@command("resume", "[id]", "switch to a saved session; without an id, pick one", complete=_session_ids)
async def _resume(host: CommandHost, arg: str) -> None:
    if _refused(host):
        return
    store = host.store
    if not arg:
        await _pick(host, store)
        return
    await _switch_to(host, store.sessions.get(arg))


async def _pick(host: CommandHost, store: Store) -> None:
    """The full-screen session picker; Enter resumes, f forks, d moves to the trash."""
    if not host.interactive:
        host.error("usage: /resume <id or prefix> (the picker needs a terminal; /sessions lists the ids)")
        return
    from co_cli.terminal.picker import pick_session

    choice = await pick_session(store, cwd=str(host.conv.workspace.cwd), current=host.conv.session_id)
    if choice is None:
        return
    if choice.action == "fork":
        from co_cli.session.branches import fork_at

        forked = fork_at(store, choice.session_id, files_root=host.loaded.paths.tool_outputs)
        await _switch_to(host, forked)
        host.info(f"Forked {store.sessions.short_id(choice.session_id)} -> {forked.id}; you are now in the fork.")
        await _files_back(host, choice.session_id, None)
        return
    await _switch_to(host, store.sessions.get(choice.session_id))


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
    if _refused(host):
        return
    if host.conv.session is None:
        host.error("nothing to fork yet: this conversation has no messages")
        return
    upto = _message_number(arg, "/fork [n]")
    parent = host.conv.session.id
    forked = host.conv.branches.fork(upto)
    if forked:
        at = f" at #{upto}" if upto is not None else ""
        host.info(f"Forked {host.store.sessions.short_id(parent)}{at} -> {forked.id}; you are now in the fork.")
        if upto is not None:
            await _files_back(host, parent, upto)


@command("rename", "<title>", "rename this session")
async def _rename(host: CommandHost, arg: str) -> None:
    if _refused(host):
        return
    if not arg:
        host.error("usage: /rename <title>")
        return
    if host.conv.session is None:
        host.error("nothing to rename yet: this conversation has no messages")
        return
    renamed = host.conv.rename(arg)
    host.info(f"Renamed to: {renamed.title}")


@command("delete", "<id>", "move a saved session to the trash (asks to confirm)", complete=_session_ids)
async def _delete(host: CommandHost, arg: str) -> None:
    if _refused(host):
        return
    store = host.store
    if not arg:
        host.error("usage: /delete <id or prefix>")
        return
    session = store.sessions.get(arg)
    if not await host.confirm(f"Move {session.id} ({session.title}) to the trash?"):
        host.info("Not deleted.")
        return
    current = session.id == host.conv.session_id
    if current:
        host.conv.new()
    store.trash.put(session.id)
    restore = f" `co sessions restore {store.sessions.short_id(session.id)}` brings it back."
    host.info(f"Moved {session.id} to the trash." + (" Started a new conversation." if current else "") + restore)


@command("rewind", "[n]", "go back to message n (default: before your last prompt) in a fork; the original stays")
async def _rewind(host: CommandHost, arg: str) -> None:
    if _refused(host):
        return
    if host.conv.session is None:
        host.error("nothing to rewind yet: this conversation has no messages")
        return
    upto = _message_number(arg, "/rewind [n]")
    parent = host.conv.session.id
    forked = host.conv.branches.rewind(upto)
    if forked is None:
        return
    where = f"after message #{forked.fork_seq}" if (forked.fork_seq or 0) >= 0 else "to the start"
    host.info(f"Rewound {where}: continuing in {forked.id}; {host.store.sessions.short_id(parent)} stays as it was.")
    host.show_resumed()
    await _files_back(host, parent, forked.fork_seq if forked.fork_seq is not None else -1)


async def _files_back(host: CommandHost, session_id: str, upto_seq: int | None) -> None:
    """Offer to take the files co changed back to the point the conversation went back to."""
    from co_cli.terminal.files_back import offer_files_back

    await offer_files_back(host.store, session_id, upto_seq, ask=host.ask if host.interactive else None, say=host.info)
