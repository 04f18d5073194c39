"""Every metric of Karpenter v1.14's metrics reference is on karpy's /metrics, with
Karpenter's type and labels, or is listed below with the reason it is not.

The reference is kept as data (data/karpenter_v1_14_metrics.json: names from the
reference page, types and label names from the Go code that defines them, with the
commits read). karpy's side is what its operator wires: a Manager, the Karpenter
instruments and every controller package registered as ``karpy run`` registers them,
for a provider serving ``EC2NodeClass`` (so the per-NodeClass ``operator_*`` family is
Karpenter-AWS's). An OpenTelemetry instrument shows on /metrics only once recorded, so
each one created during the wiring gets one observation before /metrics is rendered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from opentelemetry.sdk.metrics import Meter as SdkMeter

from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers import disruption, provisioning
from karpy.controllers.settings import Settings
from karpy.operator import CONTROLLER_PACKAGES, build_deps
from karpy.runtime import Kind, KubeClient, Manager
from karpy.runtime.testing import FakeClient, FakeClock

REFERENCE = Path(__file__).parent / "data" / "karpenter_v1_14_metrics.json"
EC2_NODE_CLASS = Kind(
    group="karpenter.k8s.aws", version="v1", kind="EC2NodeClass", plural="ec2nodeclasses",
    namespaced=False,
)

#: Reference metrics karpy's core does not emit, and why. The test fails when one of
#: these appears (remove it here) or another goes missing.
NOT_EMITTED: dict[str, str] = {}

#: Karpenter-AWS's catalogue gauges, which karpy's core exports for every provider.
CORE_EMITS_AWS = frozenset({
    "karpenter_cloudprovider_instance_type_offering_price_estimate",
    "karpenter_cloudprovider_instance_type_offering_available",
    "karpenter_cloudprovider_instance_type_cpu_cores",
    "karpenter_cloudprovider_instance_type_memory_bytes",
})

#: Karpenter-AWS's metrics that are not the core's and that karpy-aws does not emit
#: either (karpy-aws emits the interruption, instance-status, launch/termination-failure,
#: CreateFleet-batcher and AWS SDK ones itself, on the manager's /metrics when that
#: provider runs): none left.
AWS_NOT_EMITTED: dict[str, str] = {}

_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')


def reference() -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], json.loads(REFERENCE.read_text())["metrics"])


@pytest.fixture
def instruments(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every OpenTelemetry instrument created while the test runs."""
    return record_instruments(monkeypatch)


def record_instruments(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A list that every OpenTelemetry instrument created from now on is added to."""
    created: list[Any] = []
    for method in ("create_counter", "create_up_down_counter", "create_histogram",
                   "create_gauge"):
        original = getattr(SdkMeter, method)

        def wrapper(self: Any, *args: Any, _original: Any = original, **kw: Any) -> Any:
            instrument = _original(self, *args, **kw)
            created.append(instrument)
            return instrument

        monkeypatch.setattr(SdkMeter, method, wrapper)
    return created


def wire(settings: Settings | None = None) -> Manager:
    """karpy's controllers wired as the operator wires them (nothing runs)."""
    clock = FakeClock()
    manager = Manager(cast(KubeClient, FakeClient(clock=clock)), metrics_bind_address="0",
                      health_probe_bind_address="0", clock=clock)
    deps = build_deps(
        manager=manager, provider=FakeCloudProvider(node_classes=(EC2_NODE_CLASS,)),
        clock=clock, settings=settings or Settings(),
    )
    disruption.register(deps, provisioning.register(deps))
    for register in CONTROLLER_PACKAGES:
        register(deps)
    manager.metrics.controller("probe", 1).reconciled("success", 0.1)
    manager.metrics.leader("karpy", True)
    return manager


def observe_all(instruments: list[Any]) -> None:
    for instrument in instruments:
        for method in ("add", "record", "set"):
            if hasattr(instrument, method):
                getattr(instrument, method)(1)
                break


def exposed(text: str) -> Iterator[tuple[str, str, set[str]]]:
    """(family name, type, label names of its samples) of each family on /metrics."""
    families: dict[str, tuple[str, set[str]]] = {}
    current = ""
    for line in text.splitlines():
        if m := _TYPE.match(line):
            current = m.group(1)
            families[current] = (m.group(2), set())
        elif (m := _SAMPLE.match(line)) and current:
            families[current][1].update(_LABEL.findall(m.group(2) or ""))
    for name, (kind, labels) in families.items():
        # prometheus_client names a counter's family without its _total suffix.
        yield (name + "_total" if kind == "counter" and not name.endswith("_total")
               else name), kind, labels


def karpy_metrics(instruments: list[Any]) -> dict[str, tuple[str, set[str]]]:
    manager = wire()
    observe_all(instruments)
    text = manager.metrics.render().decode()
    return {name: (kind, labels) for name, kind, labels in exposed(text)}


def test_every_reference_metric_is_emitted_or_listed_with_its_reason(
    instruments: list[Any],
) -> None:
    emitted = karpy_metrics(instruments)
    wanted = {m["name"] for m in reference() if m["provider"] == "core"}
    wanted |= {m["name"] for m in reference() if m["name"].startswith("operator_ec2nodeclass")}
    wanted |= CORE_EMITS_AWS
    missing = sorted(wanted - emitted.keys())
    assert missing == sorted(NOT_EMITTED), (
        "reference metrics missing from /metrics and not in NOT_EMITTED: "
        f"{sorted(set(missing) - set(NOT_EMITTED))}; emitted now, remove from NOT_EMITTED: "
        f"{sorted(set(NOT_EMITTED) - set(missing))}"
    )


def test_emitted_reference_metrics_have_karpenters_type(instruments: list[Any]) -> None:
    """A histogram where Karpenter has a summary leaves a dashboard's quantile panels
    empty; a gauge where it has a counter breaks every rate()."""
    emitted = karpy_metrics(instruments)
    wrong = {
        m["name"]: (emitted[m["name"]][0], m["type"])
        for m in reference() if m["name"] in emitted and emitted[m["name"]][0] != m["type"]
    }
    assert wrong == {}, "(karpy's type, Karpenter's type)"


def test_aws_only_names_are_accounted_for() -> None:
    aws = {m["name"] for m in reference() if m["provider"] == "aws"}
    in_karpy_aws = {
        "karpenter_interruption_received_messages_total",
        "karpenter_interruption_message_queue_duration_seconds",
        "karpenter_interruption_deleted_messages_total",
        "karpenter_interruption_instance_status_unhealthy_total",
        "karpenter_cloudprovider_instance_launch_failures_total",
        "karpenter_cloudprovider_instance_termination_failures_total",
        "karpenter_cloudprovider_batcher_batch_time_seconds",
        "karpenter_cloudprovider_batcher_batch_size",
        "aws_sdk_go_request_total",
        "aws_sdk_go_request_retry_count",
        "aws_sdk_go_request_duration_seconds",
        "aws_sdk_go_request_attempt_total",
        "aws_sdk_go_request_attempt_duration_seconds",
    }
    operator_ec2 = {n for n in aws if n.startswith("operator_ec2nodeclass_")}
    assert aws == in_karpy_aws | operator_ec2 | CORE_EMITS_AWS | set(AWS_NOT_EMITTED)
    source = "\n".join(
        p.read_text() for p in (Path(__file__).parents[3] / "providers" / "aws"
                                / "karpy_aws").rglob("*.py")
    )
    for name in in_karpy_aws:
        assert f'"{name}"' in source, f"karpy-aws no longer defines {name}"


def controllers(manager: Manager) -> set[str]:
    """The controllers wired, as controller_runtime_max_concurrent_reconciles names them."""
    text = manager.metrics.render().decode()
    return set(re.findall(r'^controller_runtime_max_concurrent_reconciles\{controller="([^"]+)"',
                          text, re.M))


def test_disable_cluster_state_observability_leaves_out_the_state_metrics() -> None:
    """Karpenter's DISABLE_CLUSTER_STATE_OBSERVABILITY: no pod/node/NodePool state
    metrics controllers and no operator_* status controllers."""
    state = {"metrics.pod", "metrics.nodepool", "metrics.node", "operatorpkg.nodeclaim.status",
             "operatorpkg.nodepool.status", "operatorpkg.node.status",
             "operatorpkg.ec2nodeclass.status"}
    assert state <= controllers(wire())
    off = controllers(wire(Settings(disable_cluster_state_observability=True)))
    assert state & off == set()
    assert {"metrics.cost", "metrics.cluster_state", "provisioner"} <= off


def test_state_gauges_carry_karpenters_labels() -> None:
    """The gauges whose label names are fixed up front (the state gauges) carry every
    label Karpenter's have: a dashboard grouping by one of them must not come up empty."""
    from karpy.controllers.metrics import GAUGES

    by_name = {m["name"]: m for m in reference()}
    checked = 0
    for gauge in GAUGES:
        metric = by_name.get(gauge.name)
        if metric is None:
            continue
        missing = set(metric["labels"]) - set(gauge.labels)
        assert missing == set(), f"{gauge.name} lacks Karpenter's labels {sorted(missing)}"
        checked += 1
    assert checked >= 15
