"""The AKSNodeClass model parses the Azure provider's v1beta1 manifests and fills its
defaults; the Azure well-known labels are exact."""

from __future__ import annotations

from typing import Any

import pytest
from karpy_azure.apis import EXTENSION, AKSNodeClass, labels
from pydantic import ValidationError

from karpy.apis.crdgen import generate


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.azure.com/v1beta1",
        "kind": "AKSNodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }


def test_defaults_are_the_azure_providers() -> None:
    spec = AKSNodeClass.model_validate(manifest()).spec
    assert spec.os_disk_size_gb == 128
    assert spec.image_family == "Ubuntu"
    assert spec.kubelet is None
    kubelet = AKSNodeClass.model_validate(manifest(kubelet={})).spec.kubelet
    assert kubelet is not None
    assert (kubelet.cpu_manager_policy, kubelet.cpu_cfs_quota, kubelet.container_log_max_files) == (
        "none",
        True,
        5,
    )


def test_azure_id_spellings_round_trip() -> None:
    subnet = (
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/"
        "virtualNetworks/vnet/subnets/nodes"
    )
    nodeclass = AKSNodeClass.model_validate(
        manifest(vnetSubnetID=subnet, osDiskSizeGB=64, kubelet={"cpuCFSQuota": False})
    )
    out = nodeclass.to_dict()["spec"]
    assert out["vnetSubnetID"] == subnet
    assert out["osDiskSizeGB"] == 64
    assert out["kubelet"]["cpuCFSQuota"] is False
    assert AKSNodeClass.model_validate(nodeclass.to_dict()) == nodeclass


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"osDiskSizeGB": 29}, "spec.osDiskSizeGB"),
        ({"imageFamily": "Windows2022"}, "spec.imageFamily"),
        ({"maxPods": 9}, "spec.maxPods"),
        ({"vnetSubnetID": "/subscriptions/x/subnets/y"}, "spec.vnetSubnetID"),
        ({"kubelet": {"containerLogMaxSize": "50MB"}}, "spec.kubelet.containerLogMaxSize"),
    ],
)
def test_invalid_fields_fail_to_parse_naming_them(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        AKSNodeClass.model_validate(manifest(**spec))
    assert field in str(err.value)


def test_labels_are_karpenters() -> None:
    assert labels.LABEL_SKU_NAME == "karpenter.azure.com/sku-name"
    assert labels.LABEL_SKU_GPU_COUNT == "karpenter.azure.com/sku-gpu-count"
    assert labels.AKS_LABEL_SCALE_SET_PRIORITY == "kubernetes.azure.com/scalesetpriority"
    assert labels.LABEL_SKU_HYPERV_GENERATION not in labels.WELL_KNOWN_LABELS


def test_extension_contributes_the_crd_and_the_label_rules() -> None:
    crds = generate(provider="azure")
    assert "karpenter.azure.com_aksnodeclasses.yaml" in crds
    assert 'label domain "karpenter.k8s.aws"' not in crds["karpenter.sh_nodepools.yaml"]
    pools = crds["karpenter.sh_nodepools.yaml"]
    assert 'label domain "karpenter.azure.com" is restricted' in pools
    assert 'label domain "kubernetes.azure.com" is restricted' in pools
    assert 'label "agentpool" is restricted' in pools
    assert EXTENSION.name == "azure"
