"""Acting on an EC2 rebalance recommendation (issue 41, item 6; beyond Karpenter, which
only records an event): for a spot NodeClaim of a NodePool annotated
``karpy.dev/replace-on-rebalance-recommendation: "true"``, the interruption handler marks
the at-risk spot offering unavailable and annotates the NodeClaim; the provider then
reports it drifted (``RebalanceRecommendation``), and the core replaces it gracefully,
cost-checked (tests/controllers/disruption/test_consolidation.py has the cost check)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from karpy_aws import AWSCloudProvider
from karpy_aws._interruption_handler import (
    ANNOTATION_REBALANCE_RECOMMENDED,
    ANNOTATION_REPLACE_ON_REBALANCE,
    InterruptionHandler,
)
from karpy_aws._interruption_messages import REBALANCE_RECOMMENDATION
from karpy_aws._reservations import CapacityReservations

from karpy.apis import NodeClaim
from karpy.apis.annotations import ANNOTATION_DRIFT_COST_CHECKED
from karpy.cloudprovider import NODE_CLAIM, NODE_POOL, OfferingKey, UnavailableOfferings
from karpy.runtime.testing import FakeClient, FakeEventRecorder

INSTANCE = "i-0123456789abcdef0"


@dataclass
class Marks:
    """The provider's marks the handler sets (no reservation is touched here)."""

    unavailable: UnavailableOfferings = field(default_factory=UnavailableOfferings)

    @property
    def reservations(self) -> CapacityReservations:
        raise AssertionError("a rebalance recommendation touches no reservation")


def nodepool(opted: str | None) -> dict[str, Any]:
    annotations = {ANNOTATION_REPLACE_ON_REBALANCE: opted} if opted is not None else {}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "spot", "annotations": annotations},
            "spec": {"template": {"spec": {"nodeClassRef": {
                "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}}


def nodeclaim(capacity_type: str = "spot") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "spot-abcde", "labels": {
            "karpenter.sh/nodepool": "spot", "karpenter.sh/capacity-type": capacity_type,
            "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "us-east-1a"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                  "name": "default"}, "requirements": []},
        "status": {"providerID": f"aws:///us-east-1a/{INSTANCE}"},
    }


async def recommend(opted: str | None, capacity_type: str = "spot") -> tuple[
        dict[str, Any], Marks, FakeEventRecorder]:
    client = FakeClient()
    await client.create(NODE_POOL, nodepool(opted))
    await client.create(NODE_CLAIM, nodeclaim(capacity_type))
    marks, recorder = Marks(), FakeEventRecorder()
    handler = InterruptionHandler(marks, client, recorder)
    assert await handler.act(REBALANCE_RECOMMENDATION, [INSTANCE]) == ["spot-abcde"]
    return dict(await client.get(NODE_CLAIM, "spot-abcde")), marks, recorder


async def test_an_opted_in_spot_node_is_marked_for_a_cost_checked_replacement() -> None:
    claim, marks, recorder = await recommend("true")
    annotations = claim["metadata"]["annotations"]
    assert ANNOTATION_REBALANCE_RECOMMENDED in annotations
    assert annotations[ANNOTATION_DRIFT_COST_CHECKED] == "true"
    assert not claim["metadata"].get("deletionTimestamp"), "deleted like an interruption"
    assert marks.unavailable.is_unavailable(OfferingKey("m5.large", "us-east-1a", "spot"))
    assert [e.reason for e in recorder.events] == ["SpotRebalanceRecommendation"]


@pytest.mark.parametrize(("opted", "capacity_type"), [
    (None, "spot"), ("false", "spot"), ("true", "on-demand"),
])
async def test_otherwise_a_recommendation_is_an_event_only(
    opted: str | None, capacity_type: str,
) -> None:
    claim, marks, recorder = await recommend(opted, capacity_type)
    assert ANNOTATION_REBALANCE_RECOMMENDED not in (claim["metadata"].get("annotations") or {})
    assert not marks.unavailable.is_unavailable(
        OfferingKey("m5.large", "us-east-1a", capacity_type))
    assert [e.reason for e in recorder.events] == ["SpotRebalanceRecommendation"]


async def test_the_provider_reports_a_recommended_node_drifted(
    aws_provider: AWSCloudProvider,
) -> None:
    claim = nodeclaim()
    claim["metadata"]["annotations"] = {ANNOTATION_REBALANCE_RECOMMENDED: "2026-12-06T22:00:00Z"}
    reason = await aws_provider.is_drifted(NodeClaim.model_validate(claim))
    assert reason is not None and str(reason) == "RebalanceRecommendation"
