"""ClusterLimits in the cluster model: which NodePools each covers and what they use."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from karpy.runtime.testing import FakeClock
from karpy.scheduling import resources as res
from karpy.state import Cluster
from karpy.state.testing import nodeclaim, nodepool


def cluster_limit(name: str, limits: dict[str, str], selector: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"limits": limits}
    if selector is not None:
        spec["nodePoolSelector"] = selector
    return {"apiVersion": "karpy.dev/v1alpha1", "kind": "ClusterLimit",
            "metadata": {"name": name, "generation": 1}, "spec": spec}


def labelled(name: str, **labels: str) -> dict[str, Any]:
    pool = nodepool(name)
    pool["metadata"]["labels"] = labels
    return pool


def make() -> Cluster:
    cluster = Cluster(clock=FakeClock())
    cluster.update_nodepool(labelled("team-a-spot", team="a"))
    cluster.update_nodepool(labelled("team-a-od", team="a"))
    cluster.update_nodepool(labelled("team-b", team="b"))
    cluster.update_nodeclaim(nodeclaim("c1", nodepool="team-a-spot", provider_id="p1", cpu="4"))
    cluster.update_nodeclaim(nodeclaim("c2", nodepool="team-a-od", provider_id="p2", cpu="8"))
    cluster.update_nodeclaim(nodeclaim("c3", nodepool="team-b", provider_id="p3", cpu="16"))
    return cluster


def test_a_selector_covers_the_pools_with_its_labels_and_sums_their_usage() -> None:
    cluster = make()
    cluster.cluster_limits.update(cluster_limit("team-a", {"cpu": "20"},
                                                {"matchLabels": {"team": "a"}}))
    [shared] = cluster.shared_limits("team-a-spot")
    assert shared.name == "team-a"
    assert shared.limits == {res.CPU: 20_000}
    assert shared.usage[res.CPU] == 12_000 and shared.usage["nodes"] == 2
    assert cluster.shared_limits("team-b") == ()
    entry = cluster.cluster_limits.get("team-a")
    assert entry is not None
    pools, usage = cluster.cluster_limit_usage(entry)
    assert pools == ["team-a-od", "team-a-spot"] and usage[res.CPU] == 12_000


def test_no_selector_covers_every_pool_and_machines_going_away_stop_counting() -> None:
    cluster = make()
    cluster.cluster_limits.update(cluster_limit("cluster", {"nodes": "10"}))
    assert cluster.shared_limits("team-b")[0].usage["nodes"] == 3
    cluster.mark_for_deletion("p3")
    usage = cluster.shared_limits("team-b")[0].usage
    assert usage["nodes"] == 2 and usage[res.CPU] == 12_000


def test_expressions_select_and_a_pool_relabelled_moves_out() -> None:
    cluster = make()
    cluster.cluster_limits.update(cluster_limit("not-b", {"cpu": "1"}, {
        "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]}))
    assert [p for p in ("team-a-spot", "team-a-od", "team-b")
            if cluster.shared_limits(p)] == ["team-a-spot", "team-a-od"]
    cluster.update_nodepool(labelled("team-a-od", team="b"))
    assert cluster.shared_limits("team-a-od") == ()


@pytest.mark.parametrize(("spec", "words"), [
    ({"limits": {"cpu": "lots"}}, "spec.limits"),
    ({"limits": {"cpu": "1"}, "nodePoolSelector": {"matchExpressions": [
        {"key": "team", "operator": "In"}]}}, "values must be non-empty"),
    ({"limits": {"cpu": "1"}, "nodePoolSelector": {"matchExpressions": [
        {"key": "team", "operator": "Near", "values": ["a"]}]}}, "operator"),
])
def test_an_invalid_clusterlimit_covers_nothing_and_says_why(
    spec: dict[str, Any], words: str, caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = make()
    obj = cluster_limit("bad", {})
    obj["spec"] = spec
    with caplog.at_level(logging.ERROR, logger="karpy.state"):
        cluster.cluster_limits.update(obj)
    entry = cluster.cluster_limits.get("bad")
    assert entry is not None and entry.error is not None and words in entry.error
    assert "ignoring invalid clusterlimit" in caplog.text
    assert cluster.shared_limits("team-a-spot") == ()


def test_a_deleted_clusterlimit_no_longer_covers_its_pools() -> None:
    cluster = make()
    obj = cluster_limit("cluster", {"cpu": "100"})
    cluster.cluster_limits.update(obj)
    assert cluster.shared_limits("team-b")
    cluster.cluster_limits.delete(obj)
    assert cluster.shared_limits("team-b") == ()
