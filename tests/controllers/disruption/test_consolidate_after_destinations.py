"""Which nodes take no consolidation's pods: those under their NodePool's consolidateAfter,
measured as Karpenter measures it (IsUnderConsolidateAfter, pkg/utils/disruption at
v1.14.1): since the NodeClaim's lastPodEventTime, or its Initialized transition when it
has had no pod event, on the clock — not from the Consolidatable condition, which lags a
pod event until nodeclaim.disruption reconciles again."""

from __future__ import annotations

from typing import Any

from disruption_support import NOW, Scene

from karpy.controllers.disruption import Candidate, Command, build_candidate, consolidate
from karpy.controllers.disruption._candidates import GRACEFUL
from karpy.controllers.disruption._consolidation import settling_machines
from karpy.runtime import freeze, thaw


def _candidate(scene: Scene, node: str) -> Candidate:
    state = scene.cluster.node_by_name(node)
    assert state is not None
    built = build_candidate(state, scene.snapshot(), GRACEFUL)
    assert isinstance(built, Candidate), built
    return built


def _stamp(scene: Scene, node: str, *, last_pod_event: str | None = None,
           initialized_at: str | None = None) -> None:
    state = scene.cluster.node_by_name(node)
    assert state is not None and state.nodeclaim is not None
    claim: dict[str, Any] = thaw(state.nodeclaim)
    if last_pod_event is not None:
        claim["status"]["lastPodEventTime"] = last_pod_event
    if initialized_at is not None:
        for c in claim["status"]["conditions"]:
            if c["type"] == "Initialized":
                c["lastTransitionTime"] = initialized_at
    scene.cluster.update_nodeclaim(freeze(claim))


def _settling(scene: Scene) -> frozenset[str]:
    return settling_machines(scene.cluster.nodes(), scene.cluster.nodepool, now=NOW)


def test_a_pod_event_inside_the_window_keeps_pods_off_though_still_consolidatable() -> None:
    # "fresh" still says Consolidatable (its condition not yet updated) but took a pod a
    # minute ago: Karpenter's scheduler reads the clock and keeps "old"'s pod off it.
    scene = Scene()
    scene.pool(consolidateAfter="5m")
    scene.machine("old", "m-4x")
    scene.machine("fresh", "m-8x")  # Consolidatable=True
    _stamp(scene, "fresh", last_pod_event="2026-11-23T11:59:00Z")
    scene.pod("moving", "old", cpu="1")
    scene.pod("busy", "fresh", cpu="1")
    assert _settling(scene) == {"fresh"}
    outcome = consolidate(scene.whatif(), [_candidate(scene, "old")])
    assert isinstance(outcome, Command), outcome
    assert outcome.results is not None
    assert outcome.results.placements().get("default/moving") != "fresh"


def test_the_window_counts_from_initialization_when_there_was_no_pod_event() -> None:
    scene = Scene()
    scene.pool(consolidateAfter="5m")
    scene.machine("new", "m-8x")
    scene.machine("settled", "m-8x")
    scene.machine("used", "m-8x")
    _stamp(scene, "new", initialized_at="2026-11-23T11:58:00Z")  # 2 min ago, no pod event
    _stamp(scene, "settled", initialized_at="2026-11-23T11:50:00Z")  # 10 min ago
    # a pod event 10 minutes ago wins over an initialization 1 minute ago
    _stamp(scene, "used", initialized_at="2026-11-23T11:59:00Z",
           last_pod_event="2026-11-23T11:50:00Z")
    assert _settling(scene) == {"new"}


def test_the_window_ends_at_exactly_consolidate_after() -> None:
    scene = Scene()
    scene.pool(consolidateAfter="5m")
    scene.machine("edge", "m-8x")
    scene.machine("inside", "m-8x")
    _stamp(scene, "edge", last_pod_event="2026-11-23T11:55:00Z")  # since == 5m: not under
    _stamp(scene, "inside", last_pod_event="2026-11-23T11:55:01Z")
    assert _settling(scene) == {"inside"}


def test_no_window_without_a_consolidate_after_or_before_initialization() -> None:
    scene = Scene()
    scene.pool("zero", consolidateAfter="0s")
    scene.pool("never", consolidateAfter="Never")
    scene.pool("default", consolidateAfter="5m")
    scene.machine("z", "m-8x", pool="zero")
    scene.machine("n", "m-8x", pool="never")
    scene.machine("booting", "m-8x", initialized=False)
    for name in ("z", "n"):
        _stamp(scene, name, last_pod_event="2026-11-23T11:59:30Z")
    assert _settling(scene) == frozenset()
