"""The agent's tools: files (confined to the working directory; edits shown as a diff and approved by the user)
and the shell (approved by the user)."""

from __future__ import annotations

from pydantic_ai.toolsets import FunctionToolset

from co_cli.deps import CoDeps
from co_cli.tools.edits import edit_file, write_file
from co_cli.tools.files import grep, list_dir, read_file
from co_cli.tools.shell import run_shell

TOOL_NAMES = ("read_file", "list_dir", "grep", "write_file", "edit_file", "run_shell")


def build_toolset() -> FunctionToolset[CoDeps]:
    """co's file and shell tools in one toolset; they ask for approval themselves (``ApprovalRequired``)."""
    return FunctionToolset[CoDeps]([read_file, list_dir, grep, write_file, edit_file, run_shell], id="co-tools")


__all__ = ["TOOL_NAMES", "build_toolset"]
