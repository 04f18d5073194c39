"""Volume attachment limits in the simulator (Karpenter v1.15's VolumeUsage and
InstanceType.VolumeAttachmentLimits): no node is planned, and no existing node used,
with more volumes of a CSI driver than it can attach."""

from __future__ import annotations

import dataclasses

from scheduling_support import itype, node, nodepool, pod

from karpy.scheduling import InstanceType, Pod
from karpy.scheduling.simulator import Simulator

EBS = "ebs.csi.aws.com"


def with_limit(it: InstanceType, limit: int) -> InstanceType:
    return dataclasses.replace(it, volume_attachment_limits={EBS: limit})


def claimed(p: Pod, *claims: str) -> Pod:
    return dataclasses.replace(p, volumes={EBS: frozenset(f"default/{c}" for c in claims)})


def test_forty_pods_with_a_volume_each_need_three_nodes_of_sixteen() -> None:
    big = with_limit(itype("big", 64, 256), 16)
    pods = [claimed(pod(f"db-{i}", cpu="100m"), f"data-{i}") for i in range(40)]
    results = Simulator([nodepool("default", [big])]).solve(pods)
    assert not results.errors
    sizes = sorted(len(c.pods) for c in results.new_nodeclaims)
    assert len(sizes) == 3 and max(sizes) <= 16, sizes


def test_pods_sharing_a_claim_attach_it_once() -> None:
    big = with_limit(itype("big", 64, 256), 2)
    pods = [claimed(pod(f"r-{i}", cpu="100m"), "shared") for i in range(5)]
    results = Simulator([nodepool("default", [big])]).solve(pods)
    assert [len(c.pods) for c in results.new_nodeclaims] == [5]


def test_a_nodeclaim_keeps_only_the_types_that_attach_its_volumes() -> None:
    few = with_limit(itype("few", 8, 32), 2)
    many = with_limit(itype("many", 8, 32), 8)
    pods = [claimed(pod(f"p-{i}", cpu="100m"), f"c-{i}") for i in range(4)]
    results = Simulator([nodepool("default", [few, many])]).solve(pods)
    [claim] = results.new_nodeclaims
    assert [it.name for it in claim.instance_types] == ["many"]


def test_a_pod_with_more_volumes_than_any_type_attaches_says_so() -> None:
    small = with_limit(itype("small", 8, 32), 2)
    results = Simulator([nodepool("default", [small])]).solve(
        [claimed(pod("greedy"), "a", "b", "c")])
    [error] = results.errors
    assert "would exceed volume limit for all instance type options" in error.reason
    assert f"provisioner {EBS}, volume-count 3, volume-limit 2" in error.reason


def test_an_existing_node_counts_its_pods_volumes_against_its_csinode_limit() -> None:
    bound = [claimed(pod(f"old-{i}", cpu="100m", node_name="n1"), f"old-{i}") for i in range(3)]
    full = dataclasses.replace(node("n1", cpu=16, bound=bound), volume_limits={EBS: 3})
    results = Simulator([nodepool()]).solve([claimed(pod("new", cpu="100m"), "new")],
                                            nodes=[full])
    assert results.placements() == {"default/new": "new:0"}, "placed on a full node"
    # a pod without volumes still goes there
    results = Simulator([nodepool()]).solve([pod("plain", cpu="100m")], nodes=[full])
    assert results.placements() == {"default/plain": "n1"}


def test_an_existing_node_without_a_csinode_limit_uses_its_instance_types() -> None:
    typed = with_limit(itype("big", 16, 64), 1)
    bound = [claimed(pod("old", cpu="100m", node_name="n1"), "old")]
    n1 = node("n1", cpu=16, bound=bound, labels={"node.kubernetes.io/instance-type": "big"})
    results = Simulator([nodepool("default", [typed])]).solve(
        [claimed(pod("new", cpu="100m"), "new")], nodes=[n1])
    assert results.placements() == {"default/new": "new:0"}


def test_pods_without_volumes_are_not_held_back() -> None:
    tiny = with_limit(itype("big", 64, 256), 0)
    results = Simulator([nodepool("default", [tiny])]).solve(
        [pod(f"p-{i}", cpu="100m") for i in range(30)])
    assert len(results.new_nodeclaims) == 1 and not results.errors
