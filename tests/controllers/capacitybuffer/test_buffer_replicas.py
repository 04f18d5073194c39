"""A CapacityBuffer's chunk count: Cluster Autoscaler's rules as Karpenter v1.14 applies
them (the larger of replicas and percentage, capped by limits; limits alone when neither
count is set)."""

from __future__ import annotations

import pytest

from karpy.apis.autoscaling import CapacityBufferSpec
from karpy.controllers.capacitybuffer import buffer_replicas, limit_replicas, percentage_replicas

CHUNK = {"cpu": 500, "memory": 256 * 2**20}  # 500m, 256Mi


def spec(**fields: object) -> CapacityBufferSpec:
    return CapacityBufferSpec.model_validate(
        {"scalableRef": {"kind": "Deployment", "name": "web"}, **fields}
    )


@pytest.mark.parametrize(("replicas", "percentage", "want"),
                         [(10, 20, 2), (10, 25, 3), (3, 1, 1), (0, 50, 0), (10, 0, 0)])
def test_percentage_rounds_up_to_at_least_one(replicas: int, percentage: int, want: int) -> None:
    assert percentage_replicas(replicas, percentage) == want


def test_limits_count_only_requested_resources() -> None:
    assert limit_replicas({"cpu": 2000}, CHUNK) == 4
    assert limit_replicas({"cpu": 2000, "memory": 2**30}, CHUNK) == 4
    assert limit_replicas({"cpu": 2000, "memory": 512 * 2**20}, CHUNK) == 2
    assert limit_replicas({"nvidia.com/gpu": 1}, CHUNK) is None


def test_larger_of_replicas_and_percentage_capped_by_limits() -> None:
    assert buffer_replicas(spec(replicas=2, percentage=50), CHUNK, 10) == 5
    assert buffer_replicas(spec(replicas=7, percentage=50), CHUNK, 10) == 7
    assert buffer_replicas(spec(replicas=7, limits={"cpu": "2"}), CHUNK, 10) == 4
    assert buffer_replicas(spec(limits={"cpu": "1500m"}), CHUNK, 10) == 3
    assert buffer_replicas(spec(limits={"nvidia.com/gpu": "1"}), CHUNK, 10) == 0
    assert buffer_replicas(spec(), CHUNK, 10) == 0
