"""Errors as OpenAI clients expect them: ``{"error": {"message", "type", "code"}}`` with the right status."""

from __future__ import annotations

from starlette.responses import JSONResponse

from co_cli.failure_text import retold

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    500: "server_error",
    502: "upstream_error",
}


class ApiError(Exception):
    """A request co refuses or cannot answer: its status, one line for the client, and a code."""

    def __init__(self, status: int, message: str, code: str | None = None, type_: str | None = None) -> None:
        message = retold(message, "api")  # a client cannot type co's slash commands
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.type = type_ or ERROR_TYPES.get(status, "invalid_request_error")

    def body(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def error_response(status: int, message: str, code: str | None = None) -> JSONResponse:
    return ApiError(status, message, code).response()
