"""Events the controllers would have recorded, kept in memory instead of written.

The provisioner and disruption explain their decisions through Events
(FailedScheduling, Nominated, DisruptionBlocked, Unconsolidatable, ...). A tool runs
their deciding code with a :class:`CapturingRecorder`, so it can show the same reasons
without writing a single Event. It is the runtime's recording recorder
(:class:`karpy.runtime.testing.FakeEventRecorder`) under the name the tools use.
"""

from __future__ import annotations

from karpy.runtime.testing import FakeEventRecorder, RecordedEvent

__all__ = ["CapturedEvent", "CapturingRecorder"]

CapturingRecorder = FakeEventRecorder
CapturedEvent = RecordedEvent
