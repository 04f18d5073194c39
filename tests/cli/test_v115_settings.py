"""``karpy run`` on Karpenter v1.15's settings (issue 37), through the real command where
the user meets them: the v1.15.0 default FEATURE_GATES and the v1.15.2 AWS_FEATURE_GATES
strings get past the checks (karpy refused the three new core gates before);
LEGACY_NODE_REPAIR and SCHEDULER_CONFIG (Karpenter v1.15.0 pkg/operator/options) are
read, and a SCHEDULER_CONFIG kube-scheduler would refuse (Karpenter's validation) stops it
with one line naming the field."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from test_run_settings import karpy_run

from karpy.options import ConfigError, Options, add_run_arguments, options_from_args

#: Karpenter v1.15.0's featureGatesDefault(): KarpenterFeatureGates, in order.
V115_GATES = (
    "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,"
    "StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,"
    "TerminateFirstRepair=false,PodDeletionCostManagement=false"
)


def _options(env: dict[str, str]) -> Options:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return options_from_args(parser.parse_args([]), env)


def test_karpys_default_gates_are_karpenter_v115s() -> None:
    from karpy.options import SETTINGS

    (gates,) = [s for s in SETTINGS if s.env == "FEATURE_GATES"]
    assert gates.default == V115_GATES


def test_karpenter_v115_default_gate_strings_get_past_the_checks(tmp_path: Path) -> None:
    env = {
        "FEATURE_GATES": V115_GATES,
        "CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c", "AWS_REGION": "us-east-1",
        "AWS_FEATURE_GATES": "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,"
                             "RebootForRepair=false",
        "SECURITY_GROUP_REFRESH_INTERVAL": "1m", "LEGACY_NODE_REPAIR": "false",
    }  # fmt: skip
    done = karpy_run(env=env, home=tmp_path)
    assert done.returncode == 1, done.stderr
    (last,) = [ln for ln in done.stderr.splitlines() if ln.startswith("karpy run:")]
    # it got as far as connecting: no setting was refused
    assert "kubeconfig" in last and "GATES" not in done.stderr


def test_legacy_node_repair_is_read_and_false_by_default() -> None:
    assert _options({}).settings.legacy_node_repair is False
    assert _options({"LEGACY_NODE_REPAIR": "true"}).settings.legacy_node_repair is True
    with pytest.raises(ConfigError, match=r"LEGACY_NODE_REPAIR \(flag --legacy-node-repair\)"):
        _options({"LEGACY_NODE_REPAIR": "sometimes"})


@pytest.mark.parametrize(
    "config", ["", "{}", "podTopologySpread: {}", "podTopologySpread:\n  defaultConstraints: []"]
)
def test_a_scheduler_config_without_default_constraints_is_accepted(config: str) -> None:
    _options({"SCHEDULER_CONFIG": config})


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 0\n"
         "    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: ScheduleAnyway",
         "podTopologySpread.defaultConstraints[0].maxSkew must be greater than 0"),
        ("podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n"
         "    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n"
         "    labelSelector: {matchLabels: {app: x}}",
         "labelSelector must not be set, as selectors are deduced for each pod"),
        ("podTopologySpread:\n  defaultConstraints:\n"
         "  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}\n"
         "  - {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}",
         "defaultConstraints[1] is a duplicate of [0], {zone, DoNotSchedule}"),
        ("profiles:\n- podTopologySpread: {}", "profiles[0].schedulerName must be set"),
        ("podTopologySpreads: {}", "unknown field 'podTopologySpreads'"),
        ("podTopologySpread:\n  defaultConstraint: []",
         "unknown field podTopologySpread.defaultConstraint"),
        ("[1, 2", "is not a YAML/JSON document"),
    ],
)  # fmt: skip
def test_a_scheduler_config_kube_scheduler_would_refuse_is_refused_naming_it(
    config: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _options({"SCHEDULER_CONFIG": config})
    line = str(caught.value)
    assert line.startswith("SCHEDULER_CONFIG (flag --scheduler-config)") and "\n" not in line
    assert words in line


def test_default_constraints_are_read_per_scheduler() -> None:
    config = _options({"SCHEDULER_CONFIG": (
        "podTopologySpread:\n  defaultConstraints:\n"
        "  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, "
        "whenUnsatisfiable: DoNotSchedule}\n"
        "profiles:\n- schedulerName: batch\n  podTopologySpread: {}\n"
    )}).settings.scheduler_config
    [zone] = config.for_scheduler("")
    assert (zone.topology_key, zone.max_skew, zone.required) == (
        "topology.kubernetes.io/zone", 1, True)
    assert config.for_scheduler("default-scheduler") == (zone,)
    assert config.for_scheduler("batch") == ()
    assert config.for_scheduler("unknown") == ()
