"""The model takes in only the NodeClaims its cloud provider manages (Karpenter's
state informer and ``nodeclaimutils.IsManaged``): a NodeClaim of another provider's
NodeClass is never launched here, and counted as launching it would hold the model
unsynced, so that no pod is ever provisioned for again."""

from __future__ import annotations

from typing import Any, cast

from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.runtime import Cache, Client, freeze
from karpy.state.cluster import Cluster
from karpy.state.kinds import NODE_CLAIM
from karpy.state.testing import nodeclaim


def ec2_nodeclaim(name: str) -> dict[str, Any]:
    """An unlaunched NodeClaim of Karpenter AWS's EC2NodeClass."""
    claim = nodeclaim(name)
    claim["spec"]["nodeClassRef"] = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                     "name": "default"}
    return claim


def attached(*claims: dict[str, Any], managed: bool) -> tuple[Cluster, Cache]:
    cache = Cache(cast(Client, object()))
    informer = cache.informer(NODE_CLAIM)
    for claim in claims:
        informer.store.put(freeze(claim))
    cluster = Cluster()
    node_classes = FakeCloudProvider().supported_node_classes() if managed else None
    cluster.attach(cache, node_classes=node_classes)
    return cluster, cache


def test_a_nodeclaim_of_another_providers_class_does_not_hold_the_model_unsynced() -> None:
    ours, theirs = nodeclaim("ours-launching"), ec2_nodeclaim("aws-leftover")
    cluster, _ = attached(ours, theirs, managed=True)
    assert cluster.waiting_on() == ["ours-launching"]
    assert not cluster.nodeclaim_exists("aws-leftover")
    # Once ours launches, nothing holds the model: the other provider's never will.
    cluster.update_nodeclaim(freeze(nodeclaim("ours-launching", provider_id="test:///a")))
    assert cluster.waiting_on() == []
    cluster.detach()


def test_events_for_unmanaged_nodeclaims_are_ignored_and_managed_ones_followed() -> None:
    cluster, cache = attached(managed=True)
    informer = cache.informer(NODE_CLAIM)
    # As a watch delivers them (the informer's own event path).
    informer._apply("ADDED", freeze(ec2_nodeclaim("aws-1")))
    informer._apply("ADDED", freeze(nodeclaim("ours-1")))
    assert cluster.waiting_on() == ["ours-1"]
    assert not cluster.nodeclaim_exists("aws-1")
    informer._apply("DELETED", freeze(nodeclaim("ours-1")))
    informer._apply("DELETED", freeze(ec2_nodeclaim("aws-1")))
    assert cluster.waiting_on() == []
    assert not cluster.nodeclaim_exists("ours-1")
    cluster.detach()


def test_without_node_classes_the_model_takes_every_nodeclaim() -> None:
    """A library user attaching the model without a provider keeps every NodeClaim."""
    cluster, _ = attached(nodeclaim("a"), ec2_nodeclaim("b"), managed=False)
    assert cluster.waiting_on() == ["a", "b"]
    cluster.detach()
