"""Static NodePools (StaticCapacity): static.provisioning creates what ``spec.replicas``
asks for and no more, within ``limits.nodes``; static.deprovisioning removes the extra
ones, unlaunched first, then empty machines; the provisioner never plans pods onto a new
node of a static NodePool."""

from __future__ import annotations

import asyncio
from typing import Any

from karpy.cloudprovider import UnavailableOfferings
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.inputs import SchedulingInputs
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.settings import FeatureGates, Settings
from karpy.controllers.static import StaticDeprovisioning, StaticProvisioning
from karpy.runtime import Request, freeze
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock, FakeEventRecorder
from karpy.state import NODE_CLAIM, Cluster
from karpy.state import testing as t


class Rig:
    def __init__(self, gates: FeatureGates | None = None) -> None:
        self.clock = FakeClock()
        self.cluster = Cluster(clock=self.clock)
        self.client = FakeClient()
        inputs = SchedulingInputs(
            cluster=self.cluster, cloud_provider=FakeCloudProvider(),
            unavailable_offerings=UnavailableOfferings(clock=self.clock),
            recorder=FakeEventRecorder(), clock=self.clock,
            settings=Settings(feature_gates=gates or FeatureGates(static_capacity=True)),
            metrics=KarpenterMetrics(Metrics().meter("karpenter")),
        )  # fmt: skip
        self.provisioner = Provisioner(client=self.client, inputs=inputs, clock=self.clock)
        self.up = StaticProvisioning(cluster=self.cluster, provisioner=self.provisioner)
        self.down = StaticDeprovisioning(client=self.client, cluster=self.cluster)

    def pool(self, name: str = "static", *, replicas: int, **kwargs: Any) -> dict[str, Any]:
        obj = t.nodepool(name, **kwargs)
        obj["spec"]["replicas"] = replicas
        self.cluster.update_nodepool(freeze(obj))
        return obj

    def claims(self) -> list[dict[str, Any]]:
        return [c for c in self.client.objects(NODE_CLAIM)
                if not c["metadata"].get("deletionTimestamp")]  # fmt: skip

    def machine(self, name: str, *, pool: str = "static", pods: int = 0) -> None:
        provider_id = f"test:///{name}"
        claim = t.nodeclaim(f"{name}-claim", nodepool=pool, provider_id=provider_id,
                            node_name=name, registered=True, initialized=True)  # fmt: skip
        claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
        self.client.add(NODE_CLAIM, claim)
        stored = self.client.peek(NODE_CLAIM, claim["metadata"]["name"])
        self.cluster.update_nodeclaim(freeze(stored))
        self.cluster.update_node(freeze(t.node(name, provider_id=provider_id, nodepool=pool)))
        for i in range(pods):
            self.cluster.update_pod(freeze(t.pod(f"{name}-pod-{i}", node_name=name, cpu="100m")))

    def unlaunched(self, name: str, pool: str = "static") -> None:
        claim = t.nodeclaim(name, nodepool=pool)
        claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
        self.client.add(NODE_CLAIM, claim)
        self.cluster.update_nodeclaim(freeze(self.client.peek(NODE_CLAIM, name)))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_replicas_are_created_once_from_the_template_with_no_pods() -> None:
    rig = Rig()
    rig.pool(replicas=3, labels={"team": "a"}, requirements=[
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": ["fake-it-1", "fake-it-2"]}])  # fmt: skip
    run(rig.up.reconcile(Request("", "static")))
    claims = rig.claims()
    assert len(claims) == 3
    for claim in claims:
        assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "static"
        assert claim["metadata"]["labels"]["team"] == "a"
        assert claim["metadata"]["ownerReferences"][0]["name"] == "static"
        # The NodePool's own requirement, not narrowed by a fit for pods.
        [types] = [r for r in claim["spec"]["requirements"]
                   if r["key"] == "node.kubernetes.io/instance-type"]  # fmt: skip
        assert types["values"] == ["fake-it-1", "fake-it-2"]
        assert not (claim["spec"].get("resources") or {}).get("requests")
    # The model counted them at once: a second reconcile (before any watch event)
    # creates nothing more.
    run(rig.up.reconcile(Request("", "static")))
    assert len(rig.claims()) == 3


def test_limits_nodes_caps_the_replicas() -> None:
    rig = Rig()
    rig.pool(replicas=3, limits={"nodes": "2"})
    run(rig.up.reconcile(Request("", "static")))
    assert len(rig.claims()) == 2
    run(rig.up.reconcile(Request("", "static")))
    assert len(rig.claims()) == 2


def test_a_pool_that_is_not_ready_or_not_static_gets_nothing() -> None:
    rig = Rig()
    rig.pool("waiting", replicas=2, ready=False)
    rig.cluster.update_nodepool(freeze(t.nodepool("dynamic")))
    run(rig.up.reconcile(Request("", "waiting")))
    run(rig.up.reconcile(Request("", "dynamic")))
    assert rig.claims() == []


def test_scale_down_removes_unlaunched_then_empty_machines_once() -> None:
    rig = Rig()
    rig.pool(replicas=1)
    rig.machine("busy", pods=2)
    rig.machine("idle")
    rig.unlaunched("static-pending")
    run(rig.down.reconcile(Request("", "static")))
    deleted = {c["metadata"]["name"] for c in rig.client.objects(NODE_CLAIM)
               if c["metadata"].get("deletionTimestamp")}  # fmt: skip
    assert deleted == {"static-pending", "idle-claim"}
    # The deletions are in the model: another reconcile deletes nothing more.
    run(rig.down.reconcile(Request("", "static")))
    assert [c["metadata"]["name"] for c in rig.claims()] == ["busy-claim"]
    # ... and provisioning does not count the deleting ones as present.
    run(rig.up.reconcile(Request("", "static")))
    assert [c["metadata"]["name"] for c in rig.claims()] == ["busy-claim"]


def test_the_provisioner_does_not_plan_pods_onto_a_static_pool() -> None:
    rig = Rig()
    rig.pool(replicas=0)
    rig.cluster.update_pod(freeze(t.pod("web", cpu="1")))
    results = run(rig.provisioner.schedule())
    assert results is None or not results.new_nodeclaims
    assert rig.claims() == []


def test_without_the_gate_a_static_pool_is_named_in_the_log(caplog: Any) -> None:
    rig = Rig(FeatureGates(static_capacity=False))
    rig.pool(replicas=2)
    rig.cluster.update_pod(freeze(t.pod("web", cpu="1")))
    with caplog.at_level("INFO", logger="controller"):
        run(rig.provisioner.schedule())
    assert any("StaticCapacity feature gate is off" in r.getMessage() for r in caplog.records)
