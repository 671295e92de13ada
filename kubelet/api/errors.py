"""One exception tree for every way an API server call can fail.

Callers decide from the class alone, as upstream code does with ``apierrors.IsNotFound``
and friends: ``NotFound`` on delete is success, ``Conflict`` means re-read and retry,
``Gone`` means relist, ``ApiUnavailable`` says nothing about the object (retry later).
The reason in the Status body wins over the HTTP code, as in apimachinery; the code
decides only when the reason is missing or unknown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "ApiUnavailable",
    "BadRequest",
    "Conflict",
    "Expired",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvalidResponse",
    "MethodNotAllowed",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "error_from_response",
    "error_from_status",
]


class ApiError(Exception):
    """An API call failed. ``code`` is the HTTP status (0 when no answer came back),
    ``reason`` the Status reason (``NotFound``, ``Conflict``...), ``details`` the Status
    details (name, kind, causes, retryAfterSeconds) when the server sent them."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(code, reason, message, details)  # args as given: copy/pickle work
        self.message = message
        self.code = code
        self.reason = reason
        self.details: Mapping[str, Any] = details or {}

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, reason={self.reason!r}, {self.message!r})"


class ApiUnavailable(ApiError):
    """No answer: connection refused or reset, TLS failure, timeout. Nothing is known
    about the object; the kubelet keeps its pods and retries."""


class InvalidResponse(ApiError):
    """The server answered, but not with what the API promises (no JSON, no Status)."""


class BadRequest(ApiError):
    """400: the request was malformed (a bug on our side, or an unknown field)."""


class Unauthorized(ApiError):
    """401: our credentials were not accepted (expired token, rotated certificate)."""


class Forbidden(ApiError):
    """403: authenticated, but RBAC / the node authorizer said no."""


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class MethodNotAllowed(ApiError):
    """405: the verb is not supported on that path."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: create of a name that is taken. Not a ``Conflict``, as in
    apimachinery, where IsConflict is false for this reason."""


class Conflict(ApiError):
    """409: the resourceVersion or a precondition (uid) did not match; re-read and retry."""


class Gone(ApiError):
    """410: the resourceVersion asked for is too old (compacted); a watcher must relist."""


class Expired(Gone):
    """410 with reason Expired: the resourceVersion or continue token expired."""


class Invalid(ApiError):
    """422: the object failed validation; ``details["causes"]`` lists the fields."""


class TooManyRequests(ApiError):
    """429: server-side throttling (API priority and fairness). ``retry_after`` is the
    server's wait in seconds, when it gave one."""

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait (Status details, else None)."""
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, int | float) and value >= 0 else None


class ServerError(ApiError):
    """5xx: the server failed (InternalError, ServiceUnavailable, Timeout...)."""


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "MethodNotAllowed": MethodNotAllowed,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Gone,
    "Expired": Expired,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "InternalError": ServerError,
    "ServiceUnavailable": ServerError,
    "Timeout": ServerError,
    "ServerTimeout": ServerError,
}

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}

_DEFAULT_MESSAGES = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    403: "the server does not allow access to the requested resource",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    410: "the server reported the requested resource version is gone",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    500: "an error on the server has prevented the request from succeeding",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}


def _class_for(code: int, reason: str) -> type[ApiError]:
    cls = _BY_REASON.get(reason)
    if cls is not None:
        return cls
    if code >= 500:
        return ServerError
    return _BY_CODE.get(code, ApiError)


def error_from_status(status: Mapping[str, Any], code: int = 0) -> ApiError:
    """The exception for a Status object (an error body, or a watch ERROR event's object).

    ``code`` is the HTTP status, used when the Status carries none.
    """
    raw_code = status.get("code")
    if isinstance(raw_code, int) and not isinstance(raw_code, bool) and raw_code:
        code = raw_code
    reason = status.get("reason")
    reason = reason if isinstance(reason, str) else ""
    message = status.get("message")
    if not isinstance(message, str) or not message:
        message = _DEFAULT_MESSAGES.get(code, f"the server responded with status {code}")
    details = status.get("details")
    return _class_for(code, reason)(
        code, reason, message, details if isinstance(details, Mapping) else None
    )


def error_from_response(code: int, body: bytes, retry_after: float | None = None) -> ApiError:
    """The exception for a non-2xx HTTP answer: a Status body if there is one, else the
    body text (a proxy's error page), trimmed. ``retry_after`` (from the header) fills
    ``details["retryAfterSeconds"]`` when the Status did not."""
    status: Mapping[str, Any] | None = None
    try:
        decoded = json.loads(body) if body else None
    except ValueError:
        decoded = None
    if isinstance(decoded, Mapping) and decoded.get("kind") == "Status":
        status = decoded
    if status is None:
        text = body.decode("utf-8", "replace").strip()
        status = {"message": text[:512]} if text else {}
    err = error_from_status(status, code)
    if retry_after is not None and "retryAfterSeconds" not in err.details:
        err.details = {**err.details, "retryAfterSeconds": retry_after}
    return err
