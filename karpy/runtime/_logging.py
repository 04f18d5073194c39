"""Structured JSON logs in Karpenter's shape, with per-reconcile context.

One JSON object per line with ``level``, ``time``, ``logger`` and ``message`` first (as
Karpenter's zap encoder writes them), then the context fields of the reconcile that
logged it — ``controller``, ``namespace``, ``name``, ``reconcileID`` — then any
``extra={...}`` fields of the call, then ``error``/``stacktrace`` for exceptions::

    {"level":"INFO","time":"2024-05-07T20:51:37.522Z","logger":"controller",
     "message":"created nodeclaim","controller":"provisioner","namespace":"",
     "name":"","reconcileID":"5b0d...","NodeClaim":{"name":"default-x2b7k"}}

The context lives in a ContextVar, so it follows the reconcile through every ``await``
and into tasks it spawns, and never leaks between concurrent reconciles.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TextIO

__all__ = ["JsonFormatter", "configure_logging", "log_context", "logging_context"]

log_context: ContextVar[Mapping[str, Any]] = ContextVar(
    "karpy_log_context", default=MappingProxyType({})
)
"""Fields added to every log record emitted in the current context."""

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


@contextlib.contextmanager
def logging_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every log line emitted inside the ``with`` block."""
    token = log_context.set({**log_context.get(), **fields})
    try:
        yield
    finally:
        log_context.reset(token)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


class JsonFormatter(logging.Formatter):
    """Formats records as one-line JSON objects (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {
            "level": record.levelname,
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(log_context.get())
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out["error"] = str(exc) or type(exc).__name__
            out["stacktrace"] = "".join(traceback.format_exception(exc)).rstrip()
        elif record.stack_info:
            out["stacktrace"] = record.stack_info
        return json.dumps(out, default=_default, separators=(",", ":"))


def configure_logging(
    level: int | str = "INFO",
    *,
    stream: TextIO | None = None,
    loggers: Iterable[str] = (),
    others: int | str = "WARNING",
) -> None:
    """Send log records to ``stream`` (stderr) as JSON lines.

    Without ``loggers`` every logger logs at ``level`` or above. With ``loggers`` (your
    program's top-level logger names, e.g. ``["karpy", "karpy_aws"]``) only those, and
    their children, log at ``level``; every other logger — libraries, cloud SDKs — logs
    at ``others`` (WARNING). That keeps a debug run from logging what SDKs log at debug:
    botocore writes every request's parameters (user data, the access key id).

    Replaces the root logger's handlers; call once at program start.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    names = list(loggers)
    root.setLevel(others if names else level)
    for name in names:
        logging.getLogger(name).setLevel(level)
