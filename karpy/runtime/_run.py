"""Running the event loop: uvloop when it is installed, asyncio's own loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``main`` to completion on a fresh event loop and return its result.

    Uses uvloop (faster I/O and timers) when importable — ``pip install karpy[speed]`` —
    and the standard asyncio loop otherwise.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main, debug=debug)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop, debug=debug) as runner:
        return runner.run(main)
