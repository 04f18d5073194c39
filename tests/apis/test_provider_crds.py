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


def test_custom_kubernetes_io_labels_are_left_to_the_kubelet_as_karpenter_does(
    cluster: Any,
) -> None:
    # Karpenter v1.10 (kubernetes-sigs/karpenter#2586) dropped the kubernetes.io and
    # k8s.io domain rules from its CRDs; a v1.14 manifest using them must apply.
    pool = copy.deepcopy(manifests("aws-gpu.yaml")[0])
    pool["spec"]["template"]["metadata"]["labels"] = {
        "node-role.kubernetes.io/gpu": "",
        "example.k8s.io/team": "ml",
    }
    assert "serverside-applied" in apply(cluster, [pool])
