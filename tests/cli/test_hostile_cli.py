"""Malformed and hostile input to the ``karpy`` commands (issue 39): ``karpy run``'s
environment read as Karpenter reads it (component-base's MapStringBool for
FEATURE_GATES, strconv for numbers), ``simulate --snapshot`` on truncated, deeply nested
or alias-bombed files and on requirements Go cannot read, ``convert`` on TTLs, bytes and
shapes it cannot convert. Each ends in status 2 and one line naming the field or the
file's position, fast — never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.cli import build_parser
from karpy.options import ConfigError, options_from_args
from tests.cli.test_malformed_input import SOURCES, assert_one_line_or_success, run_cli

SNAPSHOT = Path(__file__).resolve().parents[1] / "tools" / "data" / "small-cluster.yaml"


@contextlib.contextmanager
def _cpu_seconds() -> Iterator[Callable[[], float]]:
    """This thread's CPU seconds inside the block, garbage collection held off: other
    threads of the process (a test worker's moto server) and a collection of what
    earlier examples left behind are not the parse's cost."""
    gc.disable()
    started = time.thread_time()
    try:
        yield lambda: time.thread_time() - started
    finally:
        gc.enable()


@functools.cache
def _parser() -> argparse.ArgumentParser:
    # built once: the first build finds the installed providers (entry points), a cost
    # the timed checks below are not about
    return build_parser()


def _options(**env: str) -> Any:
    return options_from_args(_parser().parse_args(["run"]), environ=env)


@pytest.mark.parametrize(
    ("env", "words"),
    [({"FEATURE_GATES": "NodeRepair"}, ["FEATURE_GATES", "malformed pair"]),
     ({"FEATURE_GATES": "NodeRepair=true, ,NodeOverlay=true"}, ["FEATURE_GATES", "malformed"]),
     ({"FEATURE_GATES": "NodeRepair=yes"}, ["FEATURE_GATES", "NodeRepair", "'yes'"]),
     ({"KUBE_CLIENT_BURST": "1" + "0" * 30}, ["KUBE_CLIENT_BURST", "2^63-1"]),
     ({"KUBE_CLIENT_BURST": "\uff13\uff10\uff10"}, ["KUBE_CLIENT_BURST"]),
     ({"KUBE_CLIENT_QPS": "\uff15"}, ["KUBE_CLIENT_QPS"]),
     ({"KUBE_CLIENT_QPS": "1_0"}, ["KUBE_CLIENT_QPS"]),
     ({"METRICS_PORT": "\u0668\u0660\u0668\u0660"}, ["METRICS_PORT"]),
     ({"COST_IMPROVEMENT_BUDGET": "9" * 25}, ["COST_IMPROVEMENT_BUDGET"]),
     ({"DISABLE_LEADER_ELECTION": "yes"}, ["DISABLE_LEADER_ELECTION"])],
)  # fmt: skip
def test_run_refuses_what_karpenter_refuses_in_one_line(
    env: dict[str, str], words: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        _options(**env)
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_run_reads_gates_and_booleans_as_go_does() -> None:
    options = _options(FEATURE_GATES="NodeRepair=t,,SpotToSpotConsolidation=TRUE",
                       DISABLE_LEADER_ELECTION="1", KUBE_CLIENT_BURST="+0300")  # fmt: skip
    gates = options.settings.feature_gates
    assert (gates.node_repair, gates.spot_to_spot_consolidation) == (True, True)
    assert options.leader_elect is False and options.kube_client_burst == 300


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["FEATURE_GATES", "KUBE_CLIENT_BURST", "KUBE_CLIENT_QPS",
                        "METRICS_PORT", "DISABLE_LEADER_ELECTION", "BATCH_IDLE_DURATION"]),
       st.text(max_size=24) | st.sampled_from(["NodeRepair", "=true", "x=1=2", "1e30", "\uff11"]))
def test_run_env_values_are_accepted_or_refused_in_one_line(name: str, text: str) -> None:
    _parser()
    with _cpu_seconds() as spent:
        try:
            _options(**{name: text})
        except ConfigError as err:
            assert "\n" not in str(err) and name in str(err)
        assert spent() < 0.1


# -- simulate --snapshot -------------------------------------------------------------


def _simulate(tmp_path: Path, text: str, name: str = "snap.yaml") -> tuple[int, str, float]:
    path = tmp_path / name
    path.write_text(text)
    started = time.monotonic()
    status, _, stderr = run_cli(["simulate", "--snapshot", str(path)])
    return status, stderr, time.monotonic() - started


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_a_truncated_snapshot_fails_fast_naming_the_file_and_position(
    tmp_path: Path, form: str
) -> None:
    full = yaml.safe_load(SNAPSHOT.read_text())
    text = json.dumps(full) if form == "json" else yaml.safe_dump(full)
    status, stderr, took = _simulate(tmp_path, text[: len(text) // 2], f"snap.{form}")
    assert status == 2 and len(stderr.splitlines()) == 1, stderr
    assert str(tmp_path) in stderr and ("line" in stderr or "document" in stderr), stderr
    assert "kubeconfig" not in stderr
    assert took < 10  # it fails on reading, not after a 120 s wait for a cluster


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"a":' * 150 + "1" + "}" * 150, "a: &a [*a]\n",
     "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
         f"{n}: &{n} [{','.join(['*' + p] * 9)}]\n"
         for p, n in zip("abcdefgh", "bcdefghi", strict=True))],
    ids=["deep-json", "deep-json-object", "alias-cycle", "alias-bomb"],
)  # fmt: skip
def test_a_hostile_snapshot_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    status, stderr, took = _simulate(tmp_path, text)
    assert status == 2 and len(stderr.splitlines()) == 1, stderr
    assert "Traceback" not in stderr and str(tmp_path) in stderr
    assert took < 10


@pytest.mark.parametrize(
    "requirement",
    [{"key": "example.com/gen", "operator": "Gt", "values": ["1_000"]},
     {"key": "example.com/gen", "operator": "Gt", "values": ["x"]},
     {"key": "example.com/gen", "values": ["a"]}],
)  # fmt: skip
@pytest.mark.parametrize("where", ["NodePool", "Pod"])
def test_a_requirement_go_cannot_read_is_no_traceback(
    tmp_path: Path, requirement: dict[str, Any], where: str
) -> None:
    snapshot = yaml.safe_load(SNAPSHOT.read_text())
    target = next(i for i in snapshot["items"] if i["kind"] == where)
    if where == "NodePool":
        target["spec"]["template"]["spec"]["requirements"].append(copy.deepcopy(requirement))
    else:
        target["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [copy.deepcopy(requirement)]}]}}}
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(snapshot))
    status, stdout, stderr = run_cli(["simulate", "--snapshot", str(path)])
    assert "Traceback" not in stderr and status in (0, 2), stderr
    if where == "NodePool":
        # The NodePool is invalid: shown as not usable, naming the requirement.
        assert "invalid" in stdout and "requirement" in stdout, stdout


# -- convert ---------------------------------------------------------------------------

PROVISIONER = next(d for d in SOURCES if d.get("kind") == "Provisioner")


@pytest.mark.parametrize("ttl", [float("inf"), float("nan"), 10**30, -5, True, "30", 1.5])
@pytest.mark.parametrize("field", ["ttlSecondsUntilExpired", "ttlSecondsAfterEmpty"])
def test_convert_refuses_a_ttl_go_cannot_hold_naming_the_field(field: str, ttl: Any) -> None:
    doc = copy.deepcopy(PROVISIONER)
    doc["spec"].pop("consolidation", None)
    doc["spec"][field] = ttl
    status, stdout, stderr = run_cli(["convert", "-", "--default-nodeclass",
                                      "EC2NodeClass.karpenter.k8s.aws"], stdin=yaml.dump(doc))
    assert_one_line_or_success(status, stdout, stderr, "karpy convert: ")
    assert status == 2 and f"spec.{field}" in stderr, stderr


def test_convert_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\n# caf\xe9\n")
    status, stdout, stderr = run_cli(["convert", str(path)])
    assert_one_line_or_success(status, stdout, stderr, "karpy convert: ")
    assert status == 2 and "not UTF-8" in stderr and str(path) in stderr


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [(("spec", "disruption"), "x", "spec.disruption"),
     (("spec", "template", "spec", "requirements"), ["x"],
      "spec.template.spec.requirements[0]"),
     (("spec", "weight"), -5, "spec.weight"),
     (("spec", "template", "spec", "requirements"),
      [{"key": "example.com/gen", "operator": "Gt", "values": ["1_000"]}],
      "spec.template.spec.requirements[0]")],
)  # fmt: skip
def test_convert_names_the_object_and_the_field(
    path: tuple[str, ...], value: Any, field: str
) -> None:
    doc = copy.deepcopy(next(d for d in SOURCES if d.get("kind") == "NodePool"))
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    status, stdout, stderr = run_cli(["convert", "-", "--default-nodeclass",
                                      "EC2NodeClass.karpenter.k8s.aws"], stdin=yaml.dump(doc))
    assert_one_line_or_success(status, stdout, stderr, "karpy convert: ")
    name = doc["metadata"]["name"]
    assert status == 2 and f"NodePool/{name}" in stderr and field in stderr, stderr


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["ttlSecondsUntilExpired", "ttlSecondsAfterEmpty"]),
       st.one_of(st.integers(-(10**25), 10**25), st.floats(), st.text(max_size=6),
                 st.booleans()))
def test_convert_any_ttl_converts_or_is_refused_naming_it(field: str, ttl: Any) -> None:
    doc = copy.deepcopy(PROVISIONER)
    doc["spec"].pop("consolidation", None)
    doc["spec"][field] = ttl
    with _cpu_seconds() as spent:
        status, stdout, stderr = run_cli(["convert", "-", "--default-nodeclass",
                                          "EC2NodeClass.karpenter.k8s.aws"], stdin=yaml.dump(doc))
        assert spent() < 0.5  # the whole command, models included
    assert_one_line_or_success(status, stdout, stderr, "karpy convert: ")
    if status == 2:
        assert f"spec.{field}" in stderr, stderr
    else:
        assert isinstance(ttl, int) and not isinstance(ttl, bool) and 0 <= ttl < 2**63 // 10**9
