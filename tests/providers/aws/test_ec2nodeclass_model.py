"""The EC2NodeClass model parses Karpenter's v1 manifests, fills its defaults, resolves
the AMI family from an alias and keeps the AWS well-known labels exact."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from karpy_aws.apis import EXTENSION, EC2NodeClass, labels
from pydantic import ValidationError

from karpy.apis.crdgen import generate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "manifests"


def example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return doc


def minimal(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
            "role": "NodeRole",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            **spec,
        },
    }


def test_metadata_options_default_like_karpenter() -> None:
    nodeclass = EC2NodeClass.model_validate(minimal())
    assert nodeclass.spec.metadata_options.model_dump(by_alias=True) == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
    partial = EC2NodeClass.model_validate(minimal(metadataOptions={"httpTokens": "optional"}))
    assert partial.spec.metadata_options.http_tokens == "optional"
    assert partial.spec.metadata_options.http_put_response_hop_limit == 1


@pytest.mark.parametrize(
    ("terms", "family", "expected"),
    [
        ([{"alias": "al2023@latest"}], None, "AL2023"),
        ([{"alias": "bottlerocket@v1.20.0"}], None, "Bottlerocket"),
        ([{"alias": "windows2022@latest"}], None, "Windows2022"),
        ([{"alias": "al2@latest"}], "Custom", "Custom"),
        ([{"id": "ami-0123"}], "AL2", "AL2"),
    ],
)
def test_ami_family_comes_from_the_alias_unless_set(
    terms: list[dict[str, str]], family: str | None, expected: str
) -> None:
    spec: dict[str, Any] = {"amiSelectorTerms": terms}
    if family:
        spec["amiFamily"] = family
    assert EC2NodeClass.model_validate(minimal(**spec)).spec.ami_family_resolved() == expected


def test_alias_parts() -> None:
    term = EC2NodeClass.model_validate(minimal()).spec.ami_selector_terms[0]
    assert (term.alias_family, term.alias_version) == ("Bottlerocket", "latest")


def test_aws_spellings_of_ids_round_trip() -> None:
    doc = example("ec2nodeclass-alias.yaml")
    nodeclass = EC2NodeClass.model_validate(doc)
    out = nodeclass.to_dict()
    assert out["spec"]["kubelet"]["clusterDNS"] == ["10.0.1.100"]
    assert out["spec"]["kubelet"]["cpuCFSQuota"] is True
    assert out["spec"]["blockDeviceMappings"][0]["ebs"]["kmsKeyID"].startswith("arn:aws:kms")
    assert out["spec"]["blockDeviceMappings"][1]["ebs"]["snapshotID"].startswith("snap-")
    assert out["spec"]["capacityReservationSelectorTerms"][0]["ownerID"] == "123456789012"
    assert out["spec"]["associatePublicIPAddress"] is False
    assert EC2NodeClass.model_validate(out) == nodeclass


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amiFamily": "Ubuntu"}, "spec.amiFamily"),
        ({"metadataOptions": {"httpPutResponseHopLimit": 0}}, "httpPutResponseHopLimit"),
        ({"subnetSelectorTerms": [{"id": "vpc-123"}]}, "spec.subnetSelectorTerms.0.id"),
        ({"blockDeviceMappings": [{"ebs": {"volumeSize": "70000Gi"}}]}, "ebs.volumeSize"),
        ({"kubelet": {"imageGCHighThresholdPercent": 101}}, "kubelet.imageGCHighThresholdPercent"),
        ({"instanceStorePolicy": "RAID5"}, "spec.instanceStorePolicy"),
    ],
)
def test_invalid_fields_fail_to_parse_naming_them(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        EC2NodeClass.model_validate(minimal(**change))
    assert field in str(err.value)


def test_status_conditions_summarise_readiness() -> None:
    nodeclass = EC2NodeClass.model_validate(minimal())
    now = datetime(2024, 5, 1, tzinfo=UTC)
    conditions = nodeclass.status_conditions(now=lambda: now)
    for t in (
        "AMIsReady",
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "PlacementGroupReady",
    ):
        conditions.set_true(t)
    assert not conditions.is_true("Ready")
    change = conditions.set_true("ValidationSucceeded")
    assert conditions.is_true("Ready")
    assert change.events[-1].event_message.endswith("Status: Unknown -> True, Reason: Ready")


def test_labels_are_karpenters() -> None:
    assert labels.LABEL_INSTANCE_FAMILY == "karpenter.k8s.aws/instance-family"
    assert labels.LABEL_INSTANCE_CPU == "karpenter.k8s.aws/instance-cpu"
    assert labels.LABEL_INSTANCE_GPU_COUNT == "karpenter.k8s.aws/instance-gpu-count"
    assert labels.LABEL_NODECLASS == "karpenter.k8s.aws/ec2nodeclass"
    assert labels.LABEL_TOPOLOGY_ZONE_ID == "topology.k8s.aws/zone-id"
    assert all(k.startswith("karpenter.k8s.aws/") for k in labels.WELL_KNOWN_LABELS)


def test_extension_contributes_the_crd_and_the_label_rules() -> None:
    crds = generate(provider="aws")
    assert "karpenter.k8s.aws_ec2nodeclasses.yaml" in crds
    assert 'label domain "karpenter.k8s.aws" is restricted' in crds["karpenter.sh_nodepools.yaml"]
    # Only AWS's rules: Azure reserves `accelerator`, which AWS users label nodes with.
    assert "karpenter.azure.com" not in crds["karpenter.sh_nodepools.yaml"]
    assert '"accelerator"' not in crds["karpenter.sh_nodepools.yaml"]
    assert EXTENSION.name == "aws"
    assert {(c.api_version, c.kind) for c in EXTENSION.converters} == {
        ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"),
        ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"),
    }
