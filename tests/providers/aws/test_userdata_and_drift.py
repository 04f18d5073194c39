"""User data for AL2023 (nodeadm MIME) and Bottlerocket (TOML), and drift detection
against moto instances."""

from __future__ import annotations

import base64
import email
import tomllib

import yaml
from conftest import Account, node_class_manifest, resolved
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._hash import HASH_VERSION, node_class_hash
from karpy_aws._userdata import BootstrapOptions, user_data
from karpy_aws.apis import EC2NodeClass

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

OPTIONS = BootstrapOptions(
    cluster_name="c1",
    cluster_endpoint="https://api.example",
    ca_bundle="Q0E=",
    kubelet={"maxPods": 42, "clusterDNS": []},
    labels={"team": "a", "karpenter.sh/nodepool": "p"},
    taints=[{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
    custom_user_data="#!/bin/bash\necho hi\n",
)


def test_al2023_user_data_is_a_mime_archive_ending_in_the_node_config() -> None:
    text = base64.b64decode(user_data("AL2023", OPTIONS)).decode()
    message = email.message_from_string(text)
    parts = message.get_payload()
    assert isinstance(parts, list) and len(parts) == 2
    assert parts[0].get_content_type() == "text/x-shellscript"
    assert parts[1].get_content_type() == "application/node.eks.aws"
    config = yaml.safe_load(parts[1].get_payload())
    assert config["kind"] == "NodeConfig"
    cluster = config["spec"]["cluster"]
    assert (cluster["name"], cluster["apiServerEndpoint"], cluster["certificateAuthority"]) == (
        "c1",
        "https://api.example",
        "Q0E=",
    )
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["maxPods"] == 42
    assert "clusterDNS" not in kubelet["config"]
    assert kubelet["config"]["registerWithTaints"] == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
    ]
    assert kubelet["flags"] == ["--node-labels=karpenter.sh/nodepool=p,team=a"]


def test_bottlerocket_user_data_is_toml_over_the_users() -> None:
    options = BootstrapOptions(
        cluster_name="c1",
        cluster_endpoint="https://api.example",
        kubelet={"maxPods": 42},
        labels={"team": "a"},
        taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        custom_user_data="[settings.host-containers.admin]\nenabled = true\n",
    )
    parsed = tomllib.loads(base64.b64decode(user_data("Bottlerocket", options)).decode())
    kubernetes = parsed["settings"]["kubernetes"]
    assert kubernetes["cluster-name"] == "c1"
    assert kubernetes["api-server"] == "https://api.example"
    assert kubernetes["max-pods"] == 42
    assert kubernetes["node-labels"] == {"team": "a"}
    assert kubernetes["node-taints"] == {"dedicated": ["gpu:NoSchedule"]}
    assert parsed["settings"]["host-containers"]["admin"]["enabled"] is True


async def test_drift_is_reported_for_the_hash_the_ami_and_the_subnet(
    aws_settings: AWSSettings, aws_clients: AWSClients, aws_account: Account
) -> None:
    classes: dict[str, EC2NodeClass] = {
        "drift": await resolved(aws_clients, node_class_manifest("drift"))
    }

    async def get(name: str) -> EC2NodeClass | None:
        return classes.get(name)

    provider = AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=get, owns_clients=False
    )
    pool = make_nodepool(
        NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="drift")
    )
    claim = make_nodeclaim(
        pool,
        requirements=[{"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
    )
    launched = await provider.create(claim)
    try:
        assert await provider.is_drifted(launched) is None
        original = classes["drift"]

        changed = original.model_copy(deep=True)
        changed.spec.tags = {"team": "b"}
        # Drift compares the hash the nodeclass.hash controller stamps on the class.
        changed.metadata.annotations = {
            "karpenter.k8s.aws/ec2nodeclass-hash": node_class_hash(
                changed, provider.cluster.hash_ca_bundle
            ),
            "karpenter.k8s.aws/ec2nodeclass-hash-version": HASH_VERSION,
        }
        classes["drift"] = changed
        assert await provider.is_drifted(launched) == "NodeClassDrift"

        other_ami = original.model_copy(deep=True)
        other_ami.status.amis = [
            a for a in other_ami.status.amis if a.id != launched.status.image_id
        ]
        classes["drift"] = other_ami
        assert await provider.is_drifted(launched) == "AMIDrift"

        other_subnets = original.model_copy(deep=True)
        zone = launched.metadata.labels[wk.LABEL_ZONE]
        other_subnets.status.subnets = [s for s in other_subnets.status.subnets if s.zone != zone]
        classes["drift"] = other_subnets
        assert await provider.is_drifted(launched) == "SubnetDrift"
    finally:
        await provider.delete(launched)
