"""Token estimate of plain text, without importing pydantic-ai (the memory CLI and `co config path` use it)."""

from __future__ import annotations


def estimate_text_tokens(text: str) -> int:
    """About four characters per token for ASCII; one token per non-ASCII character (CJK, emoji)."""
    n = len(text)
    if n == 0:
        return 0
    if text.isascii():
        return (n + 3) // 4
    extra_bytes = len(text.encode("utf-8", "surrogatepass")) - n
    non_ascii = min(n, (extra_bytes + 1) // 2)
    return (n - non_ascii + 3) // 4 + non_ascii


__all__ = ["estimate_text_tokens"]
