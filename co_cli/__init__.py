"""co: a terminal chat CLI for LLMs with context governance and session management."""

__version__ = "0.1.0"
