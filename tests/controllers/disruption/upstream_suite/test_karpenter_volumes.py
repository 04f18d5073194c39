"""Volume topology in the disruption what-if, as Karpenter's simulation has it: every
pod it schedules — the candidates' own included — is restricted to where its
persistent volumes can be mounted (``getVolumeTopologyRequirements`` in
``Provisioner.NewScheduler``), except a local volume's hostname pin, which dies with
the node (suite_test.go It("can replace node with a local PV (ignoring hostname
affinity)"))."""

from __future__ import annotations

import logging

import pytest
from ksuite import MOST_EXPENSIVE, Scene, decide, karpenter_scene, machine, names

from karpy.controllers.settings import FeatureGates, Settings
from karpy.state.testing import persistent_volume, persistent_volume_claim

SPOT_TO_SPOT = Settings(feature_gates=FeatureGates(spot_to_spot_consolidation=True))
ZONE = "topology.kubernetes.io/zone"


def node_with_volume_pod(pv: dict[str, object]) -> Scene:
    """One most-expensive node (test-zone-1) whose StatefulSet pod mounts ``pv``."""
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="32Gi", zone="test-zone-1")
    scene.cluster.volumes.update_volume(pv)
    scene.cluster.volumes.update_claim(persistent_volume_claim("data", volume_name="pv-data"))
    scene.pod("db-0", "node", cpu="10m", memory="10Mi", claims=["data"],
              owner_kind="StatefulSet", owner_name="db")
    return scene


async def test_a_replacement_stays_where_the_moving_pods_volume_lives() -> None:
    """A candidate's pod whose volume lives in test-zone-1 is replaced by a node in
    test-zone-1 only: a replacement elsewhere would leave the pod unable to mount it."""
    scene = node_with_volume_pod(persistent_volume("pv-data", zones=["test-zone-1"]))
    [command] = await decide(scene, SPOT_TO_SPOT)
    assert names([command]) == [("Underutilized", "replace", ["node"], 1)]
    [plan] = command.replacements
    assert plan.requirements[ZONE].values == {"test-zone-1"}


async def test_can_replace_node_with_a_local_pv_ignoring_hostname_affinity() -> None:
    """suite_test.go It("can replace node with a local PV (ignoring hostname
    affinity)"): the PV is pinned to the node's hostname; the pin is dropped for the
    move, so the node is replaced all the same."""
    scene = node_with_volume_pod(persistent_volume(
        "pv-data", local_path="/mnt/disks/data", node_selector_terms=[[
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node"]}]]))
    assert names(await decide(scene, SPOT_TO_SPOT)) == [
        ("Underutilized", "replace", ["node"], 1)]


async def test_a_pod_whose_claim_cannot_be_resolved_still_needs_room(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A candidate's pod whose claim does not exist moves without a volume restriction
    (it still needs room) and the error is logged, as for a deleting node's pods."""
    scene = karpenter_scene()
    machine(scene, "node", MOST_EXPENSIVE, cpu="32", memory="32Gi", zone="test-zone-1")
    scene.pod("db-0", "node", cpu="10m", memory="10Mi", claims=["missing"],
              owner_kind="StatefulSet", owner_name="db")
    with caplog.at_level(logging.ERROR, logger="controller"):
        assert names(await decide(scene, SPOT_TO_SPOT)) == [
            ("Underutilized", "replace", ["node"], 1)]
    assert any(r.getMessage() == "failed getting volume topology requirements"
               for r in caplog.records)
