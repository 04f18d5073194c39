"""DRA solve benchmark: 1,000 pods with ResourceClaims beside the same 1,000 pods
without them, on the scheduling benchmark's 400 instance types.

Run from the repository root:

    .venv/bin/python benchmarks/dra_bench.py

Instance types: benchmarks/scheduling_bench.py's recipe; every fourth type also
publishes 1-8 GPUs (``gpu.example.com``, attributes model and index, 80Gi memory
capacity) through a ResourceSliceTemplate. One DeviceClass selects the driver. Pods:
generic requests (CPU {100, 250, 500}m x memory {256, 512, 1024}Mi, seed 42), each
with its own claim: three in four ask for one GPU, one in four for two GPUs of model
A100 with 40Gi or more (``compareTo(quantity(...))``). Timed: ``Simulator.solve`` on
parsed pods, best of ``--repeat``; every pod must be placed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduling_bench import instance_types

from karpy.scheduling import InstanceType, NodePoolTemplate, Pod
from karpy.scheduling.devices import (
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    ResourceSliceTemplate,
)
from karpy.scheduling.devicetracker import DeviceInputs
from karpy.scheduling.simulator import Simulator

DRIVER = "gpu.example.com"
INPUTS = DeviceInputs(classes={"gpu": DeviceClass("gpu", (f'device.driver == "{DRIVER}"',))})
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


def pods(count: int, claims: bool) -> list[Pod]:
    rng = random.Random(42)
    out = []
    for i in range(count):
        manifest = {"metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {
                        "cpu": f"{rng.choice((100, 250, 500))}m",
                        "memory": f"{rng.choice((256, 512, 1024))}Mi"}}}]}}
        pod = Pod.from_dict(manifest)
        if claims:
            request = (DeviceRequest("gpu", "gpu", (BIG,), count=2) if i % 4 == 3
                       else DeviceRequest("gpu", "gpu"))
            pod = replace(pod, device_claims=(DeviceClaim("default", f"c{i}", (request,)),))
        out.append(pod)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pool = NodePoolTemplate.from_nodepool_dict(
        {"metadata": {"name": "default"}, "spec": {"template": {"spec": {"requirements": []}}}},
        gpu_types())
    for claims in (False, True):
        batch = pods(args.pods, claims)
        best = float("inf")
        for _ in range(args.repeat):
            simulator = Simulator([pool])
            started = time.perf_counter()
            results = simulator.solve(batch, devices=INPUTS)
            best = min(best, time.perf_counter() - started)
            placed = sum(len(p.pods) for p in results.new_nodeclaims)
            if results.errors or placed != len(batch):
                sys.exit(f"not every pod placed: {len(results.errors)} errors")
        print(f"{'DRA' if claims else 'claim-less'}: {len(batch)} pods, "
              f"{len(results.new_nodeclaims)} nodes, {best * 1000:.0f} ms, "
              f"{len(batch) / best:,.0f} pods/s")


if __name__ == "__main__":
    main()
