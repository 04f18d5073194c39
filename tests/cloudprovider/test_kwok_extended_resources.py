"""The kwok provider launches a NodeClaim that requests an extended resource its
catalogue does not report (one a NodeOverlay's ``capacity`` adds), and its node
advertises it, as Karpenter's kwok provider does."""

from __future__ import annotations

from karpy.apis import NodeClaim
from karpy.cloudprovider.kwok import KWOK_NODE_CLASS, KwokCloudProvider
from karpy.runtime import Kind, kinds
from karpy.runtime.testing import FakeClient

DEVICE = "example.com/device"
NODE_CLASS = Kind(group=KWOK_NODE_CLASS.group, version=KWOK_NODE_CLASS.version,
                  plural=KWOK_NODE_CLASS.plural, kind=KWOK_NODE_CLASS.kind, namespaced=False)


def nodeclaim(requests: dict[str, str]) -> NodeClaim:
    return NodeClaim.from_dict({
        "metadata": {"name": "claim"},
        "spec": {
            "nodeClassRef": {"group": KWOK_NODE_CLASS.group, "kind": KWOK_NODE_CLASS.kind,
                             "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": ["c-1x-amd64-linux"]}],
            "resources": {"requests": requests},
        },
    })


async def test_an_unreported_extended_resource_is_launched_and_advertised() -> None:
    client = FakeClient()
    client.add(NODE_CLASS, {"metadata": {"name": "default"}, "spec": {},
                            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    provider = KwokCloudProvider(client)  # type: ignore[arg-type]
    launched = await provider.create(nodeclaim({"cpu": "100m", DEVICE: "2"}))
    assert launched.status.capacity[DEVICE] == "2"
    [node] = client.objects(kinds.NODE)
    assert node["status"]["allocatable"][DEVICE] == "2"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c-1x-amd64-linux"
