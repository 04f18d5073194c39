"""NodePool and NodeClaim parse Karpenter manifests, fill Karpenter's defaults and write
back what the API server stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from karpy.apis import labels
from karpy.apis.taints import DISRUPTED_NO_SCHEDULE_TAINT, UNREGISTERED_NO_EXECUTE_TAINT
from karpy.apis.v1 import (
    UNLIMITED,
    Budget,
    NodeClaim,
    NodeClaimTemplate,
    NodePool,
)


def nodepool_manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                    ],
                }
            },
            **spec,
        },
    }


def test_nodepool_defaults_match_karpenters_crd_defaults() -> None:
    pool = NodePool.model_validate(nodepool_manifest())
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.spec.disruption.consolidate_after == "0s"
    assert [b.nodes for b in pool.spec.disruption.budgets] == ["10%"]
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.spec.template.spec.expire_after_timedelta == timedelta(hours=720)
    assert pool.spec.weight is None
    assert pool.status.nodes == 0


def test_expire_after_never_means_no_expiry() -> None:
    manifest = nodepool_manifest()
    manifest["spec"]["template"]["spec"]["expireAfter"] = "Never"
    pool = NodePool.model_validate(manifest)
    assert pool.spec.template.spec.expire_after_timedelta is None
    assert pool.to_dict()["spec"]["template"]["spec"]["expireAfter"] == "Never"


def test_output_uses_camel_case_and_omits_unset_optional_fields() -> None:
    out = NodePool.model_validate(nodepool_manifest(weight=10)).to_dict()
    template_spec = out["spec"]["template"]["spec"]
    assert template_spec["nodeClassRef"]["kind"] == "EC2NodeClass"
    assert "taints" not in template_spec  # empty list: omitempty
    assert "terminationGracePeriod" not in template_spec  # None: omitted
    assert "metadata" not in out["spec"]["template"]
    assert out["spec"]["weight"] == 10
    assert "limits" not in out["spec"]


def test_unknown_spec_fields_are_dropped_like_the_crd_prunes_them() -> None:
    manifest = nodepool_manifest(notAField=True)
    manifest["metadata"]["someFutureField"] = "kept"
    out = NodePool.model_validate(manifest).to_dict()
    assert "notAField" not in out["spec"]
    assert out["metadata"]["someFutureField"] == "kept"  # metadata is never pruned


def test_round_trip_through_a_dict_is_lossless() -> None:
    manifest = nodepool_manifest(
        weight=50,
        limits={"cpu": 1000, "memory": "1000Gi"},
        disruption={
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "30s",
            "budgets": [
                {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
                {"nodes": "20%", "reasons": ["Drifted", "Empty"]},
            ],
        },
    )
    manifest["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    manifest["spec"]["template"]["spec"]["taints"] = [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ]
    pool = NodePool.model_validate(manifest)
    again = NodePool.model_validate(pool.to_dict())
    assert again == pool
    assert again.spec.limits == {"cpu": 1000, "memory": "1000Gi"}  # int stays int


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("weight",), 0),
        (("weight",), 101),
        (("disruption", "consolidationPolicy"), "WhenUnderutilized"),
        (("disruption", "consolidateAfter"), "5 minutes"),
        (("limits",), {"cpu": "lots"}),
    ],
)
def test_invalid_values_fail_to_parse_with_the_field_named(
    path: tuple[str, ...], value: object
) -> None:
    manifest = nodepool_manifest()
    target = manifest["spec"]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    with pytest.raises(ValidationError) as err:
        NodePool.model_validate(manifest)
    assert path[-1] in str(err.value) or path[-1] in str(err.value).replace("_", "")


def test_a_v1beta1_manifest_is_refused_naming_the_version() -> None:
    manifest = nodepool_manifest()
    manifest["apiVersion"] = "karpenter.sh/v1beta1"
    with pytest.raises(ValidationError, match=r"karpenter\.sh/v1"):
        NodePool.model_validate(manifest)


def test_requirement_operators_and_min_values_bounds() -> None:
    manifest = nodepool_manifest()
    reqs = manifest["spec"]["template"]["spec"]["requirements"]
    reqs.append({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]})
    reqs.append({"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 50})
    pool = NodePool.model_validate(manifest)
    assert [r.operator for r in pool.spec.template.spec.requirements] == ["In", "Gt", "Exists"]
    reqs[-1]["minValues"] = 51
    with pytest.raises(ValidationError, match=r"min_values|minValues"):
        NodePool.model_validate(manifest)


def test_template_becomes_a_nodeclaim_spec_with_requests() -> None:
    template = NodeClaimTemplate.model_validate(nodepool_manifest()["spec"]["template"])
    spec = template.to_nodeclaim_spec({"cpu": "1500m", "pods": 3})
    claim = NodeClaim(metadata={"name": "default-abcde"}, spec=spec)
    out = claim.to_dict()
    assert out["apiVersion"] == "karpenter.sh/v1"
    assert out["spec"]["resources"] == {"requests": {"cpu": "1500m", "pods": 3}}
    assert out["spec"]["nodeClassRef"]["name"] == "default"
    assert out["spec"]["expireAfter"] == "720h"


def test_nodeclaim_status_uses_kubernetes_id_spelling() -> None:
    claim = NodeClaim.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "x"},
            "spec": nodepool_manifest()["spec"]["template"]["spec"],
            "status": {
                "providerID": "aws:///us-west-2a/i-0123",
                "imageID": "ami-0123",
                "nodeName": "ip-10-0-0-1",
                "lastPodEventTime": "2024-05-01T10:00:00Z",
            },
        }
    )
    assert claim.status.provider_id == "aws:///us-west-2a/i-0123"
    out = claim.to_dict()["status"]
    assert out["providerID"] == "aws:///us-west-2a/i-0123"
    assert out["imageID"] == "ami-0123"
    assert out["lastPodEventTime"] == "2024-05-01T10:00:00Z"


def test_budget_percentages_round_up_and_schedules_gate_them() -> None:
    now = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)  # a Monday
    assert Budget(nodes="10%").allowed_disruptions(now, 15) == 2
    assert Budget(nodes="3").allowed_disruptions(now, 15) == 3
    office_hours = Budget(nodes="0", schedule="0 9 * * 1-5", duration="8h")
    assert office_hours.is_active(now)
    assert office_hours.allowed_disruptions(now, 15) == 0
    assert office_hours.allowed_disruptions(now + timedelta(hours=8), 15) == UNLIMITED
    assert Budget(nodes="0", schedule="@daily", duration="1h").is_active(
        datetime(2024, 5, 6, 0, 30, tzinfo=UTC)
    )


def test_nodepool_uses_the_most_restrictive_budget_for_the_reason() -> None:
    pool = NodePool.model_validate(
        nodepool_manifest(
            disruption={
                "budgets": [
                    {"nodes": "50%"},
                    {"nodes": "1", "reasons": ["Drifted"]},
                ]
            }
        )
    )
    now = datetime(2024, 5, 6, tzinfo=UTC)
    assert pool.allowed_disruptions(now, 10, "Drifted") == 1
    assert pool.allowed_disruptions(now, 10, "Empty") == 5


def test_hash_ignores_requirements_and_taint_order_but_not_labels() -> None:
    base = nodepool_manifest()
    base["spec"]["template"]["spec"]["taints"] = [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "NoSchedule"},
    ]
    pool = NodePool.model_validate(base)
    reordered = NodePool.model_validate(base)
    reordered.spec.template.spec.taints.reverse()
    assert reordered.hash() == pool.hash()
    fewer_reqs = NodePool.model_validate(base)
    fewer_reqs.spec.template.spec.requirements.clear()
    assert fewer_reqs.hash() == pool.hash()
    labelled = NodePool.model_validate(base)
    labelled.spec.template.metadata.labels["team"] = "b"
    assert labelled.hash() != pool.hash()


def test_well_known_constants_are_karpenters() -> None:
    assert labels.LABEL_NODEPOOL == "karpenter.sh/nodepool"
    assert labels.LABEL_CAPACITY_TYPE == "karpenter.sh/capacity-type"
    assert DISRUPTED_NO_SCHEDULE_TAINT.to_dict() == {
        "key": "karpenter.sh/disrupted",
        "effect": "NoSchedule",
    }
    assert UNREGISTERED_NO_EXECUTE_TAINT.effect == "NoExecute"
    assert labels.normalize_label("failure-domain.beta.kubernetes.io/zone") == labels.LABEL_ZONE
    assert labels.restricted_label_reason("karpenter.sh/capacity-type") is None
    assert labels.restricted_label_reason("team") is None
    reason = labels.restricted_label_reason("karpenter.sh/custom")
    assert reason is not None and "karpenter.sh" in reason
    assert labels.restricted_label_reason("kubernetes.io/hostname") is not None
    # Karpenter's kubelet domains and their exceptions.
    for key in ("kubernetes.io/team", "team.kubernetes.io/x", "example.k8s.io/team"):
        assert labels.restricted_label_reason(key) is not None, key
    for key in ("node.kubernetes.io/lifecycle", "node-restriction.kubernetes.io/team",
                "kops.k8s.io/instancegroup", "beta.kubernetes.io/arch", "kubernetes.io/os"):
        assert labels.restricted_label_reason(key) is None, key  # fmt: skip


def test_restricted_labels_follow_every_installed_provider() -> None:
    from karpy.apis.extension import load_extensions, restricted_label_reason

    exts = load_extensions()
    assert restricted_label_reason("karpenter.k8s.aws/instance-family", exts) is None
    assert restricted_label_reason("karpenter.azure.com/sku-name", exts) is None
    assert restricted_label_reason("team", exts) is None
    for key in (
        "karpenter.k8s.aws/made-up",
        "karpenter.azure.com/sku-hyperv-generation",
        "kubernetes.azure.com/made-up",
        "agentpool",
        "kubernetes.io/hostname",
        "karpenter.sh/made-up",
        "kubernetes.io/made-up",
        "example.k8s.io/made-up",
    ):
        assert restricted_label_reason(key, exts) is not None, key
    assert restricted_label_reason("node.kubernetes.io/made-up", exts) is None
    assert restricted_label_reason("kops.k8s.io/made-up", exts) is None
