"""karpy's kwok provider treats its KWOKNodeClass as Karpenter's kwok provider does
(sigs.k8s.io/karpenter v1.15.0 kwok/cloudprovider): it stamps no NodeClass hash on a
NodeClaim (its Create returns only the ``kwok.x-k8s.io/node`` annotation) and ``IsDrifted``
always answers "not drifted", so changing a KWOKNodeClass never drifts a node, whichever
of the two launched it."""

from __future__ import annotations

from karpy.apis import NodeClaim
from karpy.cloudprovider.kwok import KWOK_NODE_CLASS, KwokCloudProvider
from karpy.runtime import Kind
from karpy.runtime.testing import FakeClient

NODE_CLASS = Kind(group=KWOK_NODE_CLASS.group, version=KWOK_NODE_CLASS.version,
                  plural=KWOK_NODE_CLASS.plural, kind=KWOK_NODE_CLASS.kind, namespaced=False)


def nodeclaim() -> NodeClaim:
    return NodeClaim.from_dict({
        "metadata": {"name": "claim", "annotations": {"example.com/kept": "yes"}},
        "spec": {
            "nodeClassRef": {"group": KWOK_NODE_CLASS.group, "kind": KWOK_NODE_CLASS.kind,
                             "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": ["c-1x-amd64-linux"]}],
            "resources": {"requests": {"cpu": "100m"}},
        },
    })


async def test_a_kwok_nodeclaim_gets_no_hash_and_a_nodeclass_change_never_drifts_it() -> None:
    client = FakeClient()
    client.add(NODE_CLASS, {"metadata": {"name": "default"}, "spec": {},
                            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    provider = KwokCloudProvider(client)  # type: ignore[arg-type]
    launched = await provider.create(nodeclaim())
    # Karpenter's kwok Create: the claim's annotations plus kwok.x-k8s.io/node=fake, no hash.
    assert launched.metadata.annotations == {"example.com/kept": "yes",
                                             "kwok.x-k8s.io/node": "fake"}
    assert await provider.is_drifted(launched) is None
    [stored] = client.objects(NODE_CLASS)
    stored["spec"] = {"nodeRegistrationDelay": "30s"}
    client.add(NODE_CLASS, stored)
    assert await provider.is_drifted(launched) is None
