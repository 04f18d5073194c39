"""Fixtures of the AWS provider's tests: one moto server per session (see moto_harness.py
for what it fills in), an account seeded the way an EKS cluster's would be (tagged
subnets and security group, the node role, the EKS AMI parameters), and a provider
pointed at it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import boto3
import pytest
import pytest_asyncio
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._resolve import resolve_status
from karpy_aws.apis import EC2NodeClass
from moto_harness import FleetFaults, moto_server, seed_public_parameter

REGION = "us-east-1"
CLUSTER = "karpy-test"
K8S_VERSION = "1.31"
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}
ROLE = f"KarpenterNodeRole-{CLUSTER}"


@dataclass(frozen=True)
class Account:
    """What the seeded account holds."""

    url: str
    faults: FleetFaults
    subnets: dict[str, str]  # subnet id -> zone
    security_group: str
    amis: dict[str, str]  # arch (x86_64, arm64) -> AMI id


@pytest.fixture(scope="session")
def aws_account() -> Iterator[Account]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        os.environ.setdefault(key, value)
    with moto_server() as url, FleetFaults().installed() as faults:
        kw = {"region_name": REGION, "endpoint_url": url}
        ec2 = boto3.client("ec2", **kw)
        subnets = {s["SubnetId"]: s["AvailabilityZone"] for s in ec2.describe_subnets()["Subnets"]}
        # three of the default VPC's subnets are the cluster's
        chosen = dict(sorted(subnets.items(), key=lambda kv: kv[1])[:3])
        ec2.create_tags(
            Resources=list(chosen), Tags=[{"Key": k, "Value": v} for k, v in DISCOVERY.items()]
        )
        vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
        group = ec2.create_security_group(
            GroupName=f"{CLUSTER}-nodes", Description="karpy test nodes", VpcId=vpc
        )["GroupId"]
        ec2.create_tags(
            Resources=[group], Tags=[{"Key": k, "Value": v} for k, v in DISCOVERY.items()]
        )
        boto3.client("iam", **kw).create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
        amis = {}
        for arch in ("x86_64", "arm64"):
            image = ec2.describe_images(
                Owners=["amazon"], Filters=[{"Name": "architecture", "Values": [arch]}]
            )["Images"][0]["ImageId"]
            amis[arch] = image
            seed_public_parameter(
                REGION,
                f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/{arch}/standard/recommended/image_id",
                image,
            )
        yield Account(url=url, faults=faults, subnets=chosen, security_group=group, amis=amis)


@pytest.fixture
def fleet_faults(aws_account: Account) -> Iterator[FleetFaults]:
    """moto's CreateFleet faults, reset after the test."""
    yield aws_account.faults
    aws_account.faults.no_capacity.clear()
    aws_account.faults.throttle_next = 0


@pytest.fixture(scope="session")
def aws_settings(aws_account: Account) -> AWSSettings:
    return AWSSettings(
        cluster_name=CLUSTER,
        region=REGION,
        cluster_endpoint="https://127.0.0.1:6443",
        endpoint_url=aws_account.url,
        isolated_vpc=True,
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aws_clients(aws_settings: AWSSettings) -> AsyncIterator[AWSClients]:
    clients = await AWSClients.open(aws_settings)
    try:
        yield clients
    finally:
        await clients.aclose()


def node_class_manifest(name: str = "default", **spec: object) -> dict[str, object]:
    """An EC2NodeClass as a user writes it (alias AMI, discovery-tag selectors, role)."""
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": DISCOVERY}],
            "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
            "role": ROLE,
            **spec,
        },
    }


async def resolved(clients: AWSClients, manifest: dict[str, object]) -> EC2NodeClass:
    """The EC2NodeClass with its status resolved against moto and Ready set, as the
    status controller would write it."""
    node_class = EC2NodeClass.model_validate(manifest)
    resolution = await resolve_status(
        clients, node_class, cluster_name=CLUSTER, region=REGION, k8s_version=K8S_VERSION
    )
    node_class.status = resolution.status
    conditions = node_class.status_conditions()
    for kind, (ok, reason, message) in resolution.conditions.items():
        if ok:
            conditions.set_true(kind)
        else:
            conditions.set_false(kind, reason, message)
    node_class.status.conditions = list(conditions.list())
    return node_class


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def default_node_class(aws_clients: AWSClients) -> EC2NodeClass:
    return await resolved(aws_clients, node_class_manifest())


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aws_provider(
    aws_settings: AWSSettings, aws_clients: AWSClients, default_node_class: EC2NodeClass
) -> AWSCloudProvider:
    classes = {"default": default_node_class}

    async def get(name: str) -> EC2NodeClass | None:
        return classes.get(name)

    return AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=get, owns_clients=False
    )
