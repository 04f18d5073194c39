"""Model -> JSON -> API server -> model gives back the same model: specs with every
field, and statuses written through the status subresource (conditions included)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from apis_support import MODELS, Created, example_files, load_example

from karpy.apis.v1 import CONDITION_LAUNCHED, CONDITION_REGISTERED, NodeClaim, NodePool

pytestmark = pytest.mark.cluster

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def round_trip(model: Any, created: Created) -> Any:
    cls = type(model)
    doc = model.to_dict()
    created.create(doc)  # renames doc to a unique name
    model.metadata.name = doc["metadata"]["name"]
    return cls.model_validate(created.get(model.kind, doc["metadata"]["name"]))


@pytest.mark.parametrize(
    "example", [p.name for p in example_files()], ids=lambda n: n.removesuffix(".yaml")
)
def test_spec_survives_the_api_server(example: str, created: Created) -> None:
    original: Any = MODELS[load_example(example)["kind"]].model_validate(load_example(example))
    back = round_trip(original, created)
    assert back.spec == original.spec
    assert back.metadata.labels == original.metadata.labels
    assert back.metadata.annotations == original.metadata.annotations


def test_nodepool_built_in_python_round_trips(created: Created) -> None:
    pool = NodePool.model_validate(
        {
            "metadata": {"name": "built", "labels": {"a": "b"}},
            "spec": {
                "template": {
                    "metadata": {"labels": {"team": "x"}},
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "d",
                        },
                        "requirements": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["spot"],
                                "minValues": 1,
                            }
                        ],
                        "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}],
                        "terminationGracePeriod": "1h",
                    },
                },
                "limits": {"cpu": 64, "memory": "256Gi"},
                "weight": 3,
            },
        }
    )
    back = round_trip(pool, created)
    assert back.spec == pool.spec
    assert back.spec.limits == {"cpu": 64, "memory": "256Gi"}


def write_status(cluster: Any, created: Created, model: Any) -> dict[str, Any]:
    resource = f"{model.crd.plural}.{model.crd.group}"
    status = model.to_dict()["status"]
    out = cluster.kubectl(
        "patch",
        resource,
        str(model.metadata.name),
        "--subresource=status",
        "--type=merge",
        "-o",
        "json",
        "-p",
        json.dumps({"status": status}),
    )
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_nodeclaim_status_with_conditions_round_trips(cluster: Any, created: Created) -> None:
    claim = NodeClaim.model_validate(load_example("nodeclaim.yaml"))
    back = round_trip(claim, created)
    back.status.provider_id = "kwok://node-1"
    back.status.image_id = "ami-0123"
    back.status.node_name = "node-1"
    back.status.capacity = {"cpu": "2", "memory": "8Gi", "pods": 110}
    back.status.allocatable = {"cpu": "1930m", "memory": "7Gi", "pods": 110}
    back.status.last_pod_event_time = NOW
    conditions = back.status_conditions(now=lambda: NOW)
    conditions.set_true(CONDITION_LAUNCHED)
    conditions.set_false(CONDITION_REGISTERED, "NodeNotFound", "waiting for the node")
    stored = NodeClaim.model_validate(write_status(cluster, created, back))
    assert stored.status == back.status
    assert [c.type for c in stored.status.conditions][-1] == "Ready"
    shown = cluster.kubectl("get", "nodeclaims.karpenter.sh", str(back.metadata.name))
    header, row = shown.splitlines()
    assert header.split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    assert "node-1" in row.split() and "False" in row.split()


def test_nodepool_status_round_trips(cluster: Any, created: Created) -> None:
    pool = NodePool.model_validate(load_example("nodepool-minimal.yaml"))
    back = round_trip(pool, created)
    back.status.nodes = 3
    back.status.resources = {"cpu": "12", "memory": "48Gi", "nodes": 3}
    back.status.node_class_observed_generation = 1
    conditions = back.status_conditions(now=lambda: NOW)
    conditions.set_true("ValidationSucceeded")
    conditions.set_true("NodeClassReady")
    stored = NodePool.model_validate(write_status(cluster, created, back))
    assert stored.status == back.status
    assert stored.status_conditions().is_true("Ready")
    header, row = cluster.kubectl(
        "get", "nodepools.karpenter.sh", str(back.metadata.name)
    ).splitlines()
    assert header.split() == ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
    assert row.split()[1:4] == ["default", "3", "True"]
