"""Drift read from the NodeClaim's Node, as Karpenter's Azure provider checks it for VMs
(pkg/cloudprovider/drift.go): the kubelet's version against the AKSNodeClass's
Kubernetes version (``K8sVersionDrift``), and the node's kubelet identity label against
the ``kubeletIdentityClientID`` setting (``KubeletIdentityDrift``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from karpy_azure._kubelet import AKS_LABEL_KUBELET_IDENTITY
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis.aksnodeclass import CONDITION_KUBERNETES_VERSION_READY

__all__ = ["k8s_version_drifted", "kubelet_identity_drifted"]

# A kubelet's version as real kubelets report it (v1.31.2); simulated kubelets (kwok
# reports "fake") say nothing about drift.
_VERSION: Final = re.compile(r"^v?\d+\.\d+\.\d+")


def k8s_version_drifted(node: Mapping[str, Any], node_class: AKSNodeClass) -> bool:
    """Whether the node's kubelet runs another Kubernetes version than the class now
    resolves. A class whose version is not ready says nothing (as upstream: drift is
    only judged against a version known to be good)."""
    wanted = node_class.status.kubernetes_version
    if not wanted or not node_class.status_conditions().is_true(
        CONDITION_KUBERNETES_VERSION_READY
    ):
        return False
    kubelet = str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")
    if not _VERSION.match(kubelet):
        return False  # not reported yet, or not a real kubelet
    return kubelet.removeprefix("v") != wanted.removeprefix("v")


def kubelet_identity_drifted(node: Mapping[str, Any], expected: str) -> bool:
    """Whether the node was bootstrapped with another kubelet identity than the one
    configured now. A node without the label is not drifted (upstream: nodes made before
    the label existed would otherwise all be replaced at once)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    actual = str(labels.get(AKS_LABEL_KUBELET_IDENTITY) or "")
    return bool(actual) and actual != expected
