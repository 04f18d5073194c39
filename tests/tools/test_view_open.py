"""The cluster view over a snapshot (karpy.tools.view.open_view): the controllers' own
provisioner and disruption answer, nothing is written, what-if NodePools get their
status from the NodePool controllers."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from karpy.apis.labels import LABEL_CAPACITY_TYPE
from karpy.runtime import kinds
from karpy.state import NODE_CLAIM, NODE_POOL
from karpy.tools.view import (
    ClusterView,
    ReadOnlyError,
    Snapshot,
    SnapshotClient,
    ViewError,
    guess_provider,
    open_view,
)

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def small() -> Snapshot:
    return Snapshot.load(DATA / "small-cluster.yaml")


def _writes(view: ClusterView) -> list[Any]:
    inner = view.client.inner
    assert isinstance(inner, SnapshotClient)
    return inner.calls


async def test_provisioning_and_disruption_answer_from_the_snapshot(small: Snapshot) -> None:
    async with open_view(small) as view:
        assert view.provider_name == "kwok" and not view.live and view.synced
        assert sorted(p.name for p in view.pending_pods()) == [
            "trainer-0", *(f"web-6d9f7-{i}" for i in range(6))]
        results = await view.schedule()
        assert results is not None
        (plan,) = results.new_nodeclaims
        assert plan.nodepool == "default" and len(plan.pods) == 6
        assert plan.requirements.get(LABEL_CAPACITY_TYPE).values == frozenset({"spot"})
        (error,) = results.errors
        assert error.pod.name == "trainer-0" and "example.com/accelerator" in error.reason
        decision = await view.disruption_pass()
        assert decision is not None and decision.method == "Underutilized/single"
        (command,) = decision.commands
        assert [c.name for c in command.candidates] == ["default-x7k2p"]
        assert command.estimated_savings > 0
        reasons = {e.reason for e in view.recorder.events}
        assert "FailedScheduling" in reasons
        assert _writes(view) == []


async def test_the_view_is_wired_by_the_operators_own_wiring(small: Snapshot) -> None:
    """The view's provisioner and disruption controller read one set of scheduling
    inputs, the one ``karpy.operator.build_deps`` made: a view answers from exactly
    what the operator would build, instance-type cache included."""
    async with open_view(small) as view:
        assert view.provisioner.inputs is view.scheduling
        types = await view.instance_types("default")
        assert types and await view.scheduling.instance_types.get(
            view.cluster.nodepool("default")) is types  # type: ignore[arg-type]
        snapshot = await view.disruption.snapshot()
        assert set(snapshot.pools["default"].instance_types) == {it.name for it in types}


async def test_every_write_is_refused(small: Snapshot) -> None:
    async with open_view(small) as view:
        with pytest.raises(ReadOnlyError, match="read-only: refused to create"):
            await view.client.create(NODE_CLAIM, {"metadata": {"name": "x"}})
        with pytest.raises(ReadOnlyError, match="refused to delete"):
            await view.client.delete(kinds.NODE, "default-x7k2p")
        with pytest.raises(ReadOnlyError, match="refused to patch"):
            await view.client.patch(kinds.POD, "cache-0", {}, namespace="shop")
        with pytest.raises(ReadOnlyError):
            _ = view.client.api_client
        # The provider's own writes go through the same client.
        with pytest.raises(ReadOnlyError):
            await view.provisioner.client.create(NODE_CLAIM, {"metadata": {"name": "y"}})
        assert _writes(view) == []


def _pool(small: Snapshot, **changes: Any) -> dict[str, Any]:
    pool = copy.deepcopy(dict(small.of(NODE_POOL)[0]))
    pool.pop("status")
    pool["metadata"] = {"name": pool["metadata"]["name"]}
    pool["spec"]["template"]["spec"].update(changes)
    return pool


async def test_a_what_if_nodepool_gets_its_status_from_the_nodepool_controllers(
    small: Snapshot,
) -> None:
    on_demand = _pool(small, requirements=[
        {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    async with open_view(small, what_if=Snapshot.from_documents([on_demand])) as view:
        entry = view.cluster.nodepool("default")
        assert entry is not None and entry.ready
        results = await view.schedule()
        assert results is not None
        # The web pods ask for spot, which the changed pool no longer offers.
        assert not results.new_nodeclaims
        assert len(results.errors) == 7


async def test_a_what_if_nodepool_with_a_missing_nodeclass_is_not_used(small: Snapshot) -> None:
    orphan = _pool(small, nodeClassRef={
        "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "missing"})
    async with open_view(small, what_if=Snapshot.from_documents([orphan])) as view:
        entry = view.cluster.nodepool("default")
        assert entry is not None and not entry.ready
        assert await view.templates() == []


async def test_an_unknown_provider_is_a_clear_error(small: Snapshot) -> None:
    with pytest.raises(ViewError, match="cannot build cloud provider 'nope'"):
        async with open_view(small, provider="nope"):
            pass


def test_the_provider_is_guessed_from_the_nodeclass_the_nodepools_reference(
    small: Snapshot,
) -> None:
    assert guess_provider(small.of(NODE_POOL)) == "kwok"
    aws = _pool(small, nodeClassRef={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                     "name": "default"})
    assert guess_provider([aws]) == "aws"
    assert guess_provider([]) == "kwok"


async def test_land_puts_the_plan_in_the_model_launched_with_its_pods(small: Snapshot) -> None:
    async with open_view(small) as view:
        results = await view.schedule()
        assert results is not None
        landed = view.land(results)
        (name,) = landed
        state = view.cluster.node_by_name(name)
        assert state is not None and state.initialized and state.managed
        assert state.nodepool == "default"
        assert sorted(state.bound.pods) == [f"shop/web-6d9f7-{i}" for i in range(6)]
        # Launched as a provider would: the cheapest offering the plan allows.
        (plan,) = results.new_nodeclaims
        assert await view.node_price(state) == pytest.approx(plan.price)
        assert not [p for p in view.pending_pods() if p.name.startswith("web-")]
        assert _writes(view) == []
