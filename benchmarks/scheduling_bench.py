"""Scheduling benchmark, the same recipe as Karpenter's scheduling_benchmark_test.go.

Run from the repository root:

    .venv/bin/python benchmarks/scheduling_bench.py

Recipe (issue 5): 400 instance types, type i with i+1 vCPU, 2(i+1) GiB and 10(i+1)
pods, kube-reserved 100m CPU and 10Mi memory, five offerings each (spot in test-zone-1/2,
on-demand in test-zone-1/2/3) priced 0.1 x vCPU + 0.1 x memory GB per hour; one NodePool
without requirements or limits; no existing nodes, no DaemonSets. Pods in fifths
(generic, zone spread, hostname spread, zone self-affinity, hostname anti-affinity, the
remainder generic) with random requests and labels from a fixed seed. Each size runs in
its own process so that its peak memory is its own.

Timed: ``Simulator.solve`` on pods already parsed with ``Pod.from_dict`` (parsing is
done once when a pod arrives from the API server, not per solve); the parse time is
printed separately. Each size is solved ``--repeat`` times and the best run counts (as
``timeit`` does: noise only ever adds time). pods/s is given for wall-clock time and
for the process's CPU time; the two differ when other work shares the two cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import sys
import time
from pathlib import Path
from queue import Empty
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from karpy.cloudprovider.kwok import generate_catalogue, to_instance_types
from karpy.scheduling import (
    ExistingNode,
    InstanceType,
    NodePoolTemplate,
    Offering,
    Overhead,
    Pod,
    Results,
    SchedulerOptions,
    cost_floor,
)
from karpy.scheduling.simulator import Simulator

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
GIB = 1 << 30
SEED = 42
SIZES = (1000, 5000, 10000, 20000)
LABEL_VALUES = "abcdefg"
CPUS = (100, 250, 500, 1000, 1500)
MEMORIES = (100, 256, 512, 1024, 2048, 4096)


def instance_types(count: int = 400) -> list[InstanceType]:
    """The 400 fake instance types of the recipe."""
    out = []
    for i in range(count):
        vcpu = i + 1
        memory = 2 * vcpu * GIB
        price = 0.1 * vcpu + 0.1 * (memory / 1e9)
        offerings = [
            Offering("test-zone-1", "spot", price),
            Offering("test-zone-2", "spot", price),
            Offering("test-zone-1", "on-demand", price),
            Offering("test-zone-2", "on-demand", price),
            Offering("test-zone-3", "on-demand", price),
        ]
        out.append(
            InstanceType.build(
                f"fake-it-{i}",
                capacity={"cpu": vcpu * 1000, "memory": memory, "pods": 10 * vcpu},
                offerings=offerings,
                overhead=Overhead(kube_reserved={"cpu": 100, "memory": 10 * (1 << 20)}),
            )
        )
    return out


class PodFactory:
    """Builds the recipe's pods as Kubernetes dicts, from one seeded generator."""

    def __init__(self, seed: int = SEED) -> None:
        self.random = random.Random(seed)
        self.count = 0

    def value(self) -> str:
        return self.random.choice(LABEL_VALUES)

    def resources(self) -> dict[str, Any]:
        cpu = self.random.choice(CPUS)
        memory = self.random.choice(MEMORIES)
        return {"requests": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}}

    def pod(self, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
        self.count += 1
        name = f"pod-{self.count:06d}"
        return {
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels},
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "resources": self.resources()}],
                **spec,
            },
        }

    def generic(self, count: int) -> list[dict[str, Any]]:
        return [self.pod({"my-label": self.value()}) for _ in range(count)]

    def spread(self, count: int, key: str) -> list[dict[str, Any]]:
        pods = []
        for _ in range(count):
            labels = {"my-label": self.value()}
            constraint = {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"my-label": self.value()}},
            }
            pods.append(self.pod(labels, topologySpreadConstraints=[constraint]))
        return pods

    def self_affinity(self, count: int, key: str) -> list[dict[str, Any]]:
        pods = []
        for _ in range(count):
            labels = {"my-affininity": self.value()}
            term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}
            affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
            pods.append(self.pod(labels, affinity=affinity))
        return pods

    def anti_affinity(self, count: int, key: str) -> list[dict[str, Any]]:
        labels = {"app": "nginx"}
        term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        return [self.pod(dict(labels), affinity=affinity) for _ in range(count)]

    def diverse(self, count: int) -> list[dict[str, Any]]:
        fifth = count // 5
        pods = self.generic(fifth)
        pods += self.spread(fifth, ZONE)
        pods += self.spread(fifth, HOSTNAME)
        pods += self.self_affinity(fifth, ZONE)
        pods += self.anti_affinity(fifth, HOSTNAME)
        pods += self.generic(count - len(pods))
        return pods

    def preferences(self, count: int) -> list[dict[str, Any]]:
        selector = {"matchLabels": {"app": "nginx"}}
        affinity = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [
                                {"key": ZONE, "operator": "In", "values": ["test-zone-1"]}
                            ]
                        },
                    }
                ]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {"labelSelector": selector, "topologyKey": ZONE},
                    },
                    {
                        "weight": 1,
                        "podAffinityTerm": {"labelSelector": selector, "topologyKey": HOSTNAME},
                    },
                ]
            },
        }
        return [self.pod({"app": "nginx"}, affinity=affinity) for _ in range(count)]


def rss_bytes() -> int:
    """Current resident set size."""
    with Path("/proc/self/statm").open() as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def check(results: Results, pods: int) -> None:
    if results.errors:
        first = results.errors[0]
        raise SystemExit(f"{len(results.errors)} pods were not placed, e.g. {first}")
    if results.scheduled_pods != pods:
        raise SystemExit(f"placed {results.scheduled_pods} of {pods} pods")


def existing_nodes(count: int) -> list[ExistingNode]:
    """Extra case (not in the recipe): ``count`` nodes of 4 vCPU / 16 GiB across the
    three zones, each already running three 1-CPU pods."""
    out = []
    for i in range(count):
        name = f"existing-{i:05d}"
        bound = [
            Pod.from_dict(
                {
                    "metadata": {"name": f"{name}-{j}", "labels": {"app": f"old-{j}"}},
                    "spec": {
                        "nodeName": name,
                        "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                        ],
                    },
                }
            )
            for j in range(3)
        ]
        node = {
            "metadata": {
                "name": name,
                "labels": {HOSTNAME: name, ZONE: f"test-zone-{i % 3 + 1}"},
            },
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        }
        out.append(ExistingNode.from_node_dict(node, bound))
    return out


def kwok_types() -> list[InstanceType]:
    """Extra catalogue (not in the recipe): the kwok provider's generated catalogue for
    amd64/linux -- c, m and r families (1:2, 1:4, 1:8 GiB per vCPU) in 12 sizes, spot
    and on-demand in four zones, priced 0.025 $/vCPU + 0.001 $/GB per hour."""
    specs = generate_catalogue(architectures=("amd64",), operating_systems=("linux",))
    return to_instance_types(specs)


def timed_solves(
    simulator: Simulator, pods: list[Pod], nodes: list[ExistingNode], repeat: int
) -> tuple[Results, float, float]:
    """The results and the best wall and CPU seconds of ``repeat`` solves."""
    simulator.solve(pods[:10])  # build the instance-type index outside the timing
    walls, cpus = [], []
    results = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        results = simulator.solve(pods, nodes=nodes)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
        check(results, len(pods))
    assert results is not None
    return results, min(walls), min(cpus)


def run_case(case: str, size: int, repeat: int, queue: Any, existing: int = 0) -> None:
    factory = PodFactory()
    raw = factory.preferences(size) if case == "preferences" else factory.diverse(size)
    nodes = existing_nodes(existing)
    start, start_cpu = time.perf_counter(), time.process_time()
    pods = [Pod.from_dict(p, keep_raw=False) for p in raw]
    parse = time.perf_counter() - start
    parse_cpu = time.process_time() - start_cpu
    del raw
    types = kwok_types() if case == "realistic" else instance_types()
    nodepool = NodePoolTemplate(name="default", instance_types=types)
    before = rss_bytes()
    results, seconds, cpu_seconds = timed_solves(Simulator([nodepool]), pods, nodes, repeat)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # the same solve without the cost-improvement stage (first fit only)
    first_fit = Simulator([nodepool], options=SchedulerOptions(improvement_budget=0))
    first, first_seconds, first_cpu = timed_solves(first_fit, pods, nodes, repeat)
    antiaffinity = size // 5 if case in ("diverse", "realistic") and not existing else 0
    # The LP floor is for new capacity; with existing nodes it would not compare.
    floor = None if existing else cost_floor(pods, [nodepool]).price
    queue.put(
        {
            "case": f"{case}+{existing}n" if existing else case,
            "pods": size,
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "first_seconds": first_seconds,
            "first_cpu_seconds": first_cpu,
            "parse": parse,
            "parse_cpu": parse_cpu,
            "nodes": len(results.new_nodeclaims),
            "narrowed": results.narrowed_nodeclaims,
            "price": results.price,
            "first_price": first.price,
            "floor": floor,
            "antiaffinity": antiaffinity,
            "peak_rss": peak,
            "solve_growth": max(peak - before, 0),
        }
    )


def measure(case: str, size: int, repeat: int, existing: int = 0) -> dict[str, Any]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=run_case, args=(case, size, repeat, queue, existing))
    process.start()
    while True:
        try:
            result: dict[str, Any] = queue.get(timeout=1)
            break
        except Empty:
            if not process.is_alive():
                raise SystemExit(f"{case} {size}: the benchmark process died") from None
    process.join()
    if process.exitcode:
        raise SystemExit(f"{case} {size}: exit code {process.exitcode}")
    return result


def _above(price: float, floor: float | None) -> str:
    return f"{'-':>8}" if floor is None else f"{price / floor - 1:>8.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3, help="solves per size (best counts)")
    parser.add_argument("--no-preferences", action="store_true")
    parser.add_argument(
        "--realistic",
        type=int,
        nargs="*",
        default=[5000],
        help="extra case beyond the recipe: the diverse pods on the kwok c/m/r catalogue",
    )
    parser.add_argument(
        "--existing",
        type=int,
        default=0,
        help="extra case beyond the recipe: also solve 5,000 diverse pods with N existing nodes",
    )
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "pods/s: wall clock of the solve (first fit only | with the improvement stage | "
        "with improvement, parsing included), and the same in CPU time; "
        "% above the LP floor (first fit | improved); "
        "narrowed: NodeClaims the improvement stage pinned to one zone"
    )
    print(
        f"{'case':<12}{'pods':>7}{'ff pods/s':>10}{'pods/s':>9}{'+parse':>8}{'cpu pods/s':>11}"
        f"{'+parse':>8}"
        f"{'nodes':>7}{'anti':>6}{'ff $/h':>9}{'$/h':>9}{'LP floor':>9}{'ff %':>8}"
        f"{'% above':>8}{'narrowed':>9}{'peak RSS':>10}{'parse s':>9}"
    )
    rows = [("diverse", size, 0) for size in args.sizes]
    if not args.no_preferences:
        rows.append(("preferences", 4000, 0))
    rows += [("realistic", size, 0) for size in args.realistic]
    if args.existing:
        rows.append(("diverse", 5000, args.existing))
    results = []
    for case, size, existing in rows:
        row = measure(case, size, args.repeat, existing)
        results.append(row)
        pods = row["pods"]
        print(
            f"{row['case']:<12}{pods:>7}{pods / row['first_seconds']:>10.0f}"
            f"{pods / row['seconds']:>9.0f}{pods / (row['seconds'] + row['parse']):>8.0f}"
            f"{pods / row['cpu_seconds']:>11.0f}"
            f"{pods / (row['cpu_seconds'] + row['parse_cpu']):>8.0f}"
            f"{row['nodes']:>7}{row['antiaffinity'] or '-':>6}"
            f"{row['first_price']:>9.1f}{row['price']:>9.1f}"
            f"{'-' if row['floor'] is None else format(row['floor'], '.1f'):>9}"
            f"{_above(row['first_price'], row['floor'])}{_above(row['price'], row['floor'])}"
            f"{row['narrowed']:>9}"
            f"{row['peak_rss'] / 2**20:>8.0f}Mi{row['parse']:>9.2f}",
            flush=True,
        )
    diverse = [r for r in results if r["case"] == "diverse"]
    if len(diverse) >= 2:
        first, last = diverse[0], diverse[-1]
        wall = (last["pods"] / last["seconds"]) / (first["pods"] / first["seconds"])
        cpu = (last["pods"] / last["cpu_seconds"]) / (first["pods"] / first["cpu_seconds"])
        print(
            f"\npods/s at {last['pods']} is {wall:.0%} (wall) / {cpu:.0%} (cpu) "
            f"of pods/s at {first['pods']}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for row in diverse:
        excess = row["nodes"] / row["antiaffinity"] - 1
        print(f"{row['pods']} pods: {row['nodes']} nodes, {excess:+.2%} vs anti-affinity pods")


if __name__ == "__main__":
    main()
