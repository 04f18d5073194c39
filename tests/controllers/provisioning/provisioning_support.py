"""In-process stand-ins for the provisioner's API writes.

:class:`RecordingClient` accepts ``create`` (naming objects from ``generateName`` as the
API server does) and records what was created; :class:`RecordingRecorder` records
Events instead of writing them. Nothing else of the API is emulated: the cluster model
is fed directly with the test's objects.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from karpy.cloudprovider import UnavailableOfferings
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.inputs import SchedulingInputs
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Kind, errors
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClock, FakeEventRecorder, RecordedEvent
from karpy.state import Cluster


class RecordingClient:
    """``create`` only: names from generateName, a uid, a resourceVersion."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.fail_next: Exception | None = None
        self._names = itertools.count(1)

    async def create(self, kind: Kind, obj: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        out = copy.deepcopy(dict(obj))
        meta = out["metadata"]
        if not meta.get("name"):
            meta["name"] = f"{meta['generateName']}{next(self._names):05d}"
        if any(c["metadata"]["name"] == meta["name"] for c in self.created):
            raise errors.AlreadyExists(f"{meta['name']} exists", status=409)
        meta["uid"] = f"uid-{meta['name']}"
        meta["resourceVersion"] = "1"
        out.setdefault("status", {})
        self.created.append(out)
        return out


class RecordingRecorder(FakeEventRecorder):
    """The runtime's recording recorder; this suite asks it for the events *with* a
    reason (``reasons("FailedScheduling")``), so ``reasons`` reads as ``with_reason``."""

    def reasons(self, reason: str | None = None) -> list[RecordedEvent]:  # type: ignore[override]
        return self.with_reason(reason or "")


@dataclass
class Harness:
    provisioner: Provisioner
    cluster: Cluster
    client: RecordingClient
    recorder: RecordingRecorder
    provider: FakeCloudProvider
    clock: FakeClock
    metrics: Metrics
    unavailable: UnavailableOfferings

    def metric(self, name: str, **labels: str) -> float:
        """The value of a counter sample (0 if absent)."""
        for family in self.metrics.registry.collect():
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return 0.0


def build(settings: Settings | None = None) -> Harness:
    clock = FakeClock()
    cluster = Cluster(clock=clock)
    client = RecordingClient()
    recorder = RecordingRecorder()
    provider = FakeCloudProvider()
    metrics = Metrics()
    unavailable = UnavailableOfferings(clock=clock)
    inputs = SchedulingInputs(
        cluster=cluster,
        cloud_provider=provider,
        unavailable_offerings=unavailable,
        recorder=recorder,
        clock=clock,
        settings=settings or Settings(),
        metrics=KarpenterMetrics(metrics.meter("karpenter")),
    )
    provisioner = Provisioner(client=cast(Client, client), inputs=inputs, clock=clock)
    return Harness(provisioner, cluster, client, recorder, provider, clock, metrics, unavailable)
