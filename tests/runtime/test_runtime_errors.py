"""API errors are typed by status, with the server's reason and message."""

from __future__ import annotations

import json

import pytest

from karpy.runtime import errors


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {"kind": "Status", "code": code, "reason": reason, "message": message}
    ).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (400, "BadRequest", errors.BadRequest),
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (405, "MethodNotAllowed", errors.MethodNotAllowed),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (500, "InternalError", errors.ServerError),
        (503, "ServiceUnavailable", errors.ServiceUnavailable),
        (504, "Timeout", errors.ServerError),
        (418, "Teapot", errors.ApiError),
    ],
)
def test_status_maps_to_its_class(code: int, reason: str, cls: type[errors.ApiError]) -> None:
    err = errors.api_error_from_response(code, _status(code, reason, "the message"))
    assert type(err) is cls
    assert err.status == code and err.reason == reason and err.message == "the message"
    assert str(err) == f"{code} {reason}: the message"


def test_retry_after_and_non_json_bodies() -> None:
    err = errors.api_error_from_response(429, b"slow down", {"Retry-After": "3"})
    assert isinstance(err, errors.TooManyRequests) and err.retry_after == 3.0
    assert err.message == "slow down"
    assert errors.api_error_from_response(502, None).message == "HTTP 502"


def test_temporary_error_carries_its_delay() -> None:
    err = errors.TemporaryError("not yet", delay=2.5)
    assert err.delay == 2.5 and isinstance(err, errors.ReconcileError)
