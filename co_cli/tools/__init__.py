"""The agent's tools: files (confined to the working directory; edits shown as a diff and approved by the user)
and the shell (approved by the user)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from co_cli.deps import CoDeps
from co_cli.tools.edits import edit_file, write_file
from co_cli.tools.files import grep, list_dir, read_file
from co_cli.tools.shell import run_shell

TOOL_NAMES = ("read_file", "list_dir", "grep", "write_file", "edit_file", "run_shell")


def build_toolset() -> FunctionToolset[CoDeps]:
    """co's file and shell tools in one toolset; they ask for approval themselves (``ApprovalRequired``)."""
    return FunctionToolset[CoDeps]([read_file, list_dir, grep, write_file, edit_file, run_shell], id="co-tools")


LEAN_TOOL_NAMES = ("read_file", "edit_file", "write_file", "run_shell", "read_tool_output")
"""The tools a small window keeps: reading, changing and running, and paging a saved output (the shell lists
and searches; history search, memory and the task list are left out)."""


def lean_tool_defs(defs: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """``defs`` cut to the lean set, each described by its first sentence and its parameters by name only."""
    return [
        replace(
            d, description=_first_sentence(d.description or ""), parameters_json_schema=_bare(d.parameters_json_schema)
        )
        for d in defs
        if d.name in LEAN_TOOL_NAMES
    ]


def _first_sentence(text: str) -> str:
    first = " ".join(text.split("\n\n", 1)[0].split())
    head, dot, _ = first.partition(". ")
    return head + "." if dot else first


def _bare(schema: dict[str, Any]) -> dict[str, Any]:
    properties = {
        name: {key: value for key, value in prop.items() if key != "description"}
        for name, prop in schema.get("properties", {}).items()
    }
    return {**schema, "properties": properties}


__all__ = ["LEAN_TOOL_NAMES", "TOOL_NAMES", "build_toolset", "lean_tool_defs"]
