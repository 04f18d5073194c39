"""MIN_VALUES_POLICY in the provisioner: Strict refuses a NodeClaim whose instance types
cannot span a requirement's minValues; BestEffort launches it with minValues lowered to
what they span and says so in Karpenter's annotation and metric label."""

from __future__ import annotations

import pytest
from provisioning_support import build

from karpy.apis.annotations import ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED
from karpy.controllers.settings import Settings
from karpy.state.testing import nodepool, pod

TYPE = "node.kubernetes.io/instance-type"
# The fake provider sells five instance types: no NodeClaim can span six.
SIX_TYPES = {"key": TYPE, "operator": "Exists", "minValues": 6}


def type_requirement(claim: dict[str, object]) -> dict[str, object]:
    spec = claim["spec"]
    assert isinstance(spec, dict)
    return next(r for r in spec["requirements"] if r["key"] == TYPE)


async def test_strict_launches_nothing_that_breaks_min_values() -> None:
    h = build(Settings(min_values_policy="Strict"))
    h.cluster.update_nodepool(nodepool("default", requirements=[SIX_TYPES]))
    h.cluster.update_pod(pod("web", cpu="100m", memory="64Mi"))
    await h.provisioner.provision()
    assert h.client.created == []
    # As Karpenter: the NodePool is filtered out, saying why, and the pod cannot schedule
    [pool_event] = h.recorder.reasons("NoCompatibleInstanceTypes")
    assert "minValues" in pool_event.message
    [event] = h.recorder.reasons("FailedScheduling")
    assert event.message.endswith(
        "nodepool requirements filtered out all available instance types")


async def test_best_effort_relaxes_min_values_and_annotates_the_nodeclaim() -> None:
    h = build(Settings(min_values_policy="BestEffort"))
    h.cluster.update_nodepool(nodepool("default", requirements=[SIX_TYPES]))
    h.cluster.update_pod(pod("web", cpu="100m", memory="64Mi"))
    await h.provisioner.provision()
    [claim] = h.client.created
    assert claim["metadata"]["annotations"][ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] == "true"
    requirement = type_requirement(claim)
    values = requirement["values"]
    assert isinstance(values, list) and len(values) < 6
    assert requirement["minValues"] == len(values)
    assert h.metric("karpenter_nodeclaims_created_total", min_values_relaxed="true") == 1


@pytest.mark.parametrize("policy", ["Strict", "BestEffort"])
async def test_min_values_met_is_annotated_false(policy: str) -> None:
    h = build(Settings(min_values_policy=policy))  # type: ignore[arg-type]
    two = {**SIX_TYPES, "minValues": 2}
    h.cluster.update_nodepool(nodepool("default", requirements=[two]))
    h.cluster.update_pod(pod("web", cpu="100m", memory="64Mi"))
    await h.provisioner.provision()
    [claim] = h.client.created
    assert claim["metadata"]["annotations"][ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] == "false"
    assert type_requirement(claim)["minValues"] == 2


def test_the_provisioner_schedules_with_the_policies_of_its_settings() -> None:
    h = build(Settings(preference_policy="Ignore", min_values_policy="BestEffort"))
    assert h.provisioner.inputs.options.preference_policy == "Ignore"
    assert h.provisioner.inputs.options.min_values_policy == "BestEffort"
