"""Karpenter AWS's options that its chart passes (settings.disableDryRun,
amiRefreshInterval, subnetRefreshInterval, eksControlPlane), honoured by karpy-aws on
moto under Karpenter's IAM policy."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import boto3
from conftest import CLUSTER, DISCOVERY, K8S_VERSION, REGION, node_class_manifest
from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._kinds import EC2_NODE_CLASS_KIND
from karpy_aws._nodeclass_status import NodeClassStatusController
from karpy_aws._nodeclasses import node_classes_from
from karpy_aws._refresh import ResolutionCaches
from karpy_aws._resolve import resolve_status
from karpy_aws.apis import EC2NodeClass
from moto_harness import Account

from karpy.runtime import Request
from karpy.runtime.testing import FakeClient, FakeClock


async def _none() -> None:
    return None


def _provider(settings: AWSSettings, clients: AWSClients, **kw: Any) -> AWSCloudProvider:
    return AWSCloudProvider(
        settings=settings, clients=clients, node_classes=lambda _: _none(), owns_clients=False, **kw
    )


async def test_disable_dry_run_validates_without_any_dry_run(
    aws_settings: AWSSettings, aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    """DISABLE_DRY_RUN=true: ValidationSucceeded is True although the policy would refuse
    the launch calls, and none of them is made (Karpenter AWS's DryRunDisabled path)."""
    cloud = _provider(dataclasses.replace(aws_settings, disable_dry_run=True), aws_clients)
    checks = ("ec2:CreateLaunchTemplate", "ec2:CreateFleet", "ec2:RunInstances")
    before = {c: aws_clients.calls[c] for c in checks}
    refusing = [
        s
        for s in iam_check.statements
        if not str(s["Sid"]).endswith("/AllowScopedEC2InstanceActionsWithTags")
    ]
    with iam_check.policy(refusing):
        resolution = await resolve_status(
            aws_clients,
            EC2NodeClass.model_validate(node_class_manifest(f"nodry-{uuid.uuid4().hex[:6]}")),
            cluster_name=CLUSTER,
            region=REGION,
            k8s_version=K8S_VERSION,
            validate=cloud.validation,
        )
    assert resolution.conditions["ValidationSucceeded"] == (True, "", "")
    assert resolution.ready
    assert {c: aws_clients.calls[c] for c in checks} == before
    # the dependencies still gate it, as upstream
    unresolved = await resolve_status(
        aws_clients,
        EC2NodeClass.model_validate(
            node_class_manifest("nodry-unresolved", subnetSelectorTerms=[{"tags": {"no": "x"}}])
        ),
        cluster_name=CLUSTER,
        region=REGION,
        k8s_version=K8S_VERSION,
        validate=cloud.validation,
    )
    assert unresolved.conditions["ValidationSucceeded"][:2] == (False, "DependenciesNotReady")


async def _subnets(
    clients: AWSClients, caches: ResolutionCaches, manifest: dict[str, Any]
) -> set[str]:
    resolution = await resolve_status(
        clients,
        EC2NodeClass.model_validate(manifest),
        cluster_name=CLUSTER,
        region=REGION,
        k8s_version=K8S_VERSION,
        caches=caches,
    )
    return {s.id for s in resolution.status.subnets}


async def test_subnet_refresh_interval_is_how_long_a_new_subnet_goes_unseen(
    aws_clients: AWSClients, aws_account: Account
) -> None:
    """SUBNET_REFRESH_INTERVAL=5m: a subnet tagged for discovery shows in the status only
    once the interval has passed since the last DescribeSubnets; a changed selector is
    asked at once."""
    clock = FakeClock()
    caches = ResolutionCaches(ami_ttl=60.0, subnet_ttl=300.0, clock=clock)
    tag = {"karpy-refresh": uuid.uuid4().hex[:8]}
    manifest = node_class_manifest("refresh", subnetSelectorTerms=[{"tags": tag}])
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=aws_account.url)
    vpc = ec2.describe_subnets(SubnetIds=[next(iter(aws_account.subnets))])["Subnets"][0]["VpcId"]
    # the default VPC (172.31.0.0/16) has its default subnets below 172.31.96.0
    octet = int(tag["karpy-refresh"], 16) % 120 + 128
    subnets = [
        ec2.create_subnet(
            VpcId=vpc, CidrBlock=f"172.31.{octet + i}.0/24", AvailabilityZone=f"{REGION}a"
        )["Subnet"]["SubnetId"]
        for i in range(2)
    ]
    ec2.create_tags(Resources=[subnets[0]], Tags=[{"Key": k, "Value": v} for k, v in tag.items()])
    try:
        assert await _subnets(aws_clients, caches, manifest) == {subnets[0]}
        ec2.create_tags(
            Resources=[subnets[1]], Tags=[{"Key": k, "Value": v} for k, v in tag.items()]
        )
        calls = aws_clients.calls["ec2:DescribeSubnets"]
        clock.advance(299)
        assert await _subnets(aws_clients, caches, manifest) == {subnets[0]}
        assert aws_clients.calls["ec2:DescribeSubnets"] == calls
        other = node_class_manifest(
            "refresh", subnetSelectorTerms=[{"tags": tag}, {"tags": DISCOVERY}]
        )
        assert {subnets[0], subnets[1]} <= await _subnets(aws_clients, caches, other)
        clock.advance(2)
        assert await _subnets(aws_clients, caches, manifest) == set(subnets)
    finally:
        for subnet in subnets:
            ec2.delete_subnet(SubnetId=subnet)


async def test_ami_refresh_interval_keeps_resolved_amis(
    aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    """AMI_REFRESH_INTERVAL: the provider's status resolution asks SSM and
    DescribeImages once per interval for an unchanged alias."""
    clock = FakeClock()
    settings = dataclasses.replace(aws_settings, ami_refresh_interval=600.0)
    cloud = _provider(settings, aws_clients)
    assert cloud.resolution_caches.amis.ttl == 600.0
    caches = ResolutionCaches(ami_ttl=settings.ami_refresh_interval, subnet_ttl=60.0, clock=clock)
    node_class = EC2NodeClass.model_validate(node_class_manifest("ami-refresh"))

    async def amis() -> list[str]:
        resolution = await resolve_status(
            aws_clients,
            node_class,
            cluster_name=CLUSTER,
            region=REGION,
            k8s_version=K8S_VERSION,
            caches=caches,
        )
        return [a.id for a in resolution.status.amis]

    first = await amis()
    assert first
    asked = aws_clients.calls["ec2:DescribeImages"], aws_clients.calls["ssm:GetParameter"]
    clock.advance(599)
    assert await amis() == first
    assert (aws_clients.calls["ec2:DescribeImages"], aws_clients.calls["ssm:GetParameter"]) == asked
    clock.advance(2)
    assert await amis() == first
    assert aws_clients.calls["ec2:DescribeImages"] > asked[0]


async def test_eks_control_plane_takes_the_version_from_describe_cluster(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account, iam_check: IAMCheck
) -> None:
    """EKS_CONTROL_PLANE=true: the Kubernetes version that picks the alias's AMIs is EKS
    DescribeCluster's, and the API server is not asked (this fake client has none)."""
    eks = boto3.client("eks", region_name=REGION, endpoint_url=aws_account.url)
    name = "karpy-eks-version"
    if name not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name=name,
            version=K8S_VERSION,
            roleArn="arn:aws:iam::123456789012:role/c",
            resourcesVpcConfig={"subnetIds": list(aws_account.subnets)},
        )
    client = FakeClient()
    client.add(EC2_NODE_CLASS_KIND, node_class_manifest("eks-version"))
    settings = dataclasses.replace(aws_settings, cluster_name=name, eks_control_plane=True)
    provider = AWSCloudProvider(
        settings=settings,
        clients=aws_clients,
        node_classes=node_classes_from(client),
        owns_clients=False,
    )
    controller = NodeClassStatusController(provider, client)
    policy = [
        *IAMCheck.karpenter(cluster=name, region=REGION).statements,
        *IAMCheck.karpenter(cluster=CLUSTER, region=REGION).statements,
    ]
    with iam_check.policy(policy):
        await controller.reconcile(Request("", "eks-version"))
    stored = client.peek(EC2_NODE_CLASS_KIND, "eks-version")
    assert stored is not None
    by_type = {c["type"]: c for c in stored["status"]["conditions"]}
    assert by_type["AMIsReady"]["status"] == "True"
    assert {a["id"] for a in stored["status"]["amis"]} == set(aws_account.amis.values())


async def test_security_group_refresh_interval_keeps_resolved_security_groups(
    aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    """SECURITY_GROUP_REFRESH_INTERVAL (Karpenter AWS v1.15.2): the provider's status
    resolution asks DescribeSecurityGroups once per interval for unchanged selector terms,
    and at once for changed ones."""
    clock = FakeClock()
    settings = dataclasses.replace(aws_settings, security_group_refresh_interval=300.0)
    cloud = _provider(settings, aws_clients)
    assert cloud.resolution_caches.security_groups.ttl == 300.0
    caches = ResolutionCaches(
        ami_ttl=60.0, subnet_ttl=60.0, security_group_ttl=300.0, clock=clock
    )

    async def groups(manifest: dict[str, Any]) -> set[str]:
        resolution = await resolve_status(
            aws_clients,
            EC2NodeClass.model_validate(manifest),
            cluster_name=CLUSTER,
            region=REGION,
            k8s_version=K8S_VERSION,
            caches=caches,
        )
        return {g.id for g in resolution.status.security_groups}

    manifest = node_class_manifest("sg-refresh")
    first = await groups(manifest)
    assert first
    asked = aws_clients.calls["ec2:DescribeSecurityGroups"]
    clock.advance(299)
    assert await groups(manifest) == first
    assert aws_clients.calls["ec2:DescribeSecurityGroups"] == asked
    (group,) = sorted(first)[:1]
    by_id = node_class_manifest("sg-refresh", securityGroupSelectorTerms=[{"id": group}])
    assert await groups(by_id) == {group}
    assert aws_clients.calls["ec2:DescribeSecurityGroups"] > asked
    asked = aws_clients.calls["ec2:DescribeSecurityGroups"]
    clock.advance(2)
    assert await groups(manifest) == first
    assert aws_clients.calls["ec2:DescribeSecurityGroups"] > asked
