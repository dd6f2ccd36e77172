"""MCP servers' tools for the model: ``servers`` runs the servers (no pydantic-ai import at module level, so
``co chat`` can start them before the prompt), ``toolset`` offers their tools under co's approval."""
