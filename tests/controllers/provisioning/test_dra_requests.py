"""IGNORE_DRA_REQUESTS (Karpenter's default true): a pod with Dynamic Resource
Allocation claims gets a FailedScheduling event saying so and no capacity; with the
setting off it is provisioned for by its other requests alone."""

from __future__ import annotations

from typing import Any

from provisioning_support import build

from karpy.controllers.provisioning.inputs import has_dra_requirements
from karpy.controllers.settings import Settings
from karpy.state.testing import nodepool, pod


def claiming(name: str, *, in_container: bool = False) -> dict[str, Any]:
    manifest = pod(name, cpu="1", memory="256Mi")
    spec = manifest["spec"]
    if in_container:
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    else:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    return manifest


def test_claims_are_found_on_the_pod_and_in_any_container() -> None:
    assert has_dra_requirements(claiming("a"))
    assert has_dra_requirements(claiming("b", in_container=True))
    assert not has_dra_requirements(pod("c", cpu="1", memory="256Mi"))


async def test_a_pod_with_resource_claims_gets_no_capacity_and_is_told_why() -> None:
    h = build()
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.update_pod(claiming("dra"))
    h.cluster.update_pod(pod("plain", cpu="1", memory="256Mi"))
    await h.provisioner.provision()
    [claim] = h.client.created  # for the plain pod only
    assert claim["kind"] == "NodeClaim"
    [event] = h.recorder.reasons("FailedScheduling")
    assert (event.name, event.message) == (
        "dra", "Failed to schedule pod, pod has Dynamic Resource Allocation requirements "
        "that are not yet supported by Karpenter")


async def test_with_the_setting_off_the_pod_is_provisioned_for() -> None:
    h = build(Settings(ignore_dra_requests=False))
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.update_pod(claiming("dra"))
    await h.provisioner.provision()
    assert len(h.client.created) == 1
    assert h.recorder.reasons("FailedScheduling") == []
