"""Drift (AKSNodeClass spec changed, image changed) and garbage collection of NICs no VM
or NodeClaim owns."""

from __future__ import annotations

from azure_support import KUBERNETES_VERSION, ready_node_class
from azurearm.server import ArmServer
from karpy_azure import AzureCloudProvider, StaticNodeClasses
from karpy_azure._gc import NicGarbageCollector

from karpy.apis import NodeClaim
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime.kinds import NODE
from karpy.runtime.testing import FakeClient

POOL = make_nodepool(
    NodeClassReference(group="karpenter.azure.com", kind="AKSNodeClass", name="default")
)


def stored(asked: NodeClaim, launched: NodeClaim) -> NodeClaim:
    """The NodeClaim as the lifecycle controller keeps it after launch."""
    kept = asked.model_copy(deep=True)
    kept.metadata.labels = {**launched.metadata.labels, **asked.metadata.labels}
    kept.metadata.annotations = dict(launched.metadata.annotations)
    kept.status = launched.status.model_copy(deep=True)
    return kept


async def test_spec_and_image_changes_are_drift(
    azure: AzureCloudProvider, arm: ArmServer, node_classes: StaticNodeClasses
) -> None:
    asked = make_nodeclaim(POOL, requests={"cpu": "100m"})
    nodeclaim = stored(asked, await azure.create(asked))
    assert await azure.is_drifted(nodeclaim) is None
    # a new image version is published and the status controller picks it up
    for versions in arm.state.image_versions.values():
        versions.append("202501.05.0")
    node_classes.items["default"] = await ready_node_class(azure)
    assert await azure.is_drifted(nodeclaim) == "ImageDrift"
    # the spec changes
    node_classes.items["default"] = await ready_node_class(azure, osDiskSizeGB=64)
    assert await azure.is_drifted(nodeclaim) == "NodeClassDrift"


async def test_orphaned_nics_are_collected_after_the_grace_period(
    azure: AzureCloudProvider, arm: ArmServer
) -> None:
    asked = make_nodeclaim(POOL, requests={"cpu": "100m"})
    launched = await azure.create(asked)
    live_nic = "aks-" + (launched.metadata.name or "")
    template = arm.state.nics[live_nic]

    def nic(name: str, **extra: object) -> None:
        arm.state.nics[name] = {
            **template, "name": name, "id": template["id"].rsplit("/", 1)[0] + "/" + name,
            **extra,
        }

    nic("aks-orphan")  # its VM create failed and the clean-up did not happen
    nic("aks-inflight")  # a launch in flight: its NodeClaim exists, the VM not yet
    nic("aks-theirs", tags={"karpenter.azure.com_cluster": "other"})
    now = [0.0]

    async def nodeclaim_names() -> set[str]:
        return {launched.metadata.name or "", "inflight"}

    gc = NicGarbageCollector(azure, nodeclaim_names, grace=300, monotonic=lambda: now[0])
    result = await gc.reconcile()
    assert "aks-orphan" in arm.state.nics  # seen once: not ripe yet
    assert result.requeue_after is not None and result.requeue_after <= 300
    now[0] = 301.0
    await gc.reconcile()
    assert set(arm.state.nics) == {live_nic, "aks-inflight", "aks-theirs"}


def node_of(nodeclaim: NodeClaim, *, kubelet: str, identity: str | None) -> dict[str, object]:
    label = "kubernetes.azure.com/kubelet-identity-client-id"
    labels = {} if identity is None else {label: identity}
    return {
        "metadata": {"name": nodeclaim.status.node_name, "labels": labels},
        "status": {"nodeInfo": {"kubeletVersion": kubelet}},
    }


async def test_kubernetes_version_and_kubelet_identity_changes_are_drift(
    azure: AzureCloudProvider, node_classes: StaticNodeClasses
) -> None:
    """As Karpenter-Azure checks a VM's Node: the kubelet's version against the class's
    Kubernetes version, then the kubelet identity label against the setting."""
    asked = make_nodeclaim(POOL, requests={"cpu": "100m"})
    nodeclaim = stored(asked, await azure.create(asked))
    nodeclaim.status.node_name = "aks-node-1"
    client = FakeClient()
    azure.client = client
    # not registered yet: nothing to compare
    assert await azure.is_drifted(nodeclaim) is None
    expected = azure.settings.kubelet_identity_client_id
    client.add(NODE, node_of(nodeclaim, kubelet="v" + KUBERNETES_VERSION, identity=expected))
    assert await azure.is_drifted(nodeclaim) is None
    # the cluster was upgraded: the class now resolves 1.32.0
    upgraded = node_classes.items["default"].model_copy(deep=True)
    upgraded.status.kubernetes_version = "1.32.0"
    node_classes.items["default"] = upgraded
    assert await azure.is_drifted(nodeclaim) == "K8sVersionDrift"
    # a simulated kubelet (kwok reports its own version or "fake") says nothing
    for simulated in ("fake", ""):
        client.add(NODE, node_of(nodeclaim, kubelet=simulated, identity=expected))
        assert await azure.is_drifted(nodeclaim) is None
    client.add(NODE, node_of(nodeclaim, kubelet="v" + KUBERNETES_VERSION, identity=expected))
    # ... but a version the class does not hold as ready is not acted on
    upgraded.status_conditions().set_false("KubernetesVersionReady", "Unknown", "unreadable")
    assert await azure.is_drifted(nodeclaim) is None
    node_classes.items["default"] = await ready_node_class(azure)
    # the kubelet identity was rotated; a node without the label is left alone
    client.add(NODE, node_of(nodeclaim, kubelet="v" + KUBERNETES_VERSION, identity="old-id"))
    assert await azure.is_drifted(nodeclaim) == "KubeletIdentityDrift"
    client.add(NODE, node_of(nodeclaim, kubelet="v" + KUBERNETES_VERSION, identity=None))
    assert await azure.is_drifted(nodeclaim) is None
