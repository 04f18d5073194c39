"""In-place tag updates: a changed ``spec.tags`` is set on the existing NIC, extensions
and VM (tags-only PATCHes on the ARM test server), the NodeClaim's in-place update hash
follows, and the node is neither drifted nor replaced."""

from __future__ import annotations

from typing import Any

from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses
from karpy_azure._inplaceupdate import NOT_REGISTERED_RETRY, InPlaceUpdateReconciler, tags_hash

from karpy.apis import NodeClaim, NodePool
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NODE_CLAIM as NODE_CLAIM_KIND
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime import Request
from karpy.runtime.testing import FakeClient

POOL: NodePool = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default"),
    name="general",
)
HASH = "karpenter.azure.com/in-place-update-hash"


async def launched(azure: AzureCloudProvider, client: FakeClient, *, registered: bool) -> str:
    """A NodeClaim launched by ``azure`` and stored in ``client``; its name."""
    nodeclaim = await azure.create(make_nodeclaim(POOL, requests={"cpu": "100m"}))
    obj: dict[str, Any] = nodeclaim.to_dict()
    obj["status"]["conditions"] = [
        {"type": "Registered", "status": "True" if registered else "Unknown",
         "reason": "Registered", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]
    await client.create(NODE_CLAIM_KIND, obj)
    return nodeclaim.metadata.name or ""


async def test_a_tags_change_is_applied_in_place_and_drifts_nothing(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    client = FakeClient()
    name = await launched(azure, client, registered=True)
    vm = "aks-" + name
    before = dict(arm.state.vms[vm]["tags"])
    assert (await client.get(NODE_CLAIM_KIND, name))["metadata"]["annotations"][HASH] == (
        tags_hash(before)
    )
    node_class = node_classes.items["default"]
    node_class.spec.tags = {"team": "payments", "cost/center": "42"}
    reconciler = InPlaceUpdateReconciler(azure, client)
    assert (await reconciler.reconcile(Request("", name))).requeue_after == 0.0
    want = {**before, "team": "payments", "cost_center": "42"}
    assert arm.state.vms[vm]["tags"] == want
    assert arm.state.nics[vm]["tags"] == want
    assert arm.extensions_of(vm)["computeAksLinuxBilling"]["tags"] == want
    assert arm.state.vms[vm]["properties"]["provisioningState"] == "Succeeded"
    stored = await client.get(NODE_CLAIM_KIND, name)
    assert stored["metadata"]["annotations"][HASH] == tags_hash(want)
    # nothing replaced: no VM or NIC created again or deleted, and no drift
    assert [r.method for r in arm.requests if r.method in ("PUT", "DELETE")].count("PUT") == 3
    assert not [r for r in arm.requests if r.method == "DELETE"]
    assert await azure.is_drifted(NodeClaim.model_validate(stored)) is None
    # up to date: a second reconcile changes nothing
    patches = len([r for r in arm.requests if r.method == "PATCH"])
    await reconciler.reconcile(Request("", name))
    assert len([r for r in arm.requests if r.method == "PATCH"]) == patches


async def test_a_nodeclaim_not_registered_yet_is_retried_later(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    client = FakeClient()
    name = await launched(azure, client, registered=False)
    node_classes.items["default"].spec.tags = {"team": "payments"}
    result = await InPlaceUpdateReconciler(azure, client).reconcile(Request("", name))
    assert result.requeue_after == NOT_REGISTERED_RETRY
    assert not [r for r in arm.requests if r.method == "PATCH"]
    assert "team" not in arm.state.vms["aks-" + name]["tags"]
