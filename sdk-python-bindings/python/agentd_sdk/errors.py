"""Exception hierarchy of the agentd SDK.

Every error the router reports arrives as ``{"error": {"code", "message"}}``
with a stable ``code``; the SDK raises the subclass for that code (or, for
codes it does not know, for the HTTP status), so callers can catch
``NoRouteError`` or ``RateLimitedError`` without parsing strings. Every
exception carries ``code``, ``message`` and ``status`` (0 when no HTTP
answer was involved).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class AgentdError(Exception):
    """Base class of every SDK error."""

    default_code = "agentd_error"

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[str] = None,
        status: int = 0,
        outcome: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> None:
        self.code = code or self.default_code
        self.message = message
        self.status = status
        #: What happened to the call (gateway errors): ``rejected``,
        #: ``not_delivered``, ``unknown`` or ``error``.
        self.outcome = outcome
        #: Why nothing was eligible, for ``no_route`` (e.g. ``tenant_access``).
        self.reason = reason
        super().__init__(f"{self.code}: {message}" if message else self.code)


class RouterUnavailableError(AgentdError):
    """The router could not be reached or broke the connection.

    ``not_delivered`` is True when the router provably never received the
    request (connection refused, unresolvable name), so a retry cannot
    duplicate work.
    """

    default_code = "router_unavailable"

    def __init__(self, message: str = "", *, not_delivered: bool = False, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.not_delivered = not_delivered


class DeadlineExceededError(RouterUnavailableError):
    """No answer within the call's timeout."""

    default_code = "deadline_exceeded"


class ProtocolError(AgentdError):
    """The router answered something the SDK cannot decode."""

    default_code = "protocol_error"


class BadRequestError(AgentdError):
    """The request was malformed (400)."""

    default_code = "bad_request"


class AuthError(AgentdError):
    """Missing, expired or forged token (401)."""

    default_code = "unauthenticated"


class ForbiddenError(AgentdError):
    """Authenticated, but policy or scope denies it (403)."""

    default_code = "forbidden"


class NoRouteError(AgentdError):
    """No eligible route for the capability (the message says why)."""

    default_code = "no_route"


class NotFoundError(AgentdError):
    """An unknown task, route or endpoint (404 without a route meaning)."""

    default_code = "not_found"


class ConflictError(AgentdError):
    """A conflicting registration or a refused stream resume (409)."""

    default_code = "conflict"


class PayloadTooLargeError(AgentdError):
    """The request body exceeds the router's limit (413)."""

    default_code = "payload_too_large"


class RateLimitedError(AgentdError):
    """Tenant rate or concurrency limit hit (429); retry later."""

    default_code = "rate_limited"


class HandlerError(AgentdError):
    """The remote handler failed, or — raised inside a handler — a typed
    failure to report to the caller::

        raise HandlerError("unknown city", code="BAD_CITY", status=422)
    """

    default_code = "handler_failed"

    def __init__(self, message: str = "", *, code: Optional[str] = None, status: int = 500, **kw: Any) -> None:
        super().__init__(message, code=code, status=status, **kw)


class DeliveryError(AgentdError):
    """The router could not deliver the call or lost it (typed outcome:
    ``rejected``, ``not_delivered``, ``unknown`` or ``error``)."""

    default_code = "not_delivered"


class UnavailableError(AgentdError):
    """The router or the agent is overloaded or shutting down (503)."""

    default_code = "unavailable"


class StreamError(AgentdError):
    """A stream broke and could not be resumed, or reported an error event."""

    default_code = "stream_lost"


class TaskFailedError(AgentdError):
    """An async task ended in failure."""

    default_code = "task_failed"


class TaskCancelledError(TaskFailedError):
    """An async task was cancelled."""

    default_code = "task_cancelled"


class TaskResultReleasedError(AgentdError):
    """The task's outcome was already collected from the router (by another
    ``Task`` handle for the same id, or another client holding its token),
    which released it: the router no longer has the result (410
    ``result_released``). The handle that fetched it keeps it."""

    default_code = "result_released"


# Codes with a dedicated class (docs/sdk-api.md, plus the agent endpoint's
# own codes); anything else maps by HTTP status. Matching is case-blind so
# Nexus-style upper-case codes map too.
_BY_CODE: Dict[str, Type[AgentdError]] = {
    "no_route": NoRouteError,
    "intent_not_served": NoRouteError,
    "authentication_required": AuthError,
    "unauthenticated": AuthError,
    "token_malformed": AuthError,
    "token_bad_algorithm": AuthError,
    "token_unknown_key": AuthError,
    "token_bad_signature": AuthError,
    "token_expired": AuthError,
    "token_not_yet_valid": AuthError,
    "token_lifetime_too_long": AuthError,
    "token_wrong_audience": AuthError,
    "token_tenant_mismatch": AuthError,
    "token_source_mismatch": AuthError,
    "insufficient_scope": ForbiddenError,
    "forbidden": ForbiddenError,
    "origin_mismatch": ForbiddenError,
    "policy_denied": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "stream_changed": StreamError,
    "history_lost": StreamError,
    "task_expired": StreamError,
    "task_not_finished": ConflictError,
    "result_released": TaskResultReleasedError,
    "invalid_json": BadRequestError,
    "duplicate_key": BadRequestError,
    "invalid_field": BadRequestError,
    "invalid_cursor": BadRequestError,
    "payload_too_large": PayloadTooLargeError,
    "rate_limited": RateLimitedError,
    "not_delivered": DeliveryError,
    "upstream_unknown": DeliveryError,
    "upstream_error": DeliveryError,
    "overloaded": UnavailableError,
    "control_plane_unavailable": UnavailableError,
    "route_table_full": UnavailableError,
    "task_table_full": UnavailableError,
    "deadline_exceeded": DeadlineExceededError,
    "handler_failed": HandlerError,
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


def error_for(
    status: int, code: str, message: str, outcome: Optional[str] = None, reason: Optional[str] = None
) -> AgentdError:
    """The exception for a router answer with ``status`` and ``code``."""

    cls = _BY_CODE.get(code.lower()) if code else None
    if cls is None:
        cls = _BY_STATUS.get(status)
    if cls is None:
        cls = HandlerError if status >= 500 else AgentdError
    if not code or code.startswith("HTTP_"):
        code = cls.default_code
    return cls(message, code=code, status=status, outcome=outcome, reason=reason)


def from_native(exc: BaseException) -> AgentdError:
    """Maps ``_native.CallError(kind, status, code, message, not_delivered,
    outcome, reason)``."""

    try:
        kind, status, code, message, not_delivered, outcome, reason = exc.args
    except ValueError:
        return AgentdError(str(exc))
    if kind == "timeout":
        return DeadlineExceededError(message, not_delivered=bool(not_delivered))
    if kind == "transport":
        return RouterUnavailableError(message, not_delivered=bool(not_delivered))
    if kind == "decode":
        return ProtocolError(message)
    return error_for(int(status), str(code), str(message), outcome, reason)


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
    "TaskResultReleasedError",
    "UnavailableError",
    "error_for",
    "from_native",
]
