"""Log values formatted the way Karpenter's logs show them.

Karpenter's zap logger shortens long lists to "a, b, c, d, e and N other(s)"; users grep
for that shape. Durations are written with :func:`karpy.apis.duration.format_go_duration`
(Go's ``time.Duration.String``).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["truncated_list"]


def truncated_list(items: Sequence[str], max_items: int = 5) -> str:
    """The first ``max_items`` joined by ", ", then " and N other(s)" for the rest."""
    shown = ", ".join(items[:max_items])
    rest = len(items) - max_items
    return f"{shown} and {rest} other(s)" if rest > 0 else shown
