"""The NodePools whose Karpenter hash karpy's tests pin: named edge cases plus seeded
random ones. Prints them as the JSON list ``main.go`` reads::

    python3 scripts/nodepool-hash/cases.py \\
      | (cd scripts/nodepool-hash && TZ=UTC go run .) > tests/apis/data/nodepool_hash_golden.json

Every NodePool is written as the API server stores it (``expireAfter`` defaulted to
720h unless a case sets it).
"""

from __future__ import annotations

import json
import random
from typing import Any

REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
REQS = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
T_A = {"key": "example.com/a", "value": "x", "effect": "NoSchedule"}
T_B = {"key": "example.com/b", "effect": "NoExecute"}
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def pool(
    name: str,
    spec_extra: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    reqs: list[dict[str, Any]] = REQS,
    expire: str | None = "720h",
    pool_spec_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeClassRef": dict(REF), "requirements": reqs}
    if expire is not None:
        spec["expireAfter"] = expire
    spec.update(spec_extra or {})
    template: dict[str, Any] = {"spec": spec}
    if metadata is not None:
        template["metadata"] = metadata
    nodepool: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": template,
                 "disruption": {"consolidateAfter": "0s",
                                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                "budgets": [{"nodes": "10%"}]}},
    }
    nodepool["spec"].update(pool_spec_extra or {})
    return {"name": name, "nodepool": nodepool}


def named() -> list[dict[str, Any]]:
    return [
        pool("minimal"),
        pool("other-requirements", reqs=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1}]),
        pool("other-disruption-limits-weight", pool_spec_extra={
            "disruption": {"consolidateAfter": "5m", "consolidationPolicy": "WhenEmpty",
                           "budgets": [{"nodes": "0", "schedule": "@daily", "duration": "10m",
                                        "reasons": ["Drifted"]}]},
            "limits": {"cpu": "1000"}, "weight": 50}),
        pool("labels-annotations", metadata={
            "labels": {"team": "a", "tier": "web"}, "annotations": {"example.com/owner": "ops"}}),
        pool("labels-only", metadata={"labels": {"team": "a", "tier": "web"}}),
        pool("label-value-changed", metadata={"labels": {"team": "b", "tier": "web"}}),
        pool("empty-labels-map", metadata={"labels": {}}),
        pool("empty-metadata", metadata={}),
        pool("taints", {"taints": [T_A, T_B]}),
        pool("taints-reordered", {"taints": [T_B, T_A]}),
        pool("taints-as-startup-taints", {"startupTaints": [T_A, T_B]}),
        pool("taints-and-startup-taints", {
            "taints": [T_A], "startupTaints": [{"key": "example.com/init",
                                                "effect": "NoSchedule"}]}),
        pool("empty-taints-list", {"taints": []}),
        pool("empty-startup-taints-list", {"startupTaints": []}),
        pool("duplicate-taints", {"taints": [T_A, T_A, T_B]}),
        pool("taint-time-added", {"taints": [
            {"key": "example.com/a", "effect": "NoExecute", "timeAdded": "2024-05-06T07:08:09Z"}]}),
        pool("termination-grace-period", {"terminationGracePeriod": "1h"}),
        pool("termination-grace-period-0s", {"terminationGracePeriod": "0s"}),
        pool("expire-never", expire="Never"),
        pool("expire-0s", expire="0s"),
        pool("expire-1h30m", expire="1h30m"),
        pool("expire-90m", expire="90m"),
        pool("other-nodeclass", {"nodeClassRef": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}),
        pool("unicode-annotation",
             metadata={"annotations": {"example.com/note": "caf\u00e9 \u2615"}}),
        pool("everything", {
            "taints": [T_A], "startupTaints": [T_B], "terminationGracePeriod": "48h",
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "x"}},
            metadata={"labels": {"a": "1"}, "annotations": {"b": "2"}}, expire="336h"),
    ]


def _duration(rng: random.Random) -> str:
    parts = []
    for unit in ("h", "m", "s"):
        if rng.random() < 0.5:
            parts.append(f"{rng.randint(0, 500)}{unit}")
    return "".join(parts) or f"{rng.randint(0, 100)}m"


def _string_map(rng: random.Random, prefix: str) -> dict[str, str]:
    values = ["", "v", "value-1", "x" * 20]
    return {f"{prefix}{rng.randint(0, 9)}.example.com/k{i}": rng.choice(values)
            for i in range(rng.randint(0, 3))}


def _taints(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for _ in range(rng.randint(0, 3)):
        taint: dict[str, Any] = {"key": f"t{rng.randint(0, 4)}.example.com/k",
                                 "effect": rng.choice(EFFECTS)}
        if rng.random() < 0.5:
            taint["value"] = rng.choice(["a", "b", "true"])
        out.append(taint)
    return out


def random_cases(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        spec: dict[str, Any] = {}
        metadata: dict[str, Any] | None = None
        if rng.random() < 0.7:
            metadata = {}
            for key, prefix in (("labels", "l"), ("annotations", "a")):
                if rng.random() < 0.6:
                    metadata[key] = _string_map(rng, prefix)
        for key in ("taints", "startupTaints"):
            if rng.random() < 0.6:
                spec[key] = _taints(rng)
        if rng.random() < 0.4:
            spec["terminationGracePeriod"] = _duration(rng)
        spec["nodeClassRef"] = {"group": rng.choice(["karpenter.kwok.sh", "karpenter.k8s.aws"]),
                                "kind": rng.choice(["KWOKNodeClass", "EC2NodeClass"]),
                                "name": rng.choice(["default", "gpu", "n" + str(i)])}
        expire = "Never" if rng.random() < 0.2 else _duration(rng)
        cases.append(pool(f"random-{i}", spec, metadata=metadata, expire=expire))
    return cases


if __name__ == "__main__":
    print(json.dumps(named() + random_cases(100, seed=20241123), indent=1, ensure_ascii=False))
