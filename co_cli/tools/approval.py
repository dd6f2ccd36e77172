"""Answering the agent's approval requests: approve-all, ask the user, or deny when nobody can be asked.

Use the handler with ``HandleDeferredToolCalls(handler=make_approval_handler(...))`` so approvals are
resolved inline and the run goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from co_cli.deps import CoDeps

USER_DENIED_MESSAGE = "The user denied this tool call."
NON_INTERACTIVE_DENIED_MESSAGE = (
    "The user's approval is needed to run this and could not be asked (non-interactive; rerun with --approve-all)."
)
DEFAULT_REASON = "needs the user's approval"


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call waiting for the user's answer."""

    tool_name: str
    args: dict[str, Any] = field(default_factory=dict)
    reason: str = DEFAULT_REASON
    command: str | None = None
    always: str | None = None
    """What "a" allows for the rest of the session besides a shell command (e.g. one tool of an MCP server)."""
    always_label: str = "this command"
    """How the question names what "a" allows."""
    diff: str | None = None
    """The change an edit tool would make, as a unified diff: what the user answers about."""


ApprovalPrompt = Callable[[ApprovalRequest], Awaitable[str]]
"""Asks the user about one request; answers "y" (once), "n" (deny) or "a" (always, for this exact command)."""

ApprovalHandler = Callable[[RunContext[CoDeps], DeferredToolRequests], Awaitable[DeferredToolResults | None]]


def _shown(value: Any) -> str:
    """The value as the user must see it: control characters and newlines escaped."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def describe_call(tool_name: str, args: Mapping[str, Any]) -> str:
    """One line naming the call: the exact command for run_shell, the path for file tools."""
    if tool_name == "run_shell":
        line = f"run_shell: {_shown(args.get('command', ''))}"
        if args.get("timeout") is not None:
            line += f"  (timeout {args['timeout']} s)"
        return line
    if tool_name == "grep":
        line = f"grep: {_shown(repr(args.get('pattern', '')))} in {_shown(args.get('path', '.'))}"
        if args.get("glob"):
            line += f" (files {_shown(args['glob'])})"
        return line
    if tool_name in ("read_file", "list_dir", "write_file", "edit_file"):
        return f"{tool_name}: {_shown(args.get('path', '.'))}"
    shown_args = ", ".join(f"{key}={_shown(repr(value))}" for key, value in args.items())
    return f"{tool_name}({shown_args})"


def build_request(tool_name: str, args: dict[str, Any], metadata: Mapping[str, Any] | None) -> ApprovalRequest:
    """An ApprovalRequest from a deferred call and the metadata its tool attached to ``ApprovalRequired``."""
    metadata = metadata or {}
    reason = str(metadata.get("reason") or DEFAULT_REASON)
    if metadata.get("path"):
        reason = f"{reason}: {_shown(metadata['path'])}"
    # A command the tool asks about "once" (outside the sandbox) is never allowed for the session.
    command = args.get("command") if tool_name == "run_shell" and not metadata.get("once") else None
    always = metadata.get("always")
    return ApprovalRequest(
        tool_name=tool_name,
        args=args,
        reason=reason,
        command=command if isinstance(command, str) else None,
        always=str(always) if always else None,
        always_label=str(metadata.get("always_label") or "this command"),
        diff=str(metadata["diff"]) if metadata.get("diff") is not None else None,
    )


def make_approval_handler(
    ask: ApprovalPrompt | None,
    *,
    approve_all: bool,
    deps_getter: Callable[[], CoDeps] | None = None,
    denied: str = NON_INTERACTIVE_DENIED_MESSAGE,
) -> ApprovalHandler:
    """Build a ``HandleDeferredToolCalls`` handler.

    ``approve_all`` approves everything; ``ask=None`` (non-interactive) denies with a message the model
    sees; otherwise each call is put to ``ask``: "y" approves once, "a" approves and, for run_shell,
    allows that exact command for the rest of the session (for an MCP tool, that tool of that server; for an
    edit tool, edits of that file),
    anything else denies; ``denied`` is what the model is told when nobody can be asked. ``deps_getter``
    gives the deps that hold the session's allowed commands (default: the run's deps).
    """

    async def handle(ctx: RunContext[CoDeps], requests: DeferredToolRequests) -> DeferredToolResults | None:
        if not requests.approvals:
            return None
        deps = deps_getter() if deps_getter is not None else ctx.deps
        approvals: dict[str, ToolApproved | ToolDenied] = {}
        answered_by: dict[str, str] = {}
        # What a tool attached to its question reaches it again once approved (an edit: the content it showed).
        shown = {call_id: dict(meta) for call_id, meta in requests.metadata.items() if isinstance(meta, Mapping)}
        for call in requests.approvals:
            call_id = call.tool_call_id
            request = build_request(call.tool_name, call.args_as_dict(), requests.metadata.get(call_id))
            if approve_all:
                approvals[call_id], answered_by[call_id] = ToolApproved(), "approve-all"
                continue
            if request.command is not None and request.command in deps.state.approved_commands:
                approvals[call_id], answered_by[call_id] = ToolApproved(), "session-allowed"
                continue
            if request.always is not None and request.always in deps.state.approved_tools:
                approvals[call_id], answered_by[call_id] = ToolApproved(), "session-allowed"
                continue
            if ask is None:
                approvals[call_id] = ToolDenied(denied)
                answered_by[call_id] = "non-interactive"
                continue
            answer = (await ask(request)).strip().lower()[:1]
            answered_by[call_id] = "user"
            if answer == "a":
                if request.command is not None:
                    deps.state.approved_commands.add(request.command)
                elif request.always is not None:
                    deps.state.approved_tools.add(request.always)
                approvals[call_id] = ToolApproved()
            elif answer == "y":
                approvals[call_id] = ToolApproved()
            else:
                approvals[call_id] = ToolDenied(USER_DENIED_MESSAGE)
        return requests.build_results(approvals=approvals, answered_by=answered_by, metadata=shown)

    return handle
