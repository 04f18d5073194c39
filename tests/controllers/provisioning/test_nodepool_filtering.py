"""A NodePool whose own requirements leave no instance type gets Karpenter's
NoCompatibleInstanceTypes Warning (once a minute) and is skipped; the scheduler's
ignored/unschedulable pod gauges count what a round left behind."""

from __future__ import annotations

from provisioning_support import Harness, build

from karpy.controllers.settings import Settings
from karpy.scheduling.simulator import SchedulerOptions
from karpy.state.testing import nodepool, pod

NO_TYPE = {"key": "node.kubernetes.io/instance-type", "operator": "In",
           "values": ["no-such-type"]}
TOO_FEW = {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 50}


async def test_a_nodepool_filtering_out_every_instance_type_gets_the_warning() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("empty", requirements=[NO_TYPE]))
    h.cluster.update_pod(pod("web-1", cpu="1", memory="256Mi"))
    assert await h.provisioner.provision() == 0
    assert h.client.created == []
    [event] = h.recorder.reasons("NoCompatibleInstanceTypes")
    assert (event.name, event.type, event.message) == (
        "empty", "Warning",
        "NodePool requirements filtered out all compatible available instance types")
    # Karpenter still runs its scheduler without templates: the pod is unschedulable
    assert h.metric("karpenter_scheduler_unschedulable_pods_count",
                    controller="provisioner") == 1.0
    [failed] = h.recorder.reasons("FailedScheduling")
    assert failed.message.endswith(
        "nodepool requirements filtered out all available instance types")
    await h.provisioner.provision()
    assert len(h.recorder.reasons("NoCompatibleInstanceTypes")) == 1  # deduplicated 1 min
    await h.clock.step(61)
    await h.provisioner.provision()
    assert len(h.recorder.reasons("NoCompatibleInstanceTypes")) == 2


async def test_min_values_filtering_says_so_unless_best_effort() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("picky", requirements=[TOO_FEW]))
    h.cluster.update_pod(pod("web-1", cpu="1", memory="256Mi"))
    await h.provisioner.provision()
    [event] = h.recorder.reasons("NoCompatibleInstanceTypes")
    assert event.message == ("NodePool requirements filtered out all compatible available "
                             "instance types due to minValues incompatibility")

    relaxed = build(Settings())
    relaxed.provisioner.inputs.options = SchedulerOptions(min_values_policy="BestEffort")
    relaxed.cluster.update_nodepool(nodepool("picky", requirements=[TOO_FEW]))
    relaxed.cluster.update_pod(pod("web-1", cpu="1", memory="256Mi"))
    await relaxed.provisioner.provision()
    assert relaxed.recorder.reasons("NoCompatibleInstanceTypes") == []


async def test_unschedulable_pods_are_counted_per_round() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.update_pod(pod("huge", cpu="100000", memory="256Mi"))
    h.cluster.update_pod(pod("web-1", cpu="1", memory="256Mi"))
    await h.provisioner.provision()
    assert h.metric("karpenter_scheduler_unschedulable_pods_count",
                    controller="provisioner") == 1.0
    assert h.metric("karpenter_scheduler_ignored_pods_count") == 0.0


def pending_by_zone(h: Harness) -> dict[str, float]:
    [family] = h.provisioner.metrics.scheduler_pending_pods_by_zone.collect()
    return {s.labels["zone"]: s.value for s in family.samples
            if s.labels["controller"] == "provisioner"}


async def test_pending_pods_are_counted_by_the_zone_they_are_held_to() -> None:
    """karpenter_scheduler_pending_pods_by_effective_zone_count, replaced every round:
    a zone no pod is held to any more disappears."""
    h = build()
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.update_pod(pod("free", cpu="1", memory="256Mi"))
    pinned = pod("pinned", cpu="1", memory="256Mi",
                 node_selector={"topology.kubernetes.io/zone": "test-zone-b"})
    h.cluster.update_pod(pinned)
    await h.provisioner.schedule()
    assert pending_by_zone(h) == {"flexible": 1.0, "test-zone-b": 1.0}

    h.cluster.delete_pod(pinned)
    await h.provisioner.schedule()
    assert pending_by_zone(h) == {"flexible": 1.0}
