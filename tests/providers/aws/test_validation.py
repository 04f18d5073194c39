"""The EC2NodeClass's ValidationSucceeded condition (karpy_aws._validation): dry runs
under Karpenter's IAM policy, enforced at moto. A class the controller may launch with
validates without launching anything; one whose launch the policy refuses goes not
Ready, naming the refused action."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest
from conftest import CLUSTER, K8S_VERSION, REGION, node_class_manifest
from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._resolve import Resolution, resolve_status
from karpy_aws.apis import EC2NodeClass
from moto_harness import Account


def running(account: Account) -> int:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=account.url)
    reservations = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    return sum(len(r["Instances"]) for r in reservations)


async def validate(
    settings: AWSSettings, clients: AWSClients, manifest: dict[str, Any]
) -> tuple[AWSCloudProvider, Resolution]:
    cloud = AWSCloudProvider(
        settings=settings, clients=clients, node_classes=lambda _: _none(), owns_clients=False
    )
    resolution = await resolve_status(
        clients,
        EC2NodeClass.model_validate(manifest),
        cluster_name=CLUSTER,
        region=REGION,
        k8s_version=K8S_VERSION,
        validate=cloud.validation,
    )
    return cloud, resolution


async def _none() -> None:
    return None


def without(check: IAMCheck, sid: str) -> list[dict[str, Any]]:
    kept = [s for s in check.statements if not str(s["Sid"]).endswith(f"/{sid}")]
    assert len(kept) == len(check.statements) - 1
    return kept


async def test_a_launchable_class_validates_by_dry_runs_without_launching(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account, iam_check: IAMCheck
) -> None:
    before = running(aws_account)
    fleets = iam_check.allowed["ec2:CreateFleet"]
    runs = iam_check.allowed["ec2:RunInstances"]
    name = f"valid-{uuid.uuid4().hex[:6]}"
    cloud, resolution = await validate(aws_settings, aws_clients, node_class_manifest(name))
    assert resolution.conditions["ValidationSucceeded"] == (True, "", "")
    assert resolution.ready
    # both dry runs reached AWS (and the policy) and launched nothing
    assert iam_check.allowed["ec2:CreateFleet"] == fleets + 1
    assert iam_check.allowed["ec2:RunInstances"] == runs + 1
    assert running(aws_account) == before
    # the verdict is kept: the minute refresh does not repeat the calls
    calls = sum(aws_clients.calls[c] for c in ("ec2:CreateFleet", "ec2:RunInstances"))
    again = await resolve_status(
        aws_clients,
        EC2NodeClass.model_validate(node_class_manifest(name)),
        cluster_name=CLUSTER,
        region=REGION,
        k8s_version=K8S_VERSION,
        validate=cloud.validation,
    )
    assert again.conditions["ValidationSucceeded"] == (True, "", "")
    assert calls == sum(aws_clients.calls[c] for c in ("ec2:CreateFleet", "ec2:RunInstances"))
    await cloud.launch_templates.delete_for_node_class(name)


@pytest.mark.parametrize(
    ("dropped", "reason", "action"),
    [
        (
            "AllowScopedEC2InstanceActionsWithTags",
            "CreateLaunchTemplateAuthCheckFailed",
            "ec2:CreateLaunchTemplate",
        ),
        (
            "AllowScopedEC2LaunchTemplateAccessActions",
            "CreateFleetAuthCheckFailed",
            "ec2:CreateFleet",
        ),
    ],
)
async def test_a_class_the_policy_will_not_launch_is_not_validated(
    aws_settings: AWSSettings,
    aws_clients: AWSClients,
    iam_check: IAMCheck,
    dropped: str,
    reason: str,
    action: str,
) -> None:
    name = f"unauthorized-{uuid.uuid4().hex[:6]}"
    with iam_check.policy(without(iam_check, dropped)), iam_check.expecting_denials() as denials:
        cloud, resolution = await validate(aws_settings, aws_clients, node_class_manifest(name))
    ok, got_reason, message = resolution.conditions["ValidationSucceeded"]
    assert (ok, got_reason) == (False, reason)
    assert f"Controller isn't authorized to call {action}" in message
    assert "UnauthorizedOperation" not in message and "not authorized to perform" in message
    assert not resolution.ready
    assert denials and denials[0].call == action
    await cloud.launch_templates.delete_for_node_class(name)


async def test_validation_waits_for_the_other_conditions(
    aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    manifest = node_class_manifest("unresolved", subnetSelectorTerms=[{"tags": {"no": "such"}}])
    _, resolution = await validate(aws_settings, aws_clients, manifest)
    ok, reason, _ = resolution.conditions["ValidationSucceeded"]
    assert (ok, reason) == (False, "DependenciesNotReady")


async def test_a_field_the_sdk_cannot_send_makes_the_class_not_ready_naming_it(
    aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    # cpuOptions.nestedVirtualization needs an EC2 model with
    # LaunchTemplateCpuOptionsRequest.NestedVirtualization: without it every launch would
    # fail, so the class's status says so (and the status is still written).
    members = aws_clients.ec2.meta.service_model.shape_for(
        "LaunchTemplateCpuOptionsRequest").members
    manifest = node_class_manifest(f"nested-{uuid.uuid4().hex[:6]}")
    manifest["spec"]["cpuOptions"] = {"nestedVirtualization": "enabled"}
    _, resolution = await validate(aws_settings, aws_clients, manifest)
    status, reason, message = resolution.conditions["ValidationSucceeded"]
    if "NestedVirtualization" in members:
        assert (status, reason) == (True, "")
    else:
        assert (status, reason) == (False, "UnsupportedConfiguration")
        assert "spec.cpuOptions.nestedVirtualization" in message
        assert not resolution.ready
