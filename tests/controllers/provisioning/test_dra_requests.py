"""IGNORE_DRA_REQUESTS (Karpenter's default true): a pod with Dynamic Resource
Allocation claims gets a FailedScheduling event saying so and no capacity; with the
setting off its claims are resolved and allocated against the instance types' slice
templates (issue 40: planning it as if it had no claims launched nodes it cannot run
on)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from provisioning_support import build

from karpy.controllers.inputs.scheduling import has_dra_requirements
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


GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
             "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression":
                                              'device.driver == "gpu.example.com"'}}]}}


def gpu_claim(count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpu-claim", "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}


async def test_with_the_setting_off_a_missing_claim_waits_with_a_reason() -> None:
    h = build(Settings(ignore_dra_requests=False))
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.update_pod(claiming("dra"))
    await h.provisioner.provision()
    assert h.client.created == []
    [event] = h.recorder.reasons("FailedScheduling")
    assert "ResourceClaim default/gpu-claim not found" in event.message


async def test_with_the_setting_off_no_type_without_devices_is_bought() -> None:
    h = build(Settings(ignore_dra_requests=False))
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.devices.update_class(GPU_CLASS)
    h.cluster.devices.update_claim(gpu_claim(2))
    h.cluster.update_pod(claiming("dra"))
    await h.provisioner.provision()
    assert h.client.created == []
    [event] = h.recorder.reasons("FailedScheduling")
    assert "cannot allocate all claims" in event.message


async def test_with_the_setting_off_only_types_with_the_devices_are_asked_for() -> None:
    from karpy.scheduling.devices import Device, DeviceID, ResourceSliceTemplate

    h = build(Settings(ignore_dra_requests=False))
    gpus = ResourceSliceTemplate("gpu.example.com", "gpus", tuple(
        Device(DeviceID("gpu.example.com", "gpus", f"gpu-{i}")) for i in range(2)))
    chosen = h.provider.instance_types[-1].name
    h.provider.instance_types = [
        replace(it, resource_slice_templates=(gpus,)) if it.name == chosen else it
        for it in h.provider.instance_types]
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.devices.update_class(GPU_CLASS)
    h.cluster.devices.update_claim(gpu_claim(2))
    h.cluster.update_pod(claiming("dra"))
    await h.provisioner.provision()
    [claim] = h.client.created
    [types] = [r["values"] for r in claim["spec"]["requirements"]
               if r["key"] == "node.kubernetes.io/instance-type"]
    assert types == [chosen]
    # Karpenter v1.14.1: the drivers whose template devices were allocated, for
    # initialization to wait on
    assert claim["metadata"]["annotations"]["karpenter.sh/requested-dra-drivers"] == (
        "gpu.example.com")
