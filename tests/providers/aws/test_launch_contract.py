"""What a launch leaves in the account, read back from moto: the launch template carries
the tags Karpenter's IAM policy requires and pins instance-metadata tags off; its network
interfaces are tagged from it; the instance profile carries its four tags; an
``ssmParameter`` AMI term launches exactly the AMI the parameter names."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from conftest import CLUSTER, REGION, node_class_manifest, resolved
from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._instances import instance_id
from karpy_aws.apis import EC2NodeClass
from moto_harness import Account

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
SPOT = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
SMALL = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
OWNED = f"kubernetes.io/cluster/{CLUSTER}"


def own(service: str, account: Account) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=account.url)


def tags_of(items: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def provider(
    settings: AWSSettings, clients: AWSClients, classes: dict[str, EC2NodeClass]
) -> AWSCloudProvider:
    async def get(name: str) -> EC2NodeClass | None:
        return classes.get(name)

    return AWSCloudProvider(
        settings=settings, clients=clients, node_classes=get, owns_clients=False
    )


async def launch(
    cloud: AWSCloudProvider, node_class: EC2NodeClass, pool: str, *requirements: Any
) -> Any:
    ref = NodeClassReference(
        group="karpenter.k8s.aws", kind="EC2NodeClass", name=node_class.metadata.name or ""
    )
    claim = make_nodeclaim(
        make_nodepool(ref, name=pool), requests={"cpu": "1"}, requirements=list(requirements)
    )
    return await cloud.create(claim)


async def test_the_launch_template_and_its_interfaces_carry_the_policys_tags(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account
) -> None:
    name = f"tags-{uuid.uuid4().hex[:6]}"
    node_class = await resolved(aws_clients, node_class_manifest(name, tags={"team": "ml"}))
    cloud = provider(aws_settings, aws_clients, {name: node_class})
    ec2 = own("ec2", aws_account)
    for pool, capacity in (("lt-od", ON_DEMAND), ("lt-spot", SPOT)):
        launched = await launch(cloud, node_class, pool, capacity, SMALL)
        try:
            (template,) = ec2.describe_launch_templates(
                Filters=[
                    {"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": [name]},
                    {"Name": "tag:karpenter.sh/nodepool", "Values": [pool]},
                ]
            )["LaunchTemplates"]
            assert tags_of(template["Tags"]) == {
                OWNED: "owned",
                "eks:eks-cluster-name": CLUSTER,
                "karpenter.sh/nodepool": pool,
                "karpenter.k8s.aws/ec2nodeclass": name,
                "karpenter.k8s.aws/cluster": CLUSTER,
                "team": "ml",
            }
            (version,) = ec2.describe_launch_template_versions(
                LaunchTemplateId=template["LaunchTemplateId"]
            )["LaunchTemplateVersions"]
            data = version["LaunchTemplateData"]
            assert data["MetadataOptions"]["InstanceMetadataTags"] == "disabled"
            specs = {s["ResourceType"]: tags_of(s["Tags"]) for s in data["TagSpecifications"]}
            specs.pop("launch-template")  # moto copies the template's own tags into its data
            expected = ["network-interface"] + (
                ["spot-instances-request"] if pool == "lt-spot" else []
            )
            assert sorted(specs) == sorted(expected)
            for tags in specs.values():
                assert tags[OWNED] == "owned" and tags["karpenter.sh/nodepool"] == pool
            instance = ec2.describe_instances(
                InstanceIds=[instance_id(launched.status.provider_id or "")]
            )["Reservations"][0]["Instances"][0]
            assert tags_of(instance["Tags"])["team"] == "ml"
        finally:
            await cloud.delete(launched)
    # and the class's templates can be deleted under the policy (its deletion, and GC)
    assert len(await cloud.launch_templates.delete_for_node_class(name)) == 2


async def test_the_instance_profile_carries_its_four_tags(
    aws_clients: AWSClients, aws_account: Account
) -> None:
    name = f"profile-{uuid.uuid4().hex[:6]}"
    node_class = await resolved(aws_clients, node_class_manifest(name, tags={"team": "ml"}))
    profile = own("iam", aws_account).get_instance_profile(
        InstanceProfileName=node_class.status.instance_profile
    )["InstanceProfile"]
    assert tags_of(profile["Tags"]) == {
        OWNED: "owned",
        "eks:eks-cluster-name": CLUSTER,
        "karpenter.k8s.aws/ec2nodeclass": name,
        "topology.kubernetes.io/region": REGION,
        "team": "ml",
    }


async def test_an_ssm_parameter_term_launches_exactly_the_parameters_ami(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account, iam_check: IAMCheck
) -> None:
    ec2 = own("ec2", aws_account)
    images = sorted(
        ec2.describe_images(
            Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}]
        )["Images"],
        key=lambda i: i.get("CreationDate", ""),
    )
    # neither the newest image (what an unfiltered DescribeImages would pick) nor the alias'
    chosen = next(
        i["ImageId"] for i in images[:-1] if i["ImageId"] not in aws_account.amis.values()
    )
    parameter = f"/karpy-test/{uuid.uuid4().hex[:6]}/node-ami"
    own("ssm", aws_account).put_parameter(Name=parameter, Value=chosen, Type="String")
    # Karpenter's policy reads /aws/service/* only; users grant their own parameter
    grant = {
        "Sid": "AllowNodeAMIParameter",
        "Effect": "Allow",
        "Action": "ssm:GetParameter",
        "Resource": f"arn:aws:ssm:{REGION}:123456789012:parameter{parameter}",
    }
    name = f"ssm-{uuid.uuid4().hex[:6]}"
    manifest = node_class_manifest(
        name, amiSelectorTerms=[{"ssmParameter": parameter}], amiFamily="AL2023"
    )
    with iam_check.policy([*iam_check.statements, grant]):
        node_class = await resolved(aws_clients, manifest)
    assert [a.id for a in node_class.status.amis] == [chosen]
    cloud = provider(aws_settings, aws_clients, {name: node_class})
    launched = await launch(cloud, node_class, "ssm-pool", ON_DEMAND, SMALL)
    try:
        instance = ec2.describe_instances(
            InstanceIds=[instance_id(launched.status.provider_id or "")]
        )["Reservations"][0]["Instances"][0]
        assert instance["ImageId"] == chosen
    finally:
        await cloud.delete(launched)
        await cloud.launch_templates.delete_for_node_class(name)


async def test_a_missing_ssm_parameter_selects_no_ami(aws_clients: AWSClients) -> None:
    manifest = node_class_manifest(
        f"ssm-none-{uuid.uuid4().hex[:6]}",
        amiSelectorTerms=[{"ssmParameter": "/aws/service/karpy-test/no-such-parameter"}],
        amiFamily="AL2023",
    )
    node_class = await resolved(aws_clients, manifest)
    assert node_class.status.amis == []
    assert not node_class.status_conditions().is_true("AMIsReady")


async def test_a_term_with_nothing_to_filter_by_never_lists_every_image(
    aws_clients: AWSClients,
) -> None:
    # the CRD refuses it; a class built in code must not get the newest public image
    manifest = node_class_manifest(
        f"unfiltered-{uuid.uuid4().hex[:6]}",
        amiSelectorTerms=[{"owner": "amazon"}],
        amiFamily="AL2023",
    )
    before = aws_clients.calls["ec2:DescribeImages"]
    node_class = await resolved(aws_clients, manifest)
    assert node_class.status.amis == []
    condition = node_class.status_conditions().get("AMIsReady")
    assert condition is not None and condition.reason == "AMINotFound"
    assert "selects no AMI" in condition.message
    assert aws_clients.calls["ec2:DescribeImages"] == before
