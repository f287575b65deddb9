"""Exception hierarchy of the agentd SDK.

Every error the router reports arrives as ``{"error": {"code", "message"}}``
with a stable ``code``; the SDK raises the subclass for that code (or, for
codes it does not know, for the HTTP status), so callers can catch
``NoRouteError`` or ``RateLimitedError`` without parsing strings. Every
exception carries ``code``, ``message`` and ``status`` (0 when no HTTP
answer was involved).
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class AgentdError(Exception):
    """Base class of every SDK error."""

    default_code = "AGENTD_ERROR"

    def __init__(self, message: str = "", *, code: Optional[str] = None, status: int = 0) -> None:
        self.code = code or self.default_code
        self.message = message
        self.status = status
        super().__init__(f"{self.code}: {message}" if message else self.code)


class RouterUnavailableError(AgentdError):
    """The router could not be reached or broke the connection.

    ``not_delivered`` is True when the router provably never received the
    request (connection refused, unresolvable name), so a retry cannot
    duplicate work.
    """

    default_code = "ROUTER_UNAVAILABLE"

    def __init__(self, message: str = "", *, not_delivered: bool = False, **kw) -> None:
        super().__init__(message, **kw)
        self.not_delivered = not_delivered


class DeadlineExceededError(RouterUnavailableError):
    """No answer within the call's timeout."""

    default_code = "DEADLINE_EXCEEDED"


class ProtocolError(AgentdError):
    """The router answered something the SDK cannot decode."""

    default_code = "PROTOCOL_ERROR"


class BadRequestError(AgentdError):
    """The request was malformed (400)."""

    default_code = "BAD_REQUEST"


class AuthError(AgentdError):
    """Missing, expired or forged token (401)."""

    default_code = "UNAUTHENTICATED"


class ForbiddenError(AgentdError):
    """Authenticated, but policy or scope denies it (403)."""

    default_code = "FORBIDDEN"


class NoRouteError(AgentdError):
    """No eligible route for the capability (the message says why)."""

    default_code = "NO_ROUTE"


class NotFoundError(AgentdError):
    """An unknown task, route or endpoint (404 without a route meaning)."""

    default_code = "NOT_FOUND"


class ConflictError(AgentdError):
    """A conflicting registration or a refused stream resume (409)."""

    default_code = "CONFLICT"


class PayloadTooLargeError(AgentdError):
    """The request body exceeds the router's limit (413)."""

    default_code = "PAYLOAD_TOO_LARGE"


class RateLimitedError(AgentdError):
    """Tenant rate or concurrency limit hit (429); retry later."""

    default_code = "RATE_LIMITED"


class HandlerError(AgentdError):
    """The remote handler failed, or — raised inside a handler — a typed
    failure to report to the caller::

        raise HandlerError("unknown city", code="BAD_CITY", status=422)
    """

    default_code = "HANDLER_FAILED"

    def __init__(self, message: str = "", *, code: Optional[str] = None, status: int = 500) -> None:
        super().__init__(message, code=code, status=status)


class DeliveryError(AgentdError):
    """The router could not deliver the call or lost it (typed outcome:
    ``rejected``, ``not_delivered``, ``unknown`` or ``error``)."""

    default_code = "NOT_DELIVERED"


class UnavailableError(AgentdError):
    """The router or the agent is overloaded or shutting down (503)."""

    default_code = "UNAVAILABLE"


class StreamError(AgentdError):
    """A stream broke and could not be resumed, or reported an error event."""

    default_code = "STREAM_LOST"


class TaskFailedError(AgentdError):
    """An async task ended in failure."""

    default_code = "TASK_FAILED"


class TaskCancelledError(TaskFailedError):
    """An async task was cancelled."""

    default_code = "TASK_CANCELLED"


# Router codes with a dedicated class (docs/sdk-api.md); the rest map by status.
_BY_CODE: Dict[str, Type[AgentdError]] = {
    "NO_ROUTE": NoRouteError,
    "NO_ELIGIBLE_ROUTE": NoRouteError,
    "INTENT_NOT_SERVED": NoRouteError,
    "UNAUTHENTICATED": AuthError,
    "AUTHENTICATION_REQUIRED": AuthError,
    "INVALID_TOKEN": AuthError,
    "TOKEN_EXPIRED": AuthError,
    "FORBIDDEN": ForbiddenError,
    "DENIED": ForbiddenError,
    "POLICY_DENIED": ForbiddenError,
    "INSUFFICIENT_SCOPE": ForbiddenError,
    "RATE_LIMITED": RateLimitedError,
    "CONCURRENCY_LIMITED": RateLimitedError,
    "PAYLOAD_TOO_LARGE": PayloadTooLargeError,
    "REQUEST_TOO_LARGE": PayloadTooLargeError,
    "HANDLER_FAILED": HandlerError,
    "NOT_DELIVERED": DeliveryError,
    "REJECTED": DeliveryError,
    "UNKNOWN": DeliveryError,
    "DEADLINE_EXCEEDED": DeadlineExceededError,
    "TIMEOUT": DeadlineExceededError,
    "TASK_NOT_FOUND": NotFoundError,
    "NOT_FOUND": NotFoundError,
    "CONFLICT": ConflictError,
    "TASKS_FULL": UnavailableError,
    "OVERLOADED": UnavailableError,
}

_BY_STATUS: Dict[int, Type[AgentdError]] = {
    400: BadRequestError,
    401: AuthError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
    502: DeliveryError,
    503: UnavailableError,
    504: DeadlineExceededError,
}


def error_for(status: int, code: str, message: str) -> AgentdError:
    """The exception for a router answer with ``status`` and ``code``."""

    cls = _BY_CODE.get(code.upper()) if code else None
    if cls is None:
        cls = _BY_STATUS.get(status)
    if cls is None:
        cls = HandlerError if status >= 500 else AgentdError
    if not code or code.startswith("HTTP_"):
        code = cls.default_code
    return cls(message, code=code, status=status)


def from_native(exc: BaseException) -> AgentdError:
    """Maps ``_native.CallError(kind, status, code, message, not_delivered)``."""

    try:
        kind, status, code, message, not_delivered = exc.args
    except ValueError:
        return AgentdError(str(exc))
    if kind == "timeout":
        return DeadlineExceededError(message, not_delivered=bool(not_delivered))
    if kind == "transport":
        return RouterUnavailableError(message, not_delivered=bool(not_delivered))
    if kind == "decode":
        return ProtocolError(message)
    return error_for(int(status), str(code), str(message))


__all__ = [
    "AgentdError",
    "AuthError",
    "BadRequestError",
    "ConflictError",
    "DeadlineExceededError",
    "DeliveryError",
    "ForbiddenError",
    "HandlerError",
    "NoRouteError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RateLimitedError",
    "RouterUnavailableError",
    "StreamError",
    "TaskCancelledError",
    "TaskFailedError",
    "UnavailableError",
    "error_for",
    "from_native",
]
