"""Default topology spread constraints (SCHEDULER_CONFIG, Karpenter v1.15.0's
DefaultTopologySpreadInjector and kube-scheduler's helper.DefaultSelector), per
scheduler: the selector deduced from Services and the pod's controller, given only to
pods of that scheduler without constraints of their own."""

from __future__ import annotations

from typing import Any

from scheduling_support import HOSTNAME, ZONE, nodepool, pod

from karpy.scheduling import Pod
from karpy.scheduling.defaultspread import (
    default_selector,
    parse_scheduler_config,
    with_defaults,
)
from karpy.scheduling.simulator import Simulator
from karpy.state.workloads import WorkloadSelectors

CONFIG = parse_scheduler_config(
    "podTopologySpread:\n  defaultConstraints:\n"
    f"  - {{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}\n"
)


def owned(name: str, labels: dict[str, str], owner: tuple[str, str] | None = None,
          scheduler: str = "", **kwargs: Any) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels}
    if owner is not None:
        api = "v1" if owner[0] == "ReplicationController" else "apps/v1"
        meta["ownerReferences"] = [{"apiVersion": api, "kind": owner[0], "name": owner[1],
                                    "controller": True, "uid": "u-" + owner[1]}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": kwargs.get("cpu", "100m")}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return Pod.from_dict({"metadata": meta, "spec": spec})


def test_the_selector_merges_matching_services_then_ands_the_replicasets() -> None:
    selector = default_selector(
        {"app": "web", "tier": "front"},
        [{"app": "web"}, {"app": "db"}, None, {"tier": "front"}],
        ("ReplicaSet", {"matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
    )
    assert selector == {
        "matchLabels": {"app": "web", "tier": "front"},
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]},
                             {"key": "tier", "operator": "Exists"}],
    }


def test_a_replication_controller_merges_as_labels_and_nothing_deduced_is_none() -> None:
    assert default_selector({"a": "1"}, [], ("ReplicationController", {"a": "1"})) == {
        "matchLabels": {"a": "1"}, "matchExpressions": []}
    # a bare pod no Service selects, or one owned by a Job: no default constraint
    assert default_selector({"a": "1"}, [{"b": "2"}], None) is None
    assert default_selector({"a": "1"}, [], ("Job", {"matchLabels": {"a": "1"}})) is None


def test_workload_selectors_find_the_pods_controller_and_forget_deleted_ones() -> None:
    index = WorkloadSelectors()
    rs = {"metadata": {"name": "web-1", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    index.update_owner("ReplicaSet", rs)
    web = owned("web-1-a", {"app": "web"}, ("ReplicaSet", "web-1"))
    assert index.selector_for(web) == {
        "matchLabels": {}, "matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]}]}
    index.delete_owner("ReplicaSet", rs)
    assert index.selector_for(web) is None
    index.update_service({"metadata": {"name": "web", "namespace": "default"},
                          "spec": {"selector": {"app": "web"}}})
    assert index.selector_for(web) == {"matchLabels": {"app": "web"}, "matchExpressions": []}


def test_defaults_spread_a_replicasets_pods_over_the_zones() -> None:
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": []}
    pods = [with_defaults(owned(f"web-{i}", {"app": "web"}, ("ReplicaSet", "web")),
                          CONFIG.for_scheduler(""), selector) for i in range(6)]
    assert all(p.spread_constraints and p.spread_constraints[0].default for p in pods)
    results = Simulator([nodepool()]).solve(pods)
    zones = [c.requirements.get(ZONE) for c in results.new_nodeclaims]
    assert not results.errors
    assert len({str(z) for z in zones}) >= 2, "six pods with a zone default packed in one zone"
    # without the defaults they share one node
    plain = Simulator([nodepool()]).solve(
        [owned(f"web-{i}", {"app": "web"}, ("ReplicaSet", "web")) for i in range(6)])
    assert len(plain.new_nodeclaims) == 1


def test_a_pod_with_its_own_constraints_or_another_scheduler_keeps_them() -> None:
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": []}
    own = pod("own", labels={"app": "web"},
              spread=[{"maxSkew": 2, "topologyKey": HOSTNAME, "whenUnsatisfiable":
                       "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}])
    assert with_defaults(own, CONFIG.for_scheduler(""), selector) is own
    batch = owned("b", {"app": "web"}, ("ReplicaSet", "web"), scheduler="batch")
    assert batch.scheduler_name == "batch"
    assert CONFIG.for_scheduler(batch.scheduler_name) == ()


def test_a_default_constraint_says_where_it_came_from() -> None:
    [constraint] = CONFIG.for_scheduler("")
    assert "a default constraint of SCHEDULER_CONFIG" in str(constraint)


def test_a_pod_waiting_on_a_default_constraint_is_told_which() -> None:
    # one zone only, maxSkew 1 and minDomains 2: the second pod cannot be placed, and the
    # reason names the rule as SCHEDULER_CONFIG's
    config = parse_scheduler_config(
        "podTopologySpread:\n  defaultConstraints:\n"
        f"  - {{maxSkew: 1, minDomains: 2, topologyKey: {ZONE}, "
        "whenUnsatisfiable: DoNotSchedule}\n")
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": []}
    pods = [with_defaults(owned(f"web-{i}", {"app": "web"}, ("ReplicaSet", "web")),
                          config.for_scheduler(""), selector) for i in range(2)]
    one_zone = nodepool(requirements=[{"key": ZONE, "operator": "In", "values": ["zone-a"]}])
    results = Simulator([one_zone]).solve(pods)
    [error] = results.errors
    assert "topology spread on topology.kubernetes.io/zone" in error.reason
    assert "a default constraint of SCHEDULER_CONFIG" in error.reason
