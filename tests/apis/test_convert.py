"""`karpy convert` turns v1beta1 (and v1alpha5) manifests into v1 ones that the v1
models parse and the API server accepts, and says what it changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from apis_support import MODELS, Created

from karpy.apis.convert import ConversionError, convert_documents, load_documents

INPUTS = Path(__file__).resolve().parent / "convert_inputs"
AWS = ("karpenter.k8s.aws", "EC2NodeClass")


def convert(
    name: str, default: tuple[str, str] | None = AWS
) -> tuple[list[dict[str, Any]], list[str]]:
    result = convert_documents(load_documents([str(INPUTS / name)]), default_nodeclass=default)
    return result.documents, [str(n) for n in result.notes]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind)


def test_v1beta1_nodepool_and_ec2nodeclass() -> None:
    docs, notes = convert("aws-v1beta1.yaml")
    pool = MODELS["NodePool"].model_validate(by_kind(docs, "NodePool"))
    spec: Any = pool.spec  # type: ignore[attr-defined]
    assert spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert spec.disruption.consolidate_after == "0s"
    assert spec.template.spec.expire_after == "720h"
    assert spec.template.spec.node_class_ref.model_dump() == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert spec.template.spec.requirements[2].min_values == 2
    assert [b.schedule for b in spec.disruption.budgets] == [None, "0 9 * * mon-fri"]
    assert spec.limits == {"cpu": 1000} and spec.weight == 10
    raw_pool = by_kind(docs, "NodePool")
    assert "kubelet" not in raw_pool["spec"]["template"]["spec"]
    assert "status" not in raw_pool and "uid" not in raw_pool["metadata"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in raw_pool["metadata"].get(
        "annotations", {}
    )

    nodeclass = by_kind(docs, "EC2NodeClass")
    assert nodeclass["apiVersion"] == "karpenter.k8s.aws/v1"
    assert nodeclass["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert "amiFamily" not in nodeclass["spec"]
    assert nodeclass["spec"]["kubelet"] == {
        "maxPods": 110,
        "systemReserved": {"cpu": "100m", "memory": "100Mi"},
        "evictionHard": {"memory.available": "5%"},
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
    }
    MODELS["EC2NodeClass"].model_validate(nodeclass)

    text = "\n".join(notes)
    for expected in (
        "spec.template.spec.kubelet moved to EC2NodeClass/default spec.kubelet",
        "WhenUnderutilized is now WhenEmptyOrUnderutilized",
        "spec.disruption.expireAfter moved to spec.template.spec.expireAfter",
        "amiSelectorTerms [{alias: al2023@latest}]",
        "dropped status",
        "dropped server-set metadata",
    ):
        assert expected in text


def test_when_empty_and_custom_amis_are_kept() -> None:
    docs, notes = convert("aws-v1beta1-custom.yaml")
    pool = by_kind(docs, "NodePool")
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30s",
    }
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "Never"
    nodeclass = by_kind(docs, "EC2NodeClass")
    assert nodeclass["spec"]["amiFamily"] == "Custom"
    assert nodeclass["spec"]["amiSelectorTerms"] == [
        {"name": "my-ami-*", "owner": "self"},
        {"id": "ami-0123456789abcdef0"},
    ]
    assert nodeclass["spec"]["instanceProfile"] == "my-instance-profile"
    assert any("assumed EC2NodeClass.karpenter.k8s.aws" in n for n in notes)


def test_v1alpha5_provisioner_and_awsnodetemplate() -> None:
    docs, notes = convert("aws-v1alpha5.yaml")
    assert [d["kind"] for d in docs] == ["NodePool", "EC2NodeClass"]
    pool = by_kind(docs, "NodePool")["spec"]
    assert pool["template"]["metadata"] == {"labels": {"team": "platform"}}
    assert pool["template"]["spec"]["expireAfter"] == "720h"
    assert [r["key"] for r in pool["template"]["spec"]["requirements"]] == [
        "karpenter.sh/capacity-type"
    ]
    assert any("dropped spec.requirements[1] on karpenter.sh/provisioner-name" in n for n in notes)
    assert pool["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert pool["limits"] == {"cpu": 100}
    nodeclass = by_kind(docs, "EC2NodeClass")["spec"]
    assert nodeclass["securityGroupSelectorTerms"] == [{"id": "sg-0123"}, {"id": "sg-4567"}]
    assert nodeclass["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "my-cluster"}}]
    assert nodeclass["amiSelectorTerms"] == [
        {"name": "my-ami-*", "owner": "self"},
        {"name": "my-ami-*", "owner": "123456789012"},
    ]
    assert nodeclass["amiFamily"] == "AL2"
    assert nodeclass["kubelet"] == {"maxPods": 58}
    assert any("containerRuntime" in n for n in notes)
    for doc in docs:
        MODELS[doc["kind"]].model_validate(doc)


def test_azure_kubelet_settings_move_to_the_aksnodeclass() -> None:
    docs, notes = convert("azure-v1beta1.yaml", default=None)
    nodeclass = by_kind(docs, "AKSNodeClass")
    assert nodeclass["apiVersion"] == "karpenter.azure.com/v1beta1"
    assert nodeclass["spec"]["maxPods"] == 50
    assert nodeclass["spec"]["kubelet"] == {"cpuCFSQuota": True}
    assert any("dropped kubelet podsPerCore" in n for n in notes)
    MODELS["AKSNodeClass"].model_validate(nodeclass)


def test_v1beta1_nodeclaim() -> None:
    docs, notes = convert("nodeclaim-v1beta1.yaml")
    (claim,) = docs
    assert claim["apiVersion"] == "karpenter.sh/v1"
    assert "kubelet" not in claim["spec"] and "status" not in claim
    assert claim["spec"]["resources"] == {"requests": {"cpu": "1500m"}}
    assert any("dropped spec.kubelet" in n for n in notes)
    MODELS["NodeClaim"].model_validate(claim)


def test_kubelet_for_a_nodeclass_not_in_the_input_is_reported() -> None:
    docs = [
        d for d in load_documents([str(INPUTS / "aws-v1beta1.yaml")]) if d["kind"] == "NodePool"
    ]
    result = convert_documents(docs)
    assert any(
        "EC2NodeClass/default (karpenter.k8s.aws) is not in the input: add to its spec.kubelet"
        in str(n)
        and "maxPods: 110" in str(n)
        for n in result.notes
    )


def test_v1_documents_pass_through_unchanged() -> None:
    doc = yaml.safe_load(
        (INPUTS.parent.parent.parent / "examples/manifests/nodepool-full.yaml").read_text()
    )
    result = convert_documents([doc])
    assert result.documents == [doc] and result.notes == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Machine", "metadata": {"name": "m"}},
            "does not know kind Machine of apiVersion karpenter.sh/v1alpha5",
        ),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
            "does not know kind ConfigMap of apiVersion v1",
        ),
        (
            {
                "apiVersion": "karpenter.k8s.aws/v1beta1",
                "kind": "EC2NodeClass",
                "metadata": {"name": "u"},
                "spec": {"amiFamily": "Ubuntu", "role": "r"},
            },
            "spec.amiFamily Ubuntu is not supported in v1",
        ),
        (
            {
                "apiVersion": "karpenter.sh/v1alpha5",
                "kind": "Provisioner",
                "metadata": {"name": "p"},
                "spec": {"provider": {"subnetSelector": {"a": "b"}}},
            },
            "spec.provider (an inline provider configuration) has no v1 form",
        ),
        (
            {
                "apiVersion": "karpenter.sh/v1beta1",
                "kind": "NodePool",
                "metadata": {"name": "n"},
                "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {"name": "x"}}}},
            },
            "pass --default-nodeclass",
        ),
    ],
    ids=["machine", "configmap", "ubuntu-without-terms", "inline-provider", "ambiguous-nodeclass"],
)
def test_unconvertible_input_names_the_kind_and_the_fix(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConversionError) as err:
        convert_documents([doc])
    assert message in str(err.value)
    assert doc["kind"] in str(err.value)


def karpy(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpy.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
    )


def test_cli_writes_yaml_to_stdout_and_notes_to_stderr() -> None:
    done = karpy("convert", str(INPUTS / "aws-v1beta1.yaml"))
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all(done.stdout))
    assert [d["kind"] for d in docs] == ["NodePool", "EC2NodeClass"]
    assert "WhenEmptyOrUnderutilized" in done.stderr
    from_stdin = karpy("convert", stdin=(INPUTS / "aws-v1beta1.yaml").read_text())
    assert from_stdin.stdout == done.stdout


def test_cli_fails_on_unknown_input_naming_it() -> None:
    done = karpy(
        "convert", "-", stdin="apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert "Widget" in done.stderr and "example.com/v1" in done.stderr


@pytest.mark.cluster
@pytest.mark.parametrize("name", sorted(p.name for p in INPUTS.glob("*.yaml")))
def test_converted_output_is_accepted_by_the_api_server(name: str, created: Created) -> None:
    docs, _ = convert(name, default=None if name.startswith("azure") else AWS)
    for doc in docs:
        stored = created.create(json.loads(json.dumps(doc)))
        assert stored["apiVersion"] == doc["apiVersion"]
        MODELS[doc["kind"]].model_validate(stored)
