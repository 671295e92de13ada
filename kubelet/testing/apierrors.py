"""API errors as the API server writes them: an HTTP code and a ``Status`` body.

Clients decide what to do from ``reason`` and ``code`` (retry on 409 Conflict after a
re-read, relist on 410 Expired, back off on 429 with ``Retry-After``), so the fake must
get them exactly right; the messages follow upstream's wording where a client or a
person might read them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["REASONS", "StatusError", "status_body"]

# The reason upstream's apimachinery/pkg/api/errors attaches to each code by default.
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Status`` object, the body of every error response and 410 watch event."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = details
    body["code"] = code
    return body


class StatusError(Exception):
    """Raised anywhere in the fake; the server turns it into the response."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "Unknown")
        self.details = dict(details or {})
        self.retry_after = retry_after
        if retry_after is not None:
            self.details.setdefault("retryAfterSeconds", retry_after)

    def body(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)

    # -- the ones the store and the handlers raise ------------------------------------

    @classmethod
    def not_found(cls, plural: str, name: str, group: str = "") -> StatusError:
        what = f"{plural}.{group}" if group else plural
        details: dict[str, Any] = {"name": name, "kind": plural}
        if group:
            details["group"] = group
        return cls(404, f'{what} "{name}" not found', details=details)

    @classmethod
    def already_exists(cls, plural: str, name: str, group: str = "") -> StatusError:
        what = f"{plural}.{group}" if group else plural
        details: dict[str, Any] = {"name": name, "kind": plural}
        if group:
            details["group"] = group
        return cls(409, f'{what} "{name}" already exists', reason="AlreadyExists", details=details)

    @classmethod
    def conflict(cls, plural: str, name: str, why: str, group: str = "") -> StatusError:
        what = f"{plural}.{group}" if group else plural
        details: dict[str, Any] = {"name": name, "kind": plural}
        if group:
            details["group"] = group
        return cls(409, f'Operation cannot be fulfilled on {what} "{name}": {why}', details=details)

    @classmethod
    def stale(cls, plural: str, name: str, group: str = "") -> StatusError:
        return cls.conflict(
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
            group,
        )

    @classmethod
    def invalid(cls, kind: str, name: str, field: str, detail: str, group: str = "") -> StatusError:
        cause = {"reason": "FieldValueRequired", "message": detail, "field": field}
        details: dict[str, Any] = {"name": name, "kind": kind, "causes": [cause]}
        if group:
            details["group"] = group
        return cls(422, f'{kind} "{name}" is invalid: {field}: {detail}', details=details)

    @classmethod
    def bad_request(cls, message: str) -> StatusError:
        return cls(400, message)

    @classmethod
    def expired(cls, message: str) -> StatusError:
        return cls(410, message, reason="Expired")

    @classmethod
    def method_not_allowed(cls, method: str, what: str) -> StatusError:
        return cls(
            405,
            f"the server does not allow this method on the requested resource ({method} {what})",
        )
