"""The ``capacitybuffer`` controller against an in-memory API server: it resolves the
chunk from a PodTemplate or a workload, writes Karpenter's status (ReadyForProvisioning,
replicas, Provisioning) and keeps the virtual pods in step."""

from __future__ import annotations

import asyncio
from typing import Any

from karpy.controllers.capacitybuffer import (
    CAPACITY_BUFFER,
    POD_TEMPLATE,
    CapacityBufferController,
    VirtualPods,
)
from karpy.runtime import Request, kinds
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.scheduling import ExistingNodePlan, Results

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": {"cpu": "500m"}}}]}}  # fmt: skip


def buffer(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"provisioningStrategy": "buffer.x-k8s.io/active-capacity", **spec}}


class Rig:
    def __init__(self) -> None:
        self.client = FakeClient()
        self.virtual = VirtualPods()
        self.triggered: list[object] = []
        self.controller = CapacityBufferController(
            client=self.client, virtual_pods=self.virtual, trigger=self.triggered.append,
            clock=FakeClock(),
        )

    def reconcile(self, name: str) -> dict[str, Any]:
        asyncio.run(self.controller.reconcile(Request("team", name)))
        stored = self.client.peek(CAPACITY_BUFFER, name, "team")
        assert stored is not None
        return stored

    @staticmethod
    def condition(stored: dict[str, Any], type_: str) -> dict[str, Any]:
        [cond] = [c for c in stored["status"]["conditions"] if c["type"] == type_]
        return cond


def test_a_pod_template_buffer_resolves_and_gets_its_virtual_pods() -> None:
    rig = Rig()
    rig.client.add(POD_TEMPLATE, {"metadata": {"name": "chunk", "namespace": "team"},
                                  "template": TEMPLATE})  # fmt: skip
    rig.client.add(CAPACITY_BUFFER, buffer("headroom", podTemplateRef={"name": "chunk"},
                                           replicas=2))  # fmt: skip
    stored = rig.reconcile("headroom")
    ready = rig.condition(stored, "ReadyForProvisioning")
    assert (ready["status"], ready["reason"]) == ("True", "Resolved")
    assert stored["status"]["replicas"] == 2
    assert stored["status"]["podTemplateRef"] == {"name": "chunk"}
    assert stored["status"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    assert [p.key for p in rig.virtual.pods()] == ["team/capacity-buffer-headroom-1",
                                                   "team/capacity-buffer-headroom-2"]  # fmt: skip
    assert rig.triggered
    # The provisioner put both on existing capacity: Provisioning=True.
    placed = ExistingNodePlan("n1", tuple(rig.virtual.pods()))
    rig.virtual.observe(Results(existing_nodes=(placed,)))
    provisioning = rig.condition(rig.reconcile("headroom"), "Provisioning")
    assert (provisioning["status"], provisioning["reason"]) == ("True", "FitsExistingCapacity")
    # The template goes: not ready, and no virtual pods any more.
    rig.client.remove(POD_TEMPLATE, "chunk", "team")
    stored = rig.reconcile("headroom")
    ready = rig.condition(stored, "ReadyForProvisioning")
    assert (ready["status"], ready["reason"]) == ("False", "PodTemplateNotFound")
    assert rig.condition(stored, "Provisioning")["reason"] == "NotReadyForProvisioning"
    assert rig.virtual.pods() == []


def test_a_scalable_ref_buffer_counts_a_percentage_of_the_workload() -> None:
    rig = Rig()
    rig.client.add(kinds.DEPLOYMENT, {"metadata": {"name": "web", "namespace": "team"},
                                      "spec": {"replicas": 10, "template": TEMPLATE}})
    rig.client.add(CAPACITY_BUFFER, buffer(
        "pct", scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"},
        percentage=25))  # fmt: skip
    stored = rig.reconcile("pct")
    assert stored["status"]["replicas"] == 3
    assert "podTemplateRef" not in stored["status"] or stored["status"]["podTemplateRef"] is None
    assert len(rig.virtual.pods()) == 3


def test_what_karpy_cannot_resolve_is_reported_not_ignored() -> None:
    rig = Rig()
    rig.client.add(CAPACITY_BUFFER, buffer(
        "job", scalableRef={"apiGroup": "batch", "kind": "Job", "name": "x"}, replicas=1))
    rig.client.add(CAPACITY_BUFFER, buffer(
        "passive", scalableRef={"kind": "Deployment", "name": "web"},
        provisioningStrategy="buffer.x-k8s.io/passive"))  # fmt: skip
    rig.client.add(CAPACITY_BUFFER, buffer("gone", scalableRef={"kind": "Deployment",
                                                                "name": "nope"}))
    job = rig.condition(rig.reconcile("job"), "ReadyForProvisioning")
    assert (job["status"], job["reason"]) == ("False", "ResolutionFailed")
    assert "'batch'" in job["message"]
    passive = rig.condition(rig.reconcile("passive"), "ReadyForProvisioning")
    assert passive["reason"] == "ResolutionFailed" and "provisioningStrategy" in passive["message"]
    gone = rig.condition(rig.reconcile("gone"), "ReadyForProvisioning")
    assert gone["reason"] == "ScalableRefNotFound"
    assert rig.virtual.pods() == []
