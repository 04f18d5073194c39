"""Benchmark of one `karpy top` frame on a large cluster model (not a test).

Run:  .venv/bin/python benchmarks/top_bench.py [--nodes 2000] [--pods 20000] [--rows 54]

Builds a cluster model (karpy.state.Cluster) of ``--nodes`` launched kwok machines in
two NodePools with ``--pods`` pods bound round-robin, prices it from the kwok catalogue,
and prints the median time of: building the view (rows, prices, sort by price, totals),
drawing a screen-sized frame of ``--rows`` rows (what the live view lays out), and
drawing every row (what ``--once`` prints).
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from rich.console import Console

from karpy.cloudprovider.kwok import generate_catalogue, to_instance_types
from karpy.state import Cluster
from karpy.state import testing as t
from karpy.state.cost import PriceBook
from karpy.tools.top import render, view_of


def scene(nodes: int, pods: int) -> tuple[Cluster, PriceBook]:
    types = [it for it in to_instance_types(generate_catalogue()) if "amd64" in it.name]
    book = PriceBook.from_instance_types({"p0": types, "p1": types})
    cluster = Cluster()
    for pool in ("p0", "p1"):
        cluster.update_nodepool(t.nodepool(pool))
    for n in range(nodes):
        it = types[n % len(types)]
        offering = it.offerings[n % len(it.offerings)]
        labels = {"node.kubernetes.io/instance-type": it.name,
                  "topology.kubernetes.io/zone": offering.zone,
                  "karpenter.sh/capacity-type": offering.capacity_type}
        pid, pool = f"kwok://n{n}", f"p{n % 2}"
        cluster.update_nodeclaim(t.nodeclaim(f"n{n}", nodepool=pool, provider_id=pid,
                                             node_name=f"n{n}", labels=labels,
                                             registered=True, initialized=True))
        cluster.update_node(t.node(f"n{n}", provider_id=pid, nodepool=pool, labels=labels))
    for p in range(pods):
        cluster.update_pod(t.pod(f"p{p}", node_name=f"n{p % nodes}", cpu="100m"))
    return cluster, book


def median_ms(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--rows", type=int, default=54)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cluster, book = scene(args.nodes, args.pods)
    view = view_of(cluster, book, sort="price")
    now = datetime.now(UTC)

    def draw(max_rows: int | None) -> None:
        Console(width=200, file=io.StringIO()).print(render(view, now=now, max_rows=max_rows))

    build = median_ms(lambda: view_of(cluster, book, sort="price"), args.repeat)
    screen = median_ms(lambda: draw(args.rows), args.repeat)
    full = median_ms(lambda: draw(None), 1)
    print(f"karpy top, {args.nodes} nodes, {args.pods} pods (total ${view.price:.2f}/h)")
    print(f"  build the view (rows, prices, sort, totals): {build:8.1f} ms")
    print(f"  draw a {args.rows}-row screen:                  {screen:8.1f} ms")
    print(f"  draw all {view.machines} rows (--once):            {full:8.1f} ms")


if __name__ == "__main__":
    main()
