"""Every provider failure becomes one clear line."""

from __future__ import annotations

import pytest
from pydantic_ai import exceptions as ex

from co_cli.errors import ModelConfigError
from co_cli.failure_text import describe_provider_error, is_context_overflow

CATEGORY = {
    401: ex.ModelAuthenticationError,
    404: ex.ModelNotFoundError,
    429: ex.ModelRateLimitError,
    500: ex.ModelServerError,
    503: ex.ModelUnavailableError,
}


def http(status: int, body: object, code: str | None = None) -> ex.ModelHTTPError:
    """The errors pydantic-ai's models raise: an HTTP error that is also its category."""
    category = ex.ModelContextWindowExceededError if code == "context_length_exceeded" else CATEGORY.get(status)
    return ex.ModelHTTPError.for_category(
        category, status_code=status, model_name="m", body=body, provider_error_code=code
    )


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (http(401, {"message": "invalid api key"}), "authentication failed"),
        (http(429, {"message": "slow down"}), "rate limited"),
        (http(500, {"message": "boom"}), "provider error"),
        (http(503, {"message": "overloaded"}), "/retry"),
        (http(404, {"message": "no such model"}), "model not found"),
        (http(400, {"message": "too long"}, code="context_length_exceeded"), "context length exceeded"),
        (ex.ModelConnectionError("m", "Connection refused"), "cannot reach the server"),
        (ex.ModelTimeoutError("m", "timed out"), "timed out"),
        (ModelConfigError("missing key"), "missing key"),
        (RuntimeError("weird"), "RuntimeError: weird"),
    ],
)
def test_one_line_per_failure(exc: BaseException, expected: str) -> None:
    message = describe_provider_error(exc)
    assert expected in message
    assert "\n" not in message


def test_body_message_is_preferred_over_the_repr() -> None:
    message = describe_provider_error(http(500, {"message": "upstream exploded", "type": "server_error"}))
    assert "upstream exploded" in message and "status_code:" not in message


def test_context_overflow_detection() -> None:
    assert is_context_overflow(http(400, {"message": "x"}, code="context_length_exceeded"))
    assert is_context_overflow(http(400, {"message": "This model's maximum context length is 8192 tokens"}))
    assert not is_context_overflow(http(400, {"message": "bad request"}))
    assert not is_context_overflow(ValueError("context_length_exceeded"))
