"""When to compact: the thresholds, and how the summariser's failures are handled (cooldown, circuit breaker).

Pure bookkeeping: no messages and no model calls here, so a change of policy is a change of this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from co_cli.context.tokens import TokenEstimate

if TYPE_CHECKING:
    from co_cli.config import Settings
    from co_cli.context.compact import Skipped

FALLBACK_COOLDOWN_REQUESTS = 3
"""After a static-marker fallback, this many requests compact without asking the summariser."""
MAX_CONSECUTIVE_FAILURES = 3
"""After this many fallbacks in a row the summariser is not called again until ``reset()``."""
MIN_SPAN_TOKENS = 800
"""A span smaller than this is not summarised (a summary of it would not be much smaller): it is left to grow."""
MUST_FIT_FRACTION = 0.95
"""Past this share of the window the request would not fit: compaction may fall back to the static marker,
and happens even with auto_compact off."""
CHARS_PER_TOKEN = 4
OFFLOAD_WINDOW_SHARE = 4
"""An offloaded output's threshold is at most 1/4 of the window, so one output cannot fill it."""
SLOW_SUMMARISER_HINT = (
    "To give it longer, raise request_timeout (settings.json or CO_CLI_REQUEST_TIMEOUT), or set a faster "
    "summarization_model."
)
USER_WORDS_WINDOW_SHARE = 4
"""The user's words kept verbatim beside a summary take at most 1/4 of the window."""


@dataclass(frozen=True)
class GovernorConfig:
    """The settings context governance needs, and the window it works in."""

    context_window: int
    compact_threshold: float = 0.8
    max_history_messages: int = 40
    tool_output_trim_chars: int = 2000
    tool_output_offload_chars: int = 40000
    auto_compact: bool = True
    min_span_tokens: int = MIN_SPAN_TOKENS
    request_timeout: float = 120.0
    """Seconds the summariser may take to start answering (as for the chat model)."""
    user_words_tokens: int = 20_000

    @classmethod
    def from_settings(cls, settings: Settings, context_window: int) -> GovernorConfig:
        return cls(
            context_window=context_window,
            compact_threshold=settings.compact_threshold,
            max_history_messages=settings.max_history_messages,
            tool_output_trim_chars=settings.tool_output_trim_chars,
            tool_output_offload_chars=settings.tool_output_offload_chars,
            auto_compact=settings.auto_compact == "on",
            min_span_tokens=settings.compact_min_span_tokens,
            request_timeout=settings.request_timeout,
            user_words_tokens=settings.compact_user_words_tokens,
        )

    @property
    def threshold_tokens(self) -> int:
        return int(self.compact_threshold * self.context_window)

    @property
    def user_words_budget(self) -> int:
        """Tokens of the user's own messages kept verbatim beside a summary: the setting, but never more than a
        quarter of the window."""
        return user_words_budget(self.user_words_tokens, self.context_window)

    @property
    def offload_threshold(self) -> int:
        """Characters past which a tool output goes to a file: the setting, but never more than a quarter of
        the window (about 4 characters a token)."""
        setting = self.tool_output_offload_chars
        if setting <= 0 or self.context_window <= 0:
            return setting
        return min(setting, self.context_window * CHARS_PER_TOKEN // OFFLOAD_WINDOW_SHARE)


def user_words_budget(setting: int, context_window: int) -> int:
    """``setting`` capped at a quarter of ``context_window`` (when known)."""
    return min(setting, context_window // USER_WORDS_WINDOW_SHARE) if context_window > 0 else setting


@dataclass
class CompactionPolicy:
    """Decides whether a request must be compacted and whether the summariser may be asked."""

    config: GovernorConfig
    cooldown: int = 0
    failures: int = 0
    summarizer_disabled: bool = False
    stuck_notice_sent: bool = field(default=False)
    grown_span_tokens: int = 0
    """Raised when a summary came back no smaller than its span: the next span must be bigger."""
    slow_notice_sent: bool = False

    @property
    def min_span_tokens(self) -> int:
        return max(self.config.min_span_tokens, self.grown_span_tokens)

    def must_fit(self, estimate: TokenEstimate) -> bool:
        """The request would not fit the window without compacting now."""
        return self.config.context_window > 0 and estimate.total >= MUST_FIT_FRACTION * self.config.context_window

    def skipped(self, skipped: Skipped) -> None:
        """A summary no smaller than its span asks for a span twice its size next time (within the window)."""
        if skipped.summary_tokens:
            cap = self.config.context_window // 2 if self.config.context_window > 0 else 1 << 30
            self.grown_span_tokens = min(cap, max(self.grown_span_tokens, 2 * skipped.summary_tokens))

    def over_budget(self, estimate: TokenEstimate, message_count: int) -> bool:
        """Past the token threshold, or past the message-count limit."""
        if self.config.context_window > 0 and estimate.total > self.config.threshold_tokens:
            return True
        limit = self.config.max_history_messages
        return limit > 0 and message_count > limit

    def over_tokens(self, estimate: TokenEstimate) -> bool:
        return self.config.context_window > 0 and estimate.total > self.config.threshold_tokens

    def take_request(self) -> bool:
        """Called once per model request: whether the summariser may be asked for this one."""
        may_ask = not self.summarizer_disabled and self.cooldown == 0
        if self.cooldown > 0:
            self.cooldown -= 1
        return may_ask

    def record(self, method: str, error: str | None, *, timed_out: bool = False) -> list[str]:
        """Account for a compaction the summariser was asked for; returns the notices to show. A summariser
        that timed out is named once per session, with the setting that gives it longer."""
        if method == "summary":
            self.failures = 0
            return []
        self.failures += 1
        self.cooldown = FALLBACK_COOLDOWN_REQUESTS
        kept = "an extractive digest (every message you typed, the tool calls, the identifiers)"
        if method == "marker":
            kept = "a static marker, as the request would not fit the window otherwise"
        notices: list[str] = []
        if timed_out:
            if not self.slow_notice_sent:
                self.slow_notice_sent = True
                notices.append(
                    f"The summariser is slow: it sent nothing for {self.config.request_timeout:g} s, so co kept "
                    f"{kept} instead and did not ask again. {SLOW_SUMMARISER_HINT}"
                )
        elif not (error or "").startswith("summary rejected"):  # a rejection's reason is in the compaction line
            notices.append(f"Summariser failed ({error}); kept {kept} instead.")
        if self.failures >= MAX_CONSECUTIVE_FAILURES:
            self.summarizer_disabled = True
            notices.append(
                f"Summariser failed {self.failures} times in a row; older messages will be replaced by an "
                "extractive digest until /compact succeeds."
            )
        return notices

    def stuck(self, estimate: TokenEstimate) -> str | None:
        """The one notice for a context over the token threshold that nothing more can shrink."""
        if not self.over_tokens(estimate) or self.stuck_notice_sent:
            return None
        self.stuck_notice_sent = True
        return (
            f"Context is at ~{estimate.total} tokens (threshold {self.config.threshold_tokens}) and nothing "
            "more can be summarised automatically; /compact or /new may help."
        )

    def compacted(self) -> None:
        self.stuck_notice_sent = False

    def reset(self) -> None:
        """Let the summariser be called again (after a manual /compact)."""
        self.failures = 0
        self.cooldown = 0
        self.summarizer_disabled = False
