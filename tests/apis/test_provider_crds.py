"""Per-provider CRD sets on the real API server: a manifest valid for Karpenter with one
provider applies to karpy with that provider's set (crds/<provider>/), even where another
provider reserves a label it uses; Karpenter's core rules hold in every set."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import crdsets
from controlplane.fixtures import KubectlError

pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent / "provider_manifests"


def manifests(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((HERE / name).read_text()) if d]


def apply(cluster: Any, docs: list[dict[str, Any]]) -> str:
    """Server-side apply, validated in full by the API server but not stored."""
    # JSON documents: kubectl's YAML 1.1 would read a bare N (an Azure SKU family) as false.
    stream = "\n---\n".join(json.dumps(d) for d in docs)
    return str(
        cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=stream)
    )


def rejection(cluster: Any, docs: list[dict[str, Any]]) -> str:
    with pytest.raises(KubectlError) as err:
        apply(cluster, docs)
    return err.value.stderr


def test_a_karpenter_aws_gpu_pool_labelled_accelerator_applies_with_the_aws_set(
    cluster: Any,
) -> None:
    docs = manifests("aws-gpu.yaml")
    with crdsets.serving(cluster, "aws"):
        out = apply(cluster, docs)
    assert "nodepool.karpenter.sh/gpu serverside-applied" in out
    assert "ec2nodeclass.karpenter.k8s.aws/gpu serverside-applied" in out


def test_the_azure_set_reserves_accelerator_as_karpenter_azure_does(cluster: Any) -> None:
    pool = manifests("aws-gpu.yaml")[0]
    with crdsets.serving(cluster, "azure"):
        message = rejection(cluster, [pool])
        out = apply(cluster, manifests("azure-gpu.yaml"))
    assert "spec.template.metadata.labels" in message
    assert 'label "accelerator" is restricted' in message
    assert "nodepool.karpenter.sh/gpu serverside-applied" in out
    assert "aksnodeclass.karpenter.azure.com/gpu serverside-applied" in out


def test_the_aws_set_keeps_aws_rules(cluster: Any) -> None:
    pool = copy.deepcopy(manifests("aws-gpu.yaml")[0])
    pool["spec"]["template"]["metadata"]["labels"]["karpenter.k8s.aws/custom"] = "x"
    with crdsets.serving(cluster, "aws"):
        message = rejection(cluster, [pool])
    assert 'label domain "karpenter.k8s.aws" is restricted' in message


CORE_RULES = {
    # Karpenter v1 (kubernetes-sigs/karpenter pkg/apis/crds, up to v1.9): the kubelet's
    # domains are restricted in NodePool labels, with its exceptions below.
    "kubernetes.io/team": 'label domain "kubernetes.io" is restricted',
    "example.k8s.io/team": 'label domain "k8s.io" is restricted',
    "karpenter.sh/team": 'label domain "karpenter.sh" is restricted',
    "kubernetes.io/hostname": 'label "kubernetes.io/hostname" is restricted',
    "karpenter.sh/nodepool": 'label "karpenter.sh/nodepool" is restricted',
}


@pytest.mark.parametrize("provider", ["aws", "azure", "kwok"])
def test_every_set_carries_karpenters_core_rules(cluster: Any, provider: str) -> None:
    def rejections() -> dict[str, str]:
        out = {}
        for label in CORE_RULES:
            pool = copy.deepcopy(manifests("aws-gpu.yaml")[0])
            pool["spec"]["template"]["metadata"]["labels"] = {label: "x"}
            out[label] = rejection(cluster, [pool])
        return out

    if provider == crdsets.DEFAULT:
        found = rejections()
    else:
        with crdsets.serving(cluster, provider):
            found = rejections()
    for label, message in CORE_RULES.items():
        assert message in found[label], found[label]


def test_a_custom_kubernetes_io_label_is_rejected_in_labels_and_requirements(
    cluster: Any,
) -> None:
    pool = copy.deepcopy(manifests("aws-gpu.yaml")[0])
    pool["spec"]["template"]["metadata"]["labels"] = {"kubernetes.io/team": "ml"}
    message = rejection(cluster, [pool])
    assert "spec.template.metadata.labels" in message
    assert 'label domain "kubernetes.io" is restricted' in message
    pool = copy.deepcopy(manifests("aws-gpu.yaml")[0])
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "team.kubernetes.io/name", "operator": "Exists"}
    )
    message = rejection(cluster, [pool])
    assert "spec.template.spec.requirements[4].key" in message
    assert 'label domain "kubernetes.io" is restricted' in message


def test_karpenters_exceptions_and_well_known_labels_apply(cluster: Any) -> None:
    pool = copy.deepcopy(manifests("aws-gpu.yaml")[0])
    pool["spec"]["template"]["metadata"]["labels"] = {
        "node.kubernetes.io/lifecycle": "normal",
        "node-restriction.kubernetes.io/team": "ml",
        "kops.k8s.io/instancegroup": "nodes",
        "topology.kubernetes.io/zone": "zone-a",
        "kubernetes.io/arch": "amd64",
        "team": "ml",
    }
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "Exists"}
    )
    assert "serverside-applied" in apply(cluster, [pool])


@pytest.mark.parametrize(
    ("provider", "manifest", "label"),
    [
        ("aws", "aws-gpu.yaml", "karpenter.k8s.aws/instance-family"),
        ("azure", "azure-gpu.yaml", "karpenter.azure.com/sku-family"),
    ],
)
def test_a_providers_well_known_label_still_applies_to_its_set(
    cluster: Any, provider: str, manifest: str, label: str
) -> None:
    docs = manifests(manifest)
    docs[0]["spec"]["template"]["metadata"]["labels"][label] = "x"
    docs[0]["spec"]["template"]["spec"]["requirements"].append(
        {"key": label, "operator": "Exists"}
    )
    with crdsets.serving(cluster, provider):
        out = apply(cluster, docs)
    assert "nodepool.karpenter.sh/gpu serverside-applied" in out
