"""``LOG_LEVEL=debug`` logs karpy's debug lines and not the SDK's: botocore at debug
writes every request's parameters (the launch template's user data) and the signed
headers (the access key id). A launch against moto with karpy's logging set up as
``karpy run`` sets it up must log neither, unless ``SDK_LOG_LEVEL`` asks for it."""

from __future__ import annotations

import base64
import io
import logging
import os
from collections.abc import Iterator

import boto3
import pytest
from conftest import node_class_manifest, resolved
from karpy_aws import AWSCloudProvider
from karpy_aws._clients import AWSClients
from karpy_aws._instances import instance_id
from karpy_aws.apis import EC2NodeClass

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cli._logs import configure_command_logging, karpy_loggers
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

MARKER = "echo karpy-debug-log-marker"
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in karpy_loggers()}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)


async def _launch_logged(
    aws_provider: AWSCloudProvider, aws_clients: AWSClients, name: str, sdk_level: str | None
) -> tuple[str, list[str]]:
    """Launch one instance from a new EC2NodeClass ``name`` (so launch templates are
    created) with debug logging; return (the log, the templates' user data)."""
    node_class = await resolved(aws_clients, node_class_manifest(name, userData=MARKER))
    provider = AWSCloudProvider(
        settings=aws_provider.settings,
        clients=aws_clients,
        node_classes=lambda _: _found(node_class),
        owns_clients=False,
    )
    stream = io.StringIO()
    configure_command_logging("debug", sdk_level=sdk_level, stream=stream)
    logging.getLogger("karpy_aws.test").debug("karpy's own debug line")
    ref = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name=name)
    pool = make_nodepool(ref, name=name)
    launched = await provider.create(
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    )
    logging.getLogger().handlers.clear()
    ec2 = boto3.client(
        "ec2", region_name=provider.settings.region, endpoint_url=provider.settings.endpoint_url
    )
    ec2.terminate_instances(InstanceIds=[instance_id(launched.status.provider_id or "")])
    # The template made for this EC2NodeClass: the one whose user data has its marker.
    templates = ec2.describe_launch_templates()["LaunchTemplates"]
    user_data = [
        data
        for template in templates
        for version in ec2.describe_launch_template_versions(
            LaunchTemplateId=template["LaunchTemplateId"]
        )["LaunchTemplateVersions"]
        if (data := version["LaunchTemplateData"].get("UserData", ""))
        and name.encode() in base64.b64decode(data)
    ]
    return stream.getvalue(), user_data


async def _found(node_class: EC2NodeClass) -> EC2NodeClass | None:
    return node_class


@pytest.mark.usefixtures("restore_logging")
async def test_debug_logs_karpys_lines_and_no_user_data_or_access_key(
    aws_provider: AWSCloudProvider, aws_clients: AWSClients
) -> None:
    log, user_data = await _launch_logged(aws_provider, aws_clients, "logged-quiet", None)
    assert "karpy's own debug line" in log
    for data in user_data:
        assert MARKER in base64.b64decode(data).decode()
        assert data not in log
    assert MARKER not in log
    assert f"Credential={os.environ['AWS_ACCESS_KEY_ID']}/" not in log


@pytest.mark.usefixtures("restore_logging")
async def test_sdk_log_level_debug_is_what_brings_the_sdk_lines_back(
    aws_provider: AWSCloudProvider, aws_clients: AWSClients
) -> None:
    # The same launch with the SDK asked for explicitly: the log has what the first
    # test says is missing, so that test is looking in the right place.
    log, user_data = await _launch_logged(aws_provider, aws_clients, "logged-loud", "debug")
    assert all(data in log for data in user_data)
    assert f"Credential={os.environ['AWS_ACCESS_KEY_ID']}/" in log
