"""DRA solve benchmark: 1,000 pods with ResourceClaims beside the same 1,000 pods
without them, on the scheduling benchmark's 400 instance types.

Run from the repository root:

    .venv/bin/python benchmarks/dra_bench.py

Instance types: benchmarks/scheduling_bench.py's recipe; every fourth type also
publishes 1-8 GPUs (``gpu.example.com``, attributes model and index, 80Gi memory
capacity) through a ResourceSliceTemplate. One DeviceClass selects the driver. Pods:
generic requests (CPU {100, 250, 500}m x memory {256, 512, 1024}Mi, seed 42), each
with its own claim: three in four ask for one GPU, one in four for two GPUs of model
A100 with 40Gi or more (``compareTo(quantity(...))``). Timed, first run and best of
``--repeat``: parsing included, as the operator does it — the Pod, ResourceClaim and
DeviceClass manifests into the cluster's DeviceIndex, each pod parsed and its claims
resolved through it, then ``Simulator.solve``; every pod must be placed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduling_bench import instance_types

from karpy.scheduling import InstanceType, NodePoolTemplate, Pod
from karpy.scheduling.devices import Device, DeviceID, ResourceSliceTemplate
from karpy.scheduling.simulator import Simulator
from karpy.state.devices import DeviceIndex

DRIVER = "gpu.example.com"
DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
BIG = (f'device.attributes["{DRIVER}"].model == "A100" && '
       f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0')


def gpu_types() -> list[InstanceType]:
    out = []
    for i, it in enumerate(instance_types()):
        if i % 4 == 3:
            n = 1 + (i // 4) % 8
            devices = tuple(Device(DeviceID(DRIVER, "gpus", f"gpu-{g}"),
                                   {"model": "A100", "index": g},
                                   {"memory": Fraction(80 << 30)}) for g in range(n))
            it = replace(it, resource_slice_templates=(
                ResourceSliceTemplate(DRIVER, "gpus", devices),))
        out.append(it)
    return out


def manifests(count: int, claims: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pods, and their ResourceClaims, as the API server serves them."""
    rng = random.Random(42)
    pods, claim_objs = [], []
    for i in range(count):
        pod: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {
                "cpu": f"{rng.choice((100, 250, 500))}m",
                "memory": f"{rng.choice((256, 512, 1024))}Mi"}}}]}}
        if claims:
            exactly: dict[str, Any] = {"deviceClassName": "gpu"}
            if i % 4 == 3:
                exactly |= {"count": 2, "selectors": [{"cel": {"expression": BIG}}]}
            claim_objs.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"cu{i}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c{i}"}]
            pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        pods.append(pod)
    return pods, claim_objs


def solve(pool: NodePoolTemplate, pods: list[dict[str, Any]],
          claims: list[dict[str, Any]]) -> tuple[int, int]:
    """Parse and solve once, as the provisioner does; (nodes, pods placed)."""
    index = DeviceIndex()
    index.update_class(DEVICE_CLASS)
    for claim in claims:
        index.update_claim(claim)
    batch = []
    for obj in pods:
        resolved = index.resolve(obj, Pod.from_dict(obj))
        if isinstance(resolved, str):
            sys.exit(f"pod {obj['metadata']['name']}: {resolved}")
        batch.append(resolved)
    results = Simulator([pool]).solve(batch, devices=index.inputs())
    if results.errors:
        sys.exit(f"not every pod placed: {len(results.errors)} errors")
    return len(results.new_nodeclaims), sum(len(p.pods) for p in results.new_nodeclaims)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pool = NodePoolTemplate.from_nodepool_dict(
        {"metadata": {"name": "default"}, "spec": {"template": {"spec": {"requirements": []}}}},
        gpu_types())
    for claims in (False, True):
        pods, claim_objs = manifests(args.pods, claims)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            nodes, placed = solve(pool, pods, claim_objs)
            times.append(time.perf_counter() - started)
            if placed != len(pods):
                sys.exit(f"{placed} of {len(pods)} pods placed")
        first, best = times[0], min(times)
        print(f"{'DRA' if claims else 'claim-less'}: {len(pods)} pods, {nodes} nodes, "
              f"first {first * 1000:.0f} ms ({len(pods) / first:,.0f} pods/s), "
              f"best {best * 1000:.0f} ms ({len(pods) / best:,.0f} pods/s)")


if __name__ == "__main__":
    main()
