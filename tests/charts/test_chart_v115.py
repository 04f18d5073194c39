"""Karpenter v1.15's values under charts/karpy (issue 37): the settings block of a
Karpenter v1.15 values file (aws/karpenter-provider-aws v1.15.2, data/) renders, and what
it renders starts ``karpy run`` and karpy-aws; enableDRA, legacyNodeRepair,
securityGroupRefreshInterval and the new gates reach their variables with Karpenter's
chart rules (its deployment.yaml and karpenter.dra helper, v1.15.2)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from charts_support import AWS_SEED, CHART, container_env, helm, one, render
from test_chart_render import run_options

from karpy.operator import warn_unimplemented_gates

V115 = Path(__file__).parent / "data" / "karpenter-v1.15-settings.yaml"

#: Karpenter v1.15.0's and Karpenter AWS v1.15.2's default gate strings, as their charts
#: render them (core order: the chart's, not featureGatesDefault()'s; both are accepted).
CORE_GATES = (
    "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,"
    "StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,"
    "TerminateFirstRepair=false,PodDeletionCostManagement=false"
)
AWS_GATES = "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false"


def _env(*values: str) -> dict[str, Any]:
    return container_env(one(render(*AWS_SEED, "-f", str(V115), *values), "Deployment"))


def _aws(env: dict[str, Any]) -> Any:
    from karpy_aws import AWSSettings

    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    return AWSSettings.from_settings(
        {}, cluster_name="seed-cluster", environ={**plain, "AWS_REGION": "us-east-1"}
    )


def test_a_karpenter_v115_values_file_renders_and_karpy_starts_on_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = _env("--set", "settings.clusterName=seed-cluster")
    assert env["FEATURE_GATES"] == CORE_GATES
    assert env["AWS_FEATURE_GATES"] == AWS_GATES
    assert env["IGNORE_DRA_REQUESTS"] == "true"
    assert env["SECURITY_GROUP_REFRESH_INTERVAL"] == "1m"
    assert "LEGACY_NODE_REPAIR" not in env  # false: Karpenter's chart omits it too
    options = run_options(env)
    gates = options.settings.feature_gates
    assert (
        not (gates.terminate_first_drift or gates.terminate_first_repair)
        and not gates.pod_deletion_cost_management
    )
    assert options.settings.legacy_node_repair is False
    assert options.settings.ignore_dra_requests is True
    aws = _aws(env)
    assert aws.security_group_refresh_interval == 60.0
    assert aws.unimplemented_gates_on() == ()
    with caplog.at_level(logging.WARNING):
        warn_unimplemented_gates(options.settings)
    assert not caplog.records  # nothing on by default: nothing to warn about


def test_every_new_gate_on_starts_karpy_and_each_unimplemented_one_is_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    on = [
        "--set", "settings.featureGates.nodeRepair=true",
        "--set", "settings.featureGates.terminateFirstDrift=true",
        "--set", "settings.featureGates.terminateFirstRepair=true",
        "--set", "settings.featureGates.podDeletionCostManagement=true",
        "--set", "settings.awsFeatureGates.rebootForRepair=true",
        "--set", "settings.awsFeatureGates.draEFA=true",
    ]  # fmt: skip
    env = _env(*on)
    assert "TerminateFirstRepair=true" in env["FEATURE_GATES"].split(",")
    assert env["AWS_FEATURE_GATES"] == (
        "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=true,RebootForRepair=true"
    )
    # a DRA gate on stops ignoring DRA requests, as Karpenter's chart resolves it
    assert env["IGNORE_DRA_REQUESTS"] == "false"
    options = run_options(env)
    assert options.settings.feature_gates.node_repair
    assert not options.settings.ignore_dra_requests
    with caplog.at_level(logging.WARNING):
        warn_unimplemented_gates(options.settings)
    named = [r.__dict__["feature-gate"] for r in caplog.records]
    assert named == ["TerminateFirstDrift", "TerminateFirstRepair", "PodDeletionCostManagement"]
    assert all("not implemented" in r.getMessage() for r in caplog.records)
    assert _aws(env).unimplemented_gates_on() == ("DRAEFA", "RebootForRepair")


def test_enable_dra_turns_both_aws_dra_gates_on_and_stops_ignoring_dra_requests() -> None:
    env = _env("--set", "settings.enableDRA=true")
    assert env["AWS_FEATURE_GATES"] == (
        "NodeClassCEL=false,DRANVIDIAGPU=true,DRAEFA=true,RebootForRepair=false"
    )
    assert env["IGNORE_DRA_REQUESTS"] == "false"
    assert run_options(env).settings.ignore_dra_requests is False
    # an explicit false without enableDRA is passed, not dropped
    assert _env("--set", "settings.ignoreDRARequests=false")["IGNORE_DRA_REQUESTS"] == "false"


def test_legacy_node_repair_and_the_security_group_interval_reach_karpy() -> None:
    env = _env(
        "--set", "settings.featureGates.nodeRepair=true",
        "--set", "settings.legacyNodeRepair=true",
        "--set", "settings.securityGroupRefreshInterval=5m",
    )  # fmt: skip
    assert env["LEGACY_NODE_REPAIR"] == "true"
    assert run_options(env).settings.legacy_node_repair is True
    assert _aws(env).security_group_refresh_interval == 300.0


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (("--set", "settings.enableDRA=true", "--set", "settings.ignoreDRARequests=true"),
         "settings.enableDRA is mutually exclusive with settings.ignoreDRARequests"),
        (("--set", "settings.enableDRA=true", "--set", "settings.awsFeatureGates.draEFA=false"),
         "settings.enableDRA is mutually exclusive with settings.awsFeatureGates.draEFA"),
        (("--set", "settings.legacyNodeRepair=true",
          "--set", "settings.featureGates.terminateFirstRepair=true"),
         "settings.legacyNodeRepair can't be combined with "
         "settings.featureGates.terminateFirstRepair"),
    ],
)  # fmt: skip
def test_combinations_karpenters_chart_refuses_fail_the_render(
    values: tuple[str, ...], named: str
) -> None:
    out = helm("template", "karpy", str(CHART), *AWS_SEED, "-f", str(V115), *values, check=False)
    assert out.returncode != 0
    assert named in out.stderr
