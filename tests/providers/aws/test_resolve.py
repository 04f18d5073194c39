"""Resolving EC2NodeClass selectors against moto (what the status controller writes)."""

from __future__ import annotations

import pytest
from conftest import CLUSTER, K8S_VERSION, REGION, ROLE, Account, node_class_manifest, resolved
from karpy_aws._clients import AWSClients
from karpy_aws._resolve import (
    alias_parameters,
    delete_instance_profile,
    instance_profile_name,
    resolve_status,
)
from karpy_aws.apis import EC2NodeClass


async def test_a_node_class_resolves_and_is_ready(
    aws_clients: AWSClients, aws_account: Account
) -> None:
    node_class = await resolved(aws_clients, node_class_manifest("resolve-ok"))
    status = node_class.status
    assert {s.id for s in status.subnets} == set(aws_account.subnets)
    assert {s.zone for s in status.subnets} == set(aws_account.subnets.values())
    assert all(s.zone_id for s in status.subnets)
    assert [g.id for g in status.security_groups] == [aws_account.security_group]
    assert {a.id for a in status.amis} == set(aws_account.amis.values())
    arches = {a.id: a.requirements[0].values for a in status.amis}
    assert arches[aws_account.amis["arm64"]] == ["arm64"]
    assert status.instance_profile == instance_profile_name(CLUSTER, REGION, "resolve-ok")
    assert node_class.status_conditions().is_true("Ready")
    profile = (
        await aws_clients.iam.get_instance_profile(InstanceProfileName=status.instance_profile)
    )["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]
    # resolving again adopts the same profile
    again = await resolved(aws_clients, node_class_manifest("resolve-ok"))
    assert again.status.instance_profile == status.instance_profile
    await delete_instance_profile(aws_clients, node_class, cluster_name=CLUSTER, region=REGION)
    await delete_instance_profile(aws_clients, node_class, cluster_name=CLUSTER, region=REGION)
    with pytest.raises(Exception, match="NoSuchEntity"):
        await aws_clients.iam.get_instance_profile(InstanceProfileName=status.instance_profile)


async def test_what_was_not_found_is_named(aws_clients: AWSClients) -> None:
    manifest = node_class_manifest(
        "resolve-bad",
        subnetSelectorTerms=[{"tags": {"team": "nobody"}}],
        securityGroupSelectorTerms=[{"name": "no-such-group"}],
        amiSelectorTerms=[{"alias": "bottlerocket@latest"}],
        role="NoSuchRole",
    )
    node_class = EC2NodeClass.model_validate(manifest)
    resolution = await resolve_status(
        aws_clients, node_class, cluster_name=CLUSTER, region=REGION, k8s_version=K8S_VERSION
    )
    assert not resolution.ready
    reasons = {k: (r, m) for k, (ok, r, m) in resolution.conditions.items() if not ok}
    assert reasons["SubnetsReady"][0] == "SubnetsNotFound"
    assert "nobody" in reasons["SubnetsReady"][1]
    assert reasons["SecurityGroupsReady"][0] == "SecurityGroupsNotFound"
    assert "no-such-group" in reasons["SecurityGroupsReady"][1]
    assert reasons["AMIsReady"][0] == "AMINotFound"
    assert "bottlerocket@latest" in reasons["AMIsReady"][1]
    assert reasons["InstanceProfileReady"][0] == "RoleNotFound"
    assert "NoSuchRole" in reasons["InstanceProfileReady"][1]


async def test_security_groups_by_id_and_amis_by_id(
    aws_clients: AWSClients, aws_account: Account
) -> None:
    node_class = await resolved(
        aws_clients,
        node_class_manifest(
            "resolve-ids",
            securityGroupSelectorTerms=[{"id": aws_account.security_group}],
            amiSelectorTerms=[{"id": aws_account.amis["x86_64"]}],
            amiFamily="AL2023",
        ),
    )
    assert [g.id for g in node_class.status.security_groups] == [aws_account.security_group]
    assert [a.id for a in node_class.status.amis] == [aws_account.amis["x86_64"]]
    await delete_instance_profile(aws_clients, node_class, cluster_name=CLUSTER, region=REGION)


def test_alias_parameters_follow_the_eks_paths() -> None:
    params = alias_parameters("al2023@latest", "1.31")
    assert (
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id"
        in params
    )
    pinned = alias_parameters("al2023@v20240807", "1.31")
    assert any("amazon-eks-node-al2023-x86_64-standard-1.31-v20240807" in p for p in pinned)
    assert "/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.20.0/image_id" in alias_parameters(
        "bottlerocket@v1.20.0", "1.31"
    )
    with pytest.raises(ValueError, match="windows2022"):
        alias_parameters("windows2022@latest", "1.31")
