"""settings.disableClusterStateObservability reaches karpy as Karpenter's
DISABLE_CLUSTER_STATE_OBSERVABILITY, and karpy run reads it."""

from __future__ import annotations

import argparse

from charts_support import one, render

from karpy.options import add_run_arguments, options_from_args


def env_of(*args: str) -> dict[str, str]:
    deploy = one(render("--set", "settings.clusterName=c", *args), "Deployment")
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_disable_cluster_state_observability_is_passed_on_and_read() -> None:
    assert "DISABLE_CLUSTER_STATE_OBSERVABILITY" not in env_of()  # Karpenter's default
    env = env_of("--set", "settings.disableClusterStateObservability=true")
    assert env["DISABLE_CLUSTER_STATE_OBSERVABILITY"] == "true"
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    options = options_from_args(parser.parse_args([]), env)
    assert options.settings.disable_cluster_state_observability is True
