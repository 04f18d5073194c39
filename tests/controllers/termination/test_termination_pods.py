"""Which pods a drain waits for and in which order they leave."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controllers.termination import factories as f

from karpy.apis.taints import TAINT_DISRUPTED
from karpy.controllers.termination._pods import drain_tiers
from karpy.state.pods import do_not_disrupt_active, is_evictable, is_waiting_eviction

NOW = datetime(2024, 1, 1, 1, 0, tzinfo=UTC)  # an hour after the pods started


def names(tiers: list[list[dict[str, object]]]) -> list[list[str]]:
    return [[p["metadata"]["name"] for p in tier] for tier in tiers]  # type: ignore[index]


def test_tiers_put_non_critical_first_and_daemonsets_last_within_each_class() -> None:
    pods = [
        f.pod("cni", node_name="n", owner=("apps/v1", "DaemonSet"),
              priority_class="system-node-critical"),
        f.pod("dns", node_name="n", priority_class="system-cluster-critical"),
        f.pod("logs", node_name="n", owner=("apps/v1", "DaemonSet")),
        f.pod("web", node_name="n"),
        f.pod("bare", node_name="n", owner=None, priority_class="high"),
    ]
    assert names(drain_tiers(pods)) == [["web", "bare"], ["logs"], ["dns"], ["cni"]]


def test_pods_that_never_have_to_leave_are_not_waited_for() -> None:
    tolerant = f.pod("t", node_name="n", tolerations=[
        {"key": TAINT_DISRUPTED, "operator": "Exists", "effect": "NoSchedule"}])
    tolerate_all = f.pod("a", node_name="n", tolerations=[{"operator": "Exists"}])
    other_taint = f.pod("o", node_name="n", tolerations=[{"key": "x", "operator": "Exists"}])
    mirror = f.pod("m", node_name="n", owner=("v1", "Node"))
    done = f.pod("d", node_name="n", phase="Failed")
    stuck = f.pod("s", node_name="n")
    stuck["metadata"]["deletionTimestamp"] = (NOW - timedelta(minutes=2)).isoformat()
    leaving = f.pod("l", node_name="n")
    leaving["metadata"]["deletionTimestamp"] = (NOW - timedelta(seconds=30)).isoformat()
    waiting = [p["metadata"]["name"] for p in
               (tolerant, tolerate_all, other_taint, mirror, done, stuck, leaving)
               if is_waiting_eviction(p, NOW)]
    assert waiting == ["o", "l"]
    assert not is_evictable(leaving, NOW)  # already going: no second eviction


def test_do_not_disrupt_true_protects_and_a_duration_protects_for_that_long() -> None:
    assert do_not_disrupt_active(f.pod("p", node_name="n", do_not_disrupt="true"), NOW)
    assert do_not_disrupt_active(f.pod("p", node_name="n", do_not_disrupt="2h"), NOW)
    assert not do_not_disrupt_active(f.pod("p", node_name="n", do_not_disrupt="30m"), NOW)
    assert not do_not_disrupt_active(f.pod("p", node_name="n", do_not_disrupt="soon"), NOW)
    assert not do_not_disrupt_active(f.pod("p", node_name="n"), NOW)
    assert not is_evictable(f.pod("p", node_name="n", do_not_disrupt="true"), NOW)
    # Protected pods are still waited for: the drain stalls on them.
    assert is_waiting_eviction(f.pod("p", node_name="n", do_not_disrupt="true"), NOW)
