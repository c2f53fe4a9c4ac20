"""Errors raised by the LLM port.

Every implementation raises only these for provider failures, so callers never see an SDK's
own exception types. ``retryable`` says whether sending the same request again may succeed.
"""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = [
    "LlmBadRequestError",
    "LlmConnectionError",
    "LlmError",
    "LlmOverloadedError",
    "LlmRateLimitedError",
    "LlmServerError",
    "LlmStreamCutError",
    "LlmTimeoutError",
]


class LlmError(KelpieError):
    """Root of the LLM errors; also raised for provider failures with no better category.

    ``status`` is the HTTP status behind the error, when there is one.
    """

    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LlmTimeoutError(LlmError):
    """The provider did not answer in time (a client timeout, or a 408/504 answer)."""

    retryable = True


class LlmRateLimitedError(LlmError):
    """Too many requests (429). ``retry_after`` is the wait the provider asked for, in
    seconds, if it said."""

    retryable = True

    def __init__(
        self, message: str, *, status: int | None = 429, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class LlmOverloadedError(LlmError):
    """The provider is overloaded (Anthropic's 529, or an ``overloaded_error`` mid-stream)."""

    retryable = True


class LlmServerError(LlmError):
    """The provider failed (5xx), or sent something that is not a valid answer."""

    retryable = True


class LlmConnectionError(LlmError):
    """The provider could not be reached, or the connection broke before an answer."""

    retryable = True


class LlmBadRequestError(LlmError):
    """The provider rejected the request (4xx other than 408 and 429): sending it again will
    fail the same way."""

    retryable = False


class LlmStreamCutError(LlmError):
    """A stream ended in the middle of a message: the chunks already received are an
    incomplete answer. Asking again may succeed."""

    retryable = True
