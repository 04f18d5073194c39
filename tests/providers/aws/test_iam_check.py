"""The IAM check at the moto server (iam_check.py) bites: karpy's calls that Karpenter's
controller policy refuses are refused as AWS refuses them and recorded with the
statements considered; the tests' own calls are not judged; dry runs are answered."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from iam_check import IAMCheck
from karpy_aws._clients import AWSClients
from karpy_aws._instances import nodepool_tags
from moto_harness import CLUSTER, Account

REGION = "us-east-1"


def own(service: str, account: Account) -> Any:
    """A client of the test's own (not karpy's: its calls are not judged)."""
    return boto3.client(service, region_name=REGION, endpoint_url=account.url)


def code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response: Any = exc.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


async def test_karpy_calls_are_judged_and_the_tests_own_are_not(
    aws_account: Account, aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    # the policy grants no DescribeAvailabilityZones: karpy must never need it
    with iam_check.expecting_denials() as denials, pytest.raises(ClientError) as refused:
        await aws_clients.ec2.describe_availability_zones()
    assert code(refused) == ("UnauthorizedOperation", 403)
    (denial,) = denials
    assert denial.call == "ec2:DescribeAvailabilityZones"
    assert "no statement of the policy names this action" in denial.explain()
    assert own("ec2", aws_account).describe_availability_zones()["AvailabilityZones"]
    before = iam_check.allowed["ec2:DescribeSubnets"]
    await aws_clients.ec2.describe_subnets()
    assert iam_check.allowed["ec2:DescribeSubnets"] == before + 1


async def test_a_template_without_the_nodepool_tag_can_be_neither_launched_from_nor_deleted(
    aws_account: Account, aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    tags = nodepool_tags(CLUSTER, "iam-pool", "iam-class", {})
    untagged = {k: v for k, v in tags.items() if k != "karpenter.sh/nodepool"}
    name = f"iam-check-{uuid.uuid4().hex[:8]}"
    ec2 = own("ec2", aws_account)
    data = {
        "ImageId": aws_account.amis["x86_64"],
        "SecurityGroupIds": [aws_account.security_group],
        "TagSpecifications": [{"ResourceType": "network-interface", "Tags": tag_list(tags)}],
    }
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tag_list(untagged)}],
    )
    subnet = next(iter(aws_account.subnets))
    fleet: dict[str, Any] = {
        "DryRun": True,
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": [{"InstanceType": "m5.large", "SubnetId": subnet}],
            }
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tag_list(tags)}
            for kind in ("instance", "volume", "fleet")
        ],
    }
    with iam_check.expecting_denials() as denials:
        with pytest.raises(ClientError) as refused:
            await aws_clients.ec2.create_fleet(**fleet)
        assert code(refused) == ("UnauthorizedOperation", 403)
        with pytest.raises(ClientError) as refused:
            await aws_clients.ec2.delete_launch_template(LaunchTemplateName=name)
        assert code(refused) == ("UnauthorizedOperation", 403)
    launch, delete = denials
    assert "launch-template/lt-" in launch.explain()
    assert "AllowScopedEC2LaunchTemplateAccessActions" in launch.explain()
    assert "aws:ResourceTag/karpenter.sh/nodepool" in launch.explain()
    assert "AllowScopedDeletion" in delete.explain()
    # tagged as karpy tags its templates, the same calls pass: the dry run is answered
    # DryRunOperation (nothing launched) and the delete goes through
    template = ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"][0]
    ec2.create_tags(Resources=[template["LaunchTemplateId"]], Tags=tag_list(tags))
    with pytest.raises(ClientError) as dry:
        await aws_clients.ec2.create_fleet(**fleet)
    assert code(dry) == ("DryRunOperation", 412)
    await aws_clients.ec2.delete_launch_template(LaunchTemplateName=name)


async def test_a_launch_creating_untagged_network_interfaces_is_refused(
    aws_account: Account, aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    tags = nodepool_tags(CLUSTER, "iam-pool", "iam-class", {})
    name = f"iam-check-{uuid.uuid4().hex[:8]}"
    ec2 = own("ec2", aws_account)
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": aws_account.amis["x86_64"]},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tag_list(tags)}],
    )
    with iam_check.expecting_denials() as denials, pytest.raises(ClientError):
        await aws_clients.ec2.run_instances(
            DryRun=True,
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            LaunchTemplate={"LaunchTemplateName": name, "Version": "$Latest"},
            TagSpecifications=[
                {"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("instance", "volume")
            ],
        )
    (denial,) = denials
    assert "network-interface/*: DENIED" in denial.explain()
    ec2.delete_launch_template(LaunchTemplateName=name)


async def test_an_instance_profile_needs_every_tag_the_policy_names(
    aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    tags = {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "karpenter.k8s.aws/ec2nodeclass": "x",
        "topology.kubernetes.io/region": REGION,
    }
    with iam_check.expecting_denials() as denials, pytest.raises(ClientError) as refused:
        await aws_clients.iam.create_instance_profile(
            InstanceProfileName=f"iam-check-{uuid.uuid4().hex[:8]}", Tags=tag_list(tags)
        )
    assert code(refused) == ("AccessDenied", 403)
    (denial,) = denials
    assert "aws:RequestTag/eks:eks-cluster-name" in denial.explain()


async def test_ssm_reads_are_limited_to_public_parameters(
    aws_clients: AWSClients, iam_check: IAMCheck
) -> None:
    public = f"/aws/service/eks/optimized-ami/{'1.31'}/amazon-linux-2023/x86_64/standard/"
    answer = await aws_clients.ssm.get_parameter(Name=public + "recommended/image_id")
    assert answer["Parameter"]["Value"].startswith("ami-")
    with iam_check.expecting_denials() as denials, pytest.raises(ClientError) as refused:
        await aws_clients.ssm.get_parameter(Name="/my-team/ami")
    assert code(refused)[0] == "AccessDeniedException"
    assert "parameter/my-team/ami" in denials[0].explain()
