"""``choose_launch`` on a NodeClaim a NodeOverlay priced: the core lists its instance
types cheapest first at the overlay's prices, which the cloud does not know, so their
order wins over the cloud's prices (``karpenter.sh/price-overlay-applied``)."""

from __future__ import annotations

from karpy.apis import NodeClaim
from karpy.cloudprovider.fake import default_instance_types
from karpy.cloudprovider.launch import choose_launch


def nodeclaim(types: list[str], annotations: dict[str, str]) -> NodeClaim:
    return NodeClaim.from_dict({
        "metadata": {"name": "claim", "annotations": annotations},
        "spec": {
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass",
                             "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": types}],
            "resources": {"requests": {"cpu": "100m"}},
        },
    })


def test_the_listed_order_wins_when_an_overlay_priced_the_types() -> None:
    types = default_instance_types()
    listed = ["large-instance-type", "small-instance-type"]
    plain = choose_launch(nodeclaim(listed, {}), types)
    assert plain.instance_type.name == "small-instance-type"  # the cloud's cheapest
    overlaid = choose_launch(
        nodeclaim(listed, {"karpenter.sh/price-overlay-applied": "true"}), types)
    assert overlaid.instance_type.name == "large-instance-type"
    # within the type, the cloud's cheapest offering still wins
    assert overlaid.offering.price == min(
        o.price for o in overlaid.instance_type.offerings if o.available)
