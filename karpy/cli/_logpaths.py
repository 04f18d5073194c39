"""Where ``karpy run`` writes its logs: Karpenter's ``LOG_OUTPUT_PATHS`` and
``LOG_ERROR_OUTPUT_PATHS`` (flags ``--log-output-paths`` / ``--log-error-output-paths``).

Both are comma-separated lists of ``stdout``, ``stderr`` or file paths (a file is
appended to, created if missing), as zap's ``OutputPaths`` / ``ErrorOutputPaths`` that
Karpenter configures from them. Every log line goes to each output path; the error
paths receive what zap sends to its error output: the logger's own failures (a record
that could not be formatted or written), not error-level records.

Unset, karpy keeps what it always did — JSON lines to stderr, with logging's own
failures on stderr too — although Karpenter's default output is stdout: the e2e
harnesses and ``kubectl logs`` read stderr, and in a pod both streams reach the
container log alike.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["DEFAULT_PATHS", "LogPathError", "PathsHandler", "open_paths"]

#: karpy's output and error output when the variables are unset
DEFAULT_PATHS: tuple[str, ...] = ("stderr",)


class LogPathError(ValueError):
    """A log path could not be opened; the message names the variable and the path."""


def open_paths(paths: Sequence[str], *, env: str) -> list[TextIO]:
    """The streams of ``paths`` (``stdout``, ``stderr`` or files, opened for appending).
    Raises LogPathError naming ``env`` and the path when a file cannot be opened."""
    streams: list[TextIO] = []
    for path in paths:
        if path == "stdout":
            streams.append(sys.stdout)
        elif path == "stderr":
            streams.append(sys.stderr)
        else:
            try:
                # line-buffered: a crash loses no finished line
                streams.append(Path(path).open("a", encoding="utf-8", buffering=1))  # noqa: SIM115
            except OSError as exc:
                raise LogPathError(
                    f"{env}: cannot open log path {path!r} for appending ({exc.strerror}); "
                    "use stdout, stderr or a writable file path"
                ) from None
    return streams


class PathsHandler(logging.Handler):
    """Writes each formatted record to every output stream; the handler's own failures
    go to the error streams (zap's ErrorOutputPaths)."""

    def __init__(self, outputs: Sequence[TextIO], errors: Sequence[TextIO]) -> None:
        super().__init__()
        self._outputs = list(outputs)
        self._errors = list(errors)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
            for stream in self._outputs:
                stream.write(line)
                stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        """Report a failed record on the error streams, as logging does on stderr."""
        if not logging.raiseExceptions:
            return
        text = "--- Logging error ---\n" + traceback.format_exc() + (f"Message: {record.msg!r}\n")
        for stream in self._errors:
            try:
                stream.write(text)
                stream.flush()
            except Exception:  # nowhere left to report it
                continue
