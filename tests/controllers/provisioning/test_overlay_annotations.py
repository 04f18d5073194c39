"""NodeClaims the provisioner creates from an overlaid catalogue: Karpenter's
``karpenter.sh/price-overlay-applied`` and ``karpenter.sh/capacity-overlay-applied``
annotations, and the extended resource a capacity overlay adds in the requests."""

from __future__ import annotations

from provisioning_support import Harness, build

from karpy.apis.annotations import (
    ANNOTATION_CAPACITY_OVERLAY_APPLIED,
    ANNOTATION_PRICE_OVERLAY_APPLIED,
)
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.scheduling.overlay import Overlay
from karpy.scheduling.requirements import Requirement, Requirements
from karpy.state import OverlayStore
from karpy.state.testing import nodepool, pod

DEVICE = "example.com/device"


def with_overlays(h: Harness, *overlays: Overlay) -> None:
    store = OverlayStore(required=True)
    store.update(overlays, ["default"])
    h.provisioner.inputs.instance_types = InstanceTypeCache(
        h.provider, h.unavailable, h.clock, overlays=store)


def small_only(**changes: object) -> Overlay:
    reqs = Requirements([Requirement.new(
        "node.kubernetes.io/instance-type", "In", ["small-instance-type"])])
    return Overlay(name="o", requirements=reqs, **changes)  # type: ignore[arg-type]


async def test_no_overlay_no_annotation() -> None:
    h = build()
    with_overlays(h)
    h.cluster.update_nodepool(nodepool("default"))
    h.cluster.update_pod(pod("web", cpu="100m", memory="64Mi"))
    await h.provisioner.provision()
    [claim] = h.client.created
    annotations = claim["metadata"]["annotations"]
    assert ANNOTATION_PRICE_OVERLAY_APPLIED not in annotations
    assert ANNOTATION_CAPACITY_OVERLAY_APPLIED not in annotations


async def test_price_and_capacity_overlays_are_annotated() -> None:
    h = build()
    with_overlays(h, small_only(price="0.0001", capacity={DEVICE: 2}))
    h.cluster.update_nodepool(nodepool("default"))
    wants = pod("web", cpu="100m", memory="64Mi")
    wants["spec"]["containers"][0]["resources"]["requests"][DEVICE] = "1"
    h.cluster.update_pod(wants)
    await h.provisioner.provision()
    [claim] = h.client.created
    annotations = claim["metadata"]["annotations"]
    assert annotations[ANNOTATION_PRICE_OVERLAY_APPLIED] == "true"
    assert annotations[ANNOTATION_CAPACITY_OVERLAY_APPLIED] == "true"
    assert claim["spec"]["resources"]["requests"][DEVICE] == "1"
