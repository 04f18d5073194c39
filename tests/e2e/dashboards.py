"""Karpenter's published Grafana dashboards against a /metrics text.

data/karpenter_dashboards_v1_14.json lists, per dashboard grafana-values.yaml deploys,
the series its queries read, the fixed label matchers they select on and the labels
they group by (derived from the dashboards' JSON; the commit is in the file).
:func:`unresolved` says which of them a /metrics text would leave empty.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

DASHBOARDS = Path(__file__).parent / "data" / "karpenter_dashboards_v1_14.json"

#: Matchers whose value must be present as such; for the others (capacity_type="spot")
#: the label is enough: which values exist depends on what the cluster launched.
EXACT = frozenset({"resource_type", "quantile"})

#: Selections a panel falls back from (``X or karpenter_nodes_allocatable * 0``), which
#: Karpenter leaves empty too when nothing matches: a node's summed requests of cpu or
#: memory exist only where some (DaemonSet) pod requests them; the ``pods`` count,
#: which the panels read without a fallback, always does.
FALLBACK = frozenset(
    (metric, f'resource_type="{resource}"')
    for metric in ("karpenter_nodes_total_daemon_requests", "karpenter_nodes_total_pod_requests")
    for resource in ("cpu", "memory")
)

#: Labels a panel groups by that Karpenter's own series do not carry either: the panel
#: shows one group there too.
UPSTREAM_ABSENT = {
    ("karpenter_voluntary_disruption_decisions_total", "nodepool"):
        "Karpenter labels it decision, reason and consolidation_type only",
}


def dashboards() -> dict[str, dict[str, Any]]:
    """The series of each dashboard, as kept in the data file."""
    return dict(json.loads(DASHBOARDS.read_text())["dashboards"])


def samples(text: str) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples."""
    out: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


def unresolved(text: str) -> list[str]:
    """What each dashboard's queries would find missing in ``text`` (empty: all
    resolve)."""
    have = samples(text)
    problems = []
    for board, series in dashboards().items():
        for name, wants in series.items():
            label_sets = have.get(name, [])
            if not label_sets:
                problems.append(f"{board}: no {name} sample")
                continue
            for matcher in wants["matchers"]:
                if (name, matcher) in FALLBACK:
                    continue
                key, value = matcher.split("=", 1)
                value = value.strip('"')
                if key in EXACT:
                    ok = any(labels.get(key) == value for labels in label_sets)
                else:
                    ok = any(key in labels for labels in label_sets)
                if not ok:
                    problems.append(f"{board}: no {name}{{{matcher}}}")
            for label in wants["by"]:
                if (name, label) in UPSTREAM_ABSENT:
                    continue
                if not any(label in labels for labels in label_sets):
                    problems.append(f"{board}: {name} has no label {label!r} to group by")
    return problems
