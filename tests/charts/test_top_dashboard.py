"""The Grafana dashboard (charts/karpy/dashboards/karpy.json) parses, and every metric
its queries read is one karpy emits (the state gauges of karpy.controllers.metrics and
the instruments of karpy.controllers.instruments), with labels those gauges carry, so
a renamed metric breaks this test instead of leaving an empty panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

from opentelemetry.metrics import Meter
from prometheus_client import Gauge

from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.metrics import GAUGES
from karpy.controllers.summary import Summary

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "karpy" / "dashboards" / "karpy.json"
_METRIC = re.compile(r"\b(karp(?:enter|y)_[a-zA-Z0-9_]+)")
_SELECTOR = re.compile(r"\b(karp(?:enter|y)_[a-zA-Z0-9_]+)\{([^}]*)\}")
_BY = re.compile(r"\bby \(([^)]*)\)")


class _RecordingMeter:
    """Records the name and kind of every instrument created on it."""

    def __init__(self) -> None:
        self.instruments: dict[str, str] = {}

    def __getattr__(self, method: str) -> Any:
        def create(name: str, *args: Any, **kwargs: Any) -> Any:
            self.instruments[name] = method.removeprefix("create_")
            return object()

        return create


def emitted() -> dict[str, tuple[str, ...] | None]:
    """Every series name karpy exports, with its label names when known statically."""
    names: dict[str, tuple[str, ...] | None] = {g.name: g.labels for g in GAUGES}
    meter = _RecordingMeter()
    instruments = KarpenterMetrics(cast(Meter, meter))
    assert len(meter.instruments) > 20  # the recording meter saw the instruments
    for summary in vars(instruments).values():
        if isinstance(summary, Gauge):  # prometheus_client's, for series a round replaces
            [family] = summary.describe()
            names[family.name] = tuple(summary._labelnames)
        if isinstance(summary, Summary):
            names[summary.name] = (*summary.labels, "quantile")
            names[summary.name + "_sum"] = summary.labels
            names[summary.name + "_count"] = summary.labels
    for name, kind in meter.instruments.items():
        if kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                names[name + suffix] = None
        else:
            names[name] = None
    return names


def queries(dashboard: dict[str, Any]) -> list[str]:
    out = []
    for panel in dashboard["panels"]:
        out.extend(t["expr"] for t in panel.get("targets", ()))
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            out.append(query["query"])
    return out


def test_dashboard_parses_and_covers_nodes_pending_cost_and_disruption() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    exprs = queries(dashboard)
    used = {m for e in exprs for m in _METRIC.findall(e)}
    for needed in ("karpy_cluster_cost_per_hour", "karpy_nodepool_cost_per_hour",
                   "karpenter_nodes_allocatable", "karpenter_pods_state",
                   "karpenter_voluntary_disruption_decisions_total"):
        assert needed in used, f"the dashboard does not show {needed}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_every_metric_the_dashboard_reads_is_emitted_with_those_labels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    known = emitted()
    for expr in queries(dashboard):
        metrics = _METRIC.findall(expr)
        assert metrics, f"query reads no karpy metric: {expr}"
        for metric in metrics:
            assert metric in known, f"{metric} (in {expr!r}) is not a metric karpy emits"
        for metric, selector in _SELECTOR.findall(expr):
            labels = known[metric]
            for matcher in filter(None, (m.strip() for m in selector.split(","))):
                label = re.split(r"[=!~]", matcher, maxsplit=1)[0].strip()
                assert labels is None or label in labels, f"{metric} has no label {label!r}"
        for group in _BY.findall(expr):
            for label in (x.strip() for x in group.split(",")):
                for metric in metrics:
                    labels = known[metric]
                    assert labels is None or label in labels or label == "le", (
                        f"{metric} has no label {label!r} to group by (in {expr!r})")
