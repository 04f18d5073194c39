"""The NodeOverlays in force: what the nodeoverlay controller last judged applicable.

The controller replaces the whole set at once (:meth:`OverlayStore.update`) after
judging every overlay against every NodePool's catalogue, so a reader never sees half an
evaluation; ``seq`` increases on every change so the instance-type cache rebuilds its
overlaid copies only then. With the ``NodeOverlay`` gate off nothing updates it and it
stays empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.scheduling.overlay import Overlay

__all__ = ["OverlayStore"]


class OverlayStore:
    """The applicable overlays, in precedence order (see the module docstring)."""

    def __init__(self) -> None:
        self.applied: tuple[Overlay, ...] = ()
        self.seq = 0

    def update(self, applied: Sequence[Overlay]) -> bool:
        """Put ``applied`` in force; returns whether that changed anything."""
        new = tuple(applied)
        if new == self.applied:
            return False
        self.applied = new
        self.seq += 1
        return True
