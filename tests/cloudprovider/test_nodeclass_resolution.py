"""A NodePool's nodeClassRef is matched against the kinds the provider serves, and the
NodeClass object's own readiness becomes the NodePool's NodeClassReady condition with
Karpenter's reasons, so `kubectl describe nodepool` explains why nothing launches."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.cloudprovider import NodeClassKind
from karpy.cloudprovider.nodeclass import (
    NodeClassReadiness,
    node_class_readiness,
    resolve_node_class,
)

UNKNOWN = NodeClassReadiness(
    "False", "NodeClassReadinessUnknown", "Node Class Readiness Unknown"
)
EC2 = NodeClassKind(group="karpenter.k8s.aws", version="v1", kind="EC2NodeClass",
                    plural="ec2nodeclasses")
KWOK = NodeClassKind(group="karpenter.kwok.sh", version="v1alpha1", kind="KWOKNodeClass",
                     plural="kwoknodeclasses")


def test_a_ref_to_a_served_kind_resolves_to_that_kind() -> None:
    assert resolve_node_class("karpenter.kwok.sh", "KWOKNodeClass", [EC2, KWOK]) is KWOK
    assert KWOK.api_version == "karpenter.kwok.sh/v1alpha1"


@pytest.mark.parametrize(
    ("group", "kind"),
    [("karpenter.azure.com", "AKSNodeClass"), ("karpenter.kwok.sh", "EC2NodeClass"), ("", "")],
)
def test_a_ref_to_another_providers_kind_is_not_ours(group: str, kind: str) -> None:
    assert resolve_node_class(group, kind, [EC2, KWOK]) is None


def ready(status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": "default"},
        "status": {"conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": message}
        ]},
    }


@pytest.mark.parametrize(
    ("node_class", "expected"),
    [
        (None, NodeClassReadiness("False", "NodeClassNotFound", "NodeClass not found on cluster")),
        (
            {**ready("True"), "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}},
            NodeClassReadiness("False", "NodeClassTerminating", "NodeClass is Terminating"),
        ),
        (
            {"metadata": {"name": "default"}},
            UNKNOWN,
        ),
        (
            ready("Unknown"),
            UNKNOWN,
        ),
        (
            ready("False", "SubnetsNotFound", "no subnets match the selector"),
            NodeClassReadiness("False", "SubnetsNotFound", "no subnets match the selector"),
        ),
        (ready("True", "Ready"), NodeClassReadiness("True", "NodeClassReady")),
    ],
    ids=["missing", "terminating", "no-conditions", "unknown", "not-ready", "ready"],
)
def test_readiness_follows_the_node_class_ready_condition(
    node_class: dict[str, Any] | None, expected: NodeClassReadiness
) -> None:
    got = node_class_readiness(node_class)
    assert got == expected
    assert got.ready is (expected.status == "True")
