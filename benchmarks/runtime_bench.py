"""Benchmark of karpy.runtime (not a test): informer sync, event throughput, work queue.

Run:  .venv/bin/python benchmarks/runtime_bench.py [--objects 10000]

Against the cluster of ``KARPY_KUBECONFIG`` if set, otherwise it starts the local
control plane with tests/controlplane/start.sh. It creates ``--objects`` ConfigMaps in
namespace ``karpy-bench`` (kept between runs; delete the namespace to start over), then
prints:

* initial sync: time for an informer to list every object into its indexed cache;
* event throughput into the cache, two ways: end to end (ConfigMaps patched on the API
  server, events counted in a handler — bounded by the API server's write rate), and
  the cache's own ingest rate (watch-event lines decoded, stored, indexed and handed to
  a handler, without the network);
* work-queue operations per second (add + get + done cycles), for the queue as a
  Controller builds it in production (a manager's Metrics attached: every workqueue_*
  series recorded) and, in the same run, for a bare WorkQueue without metrics;
* client requests per second against a local aiohttp server answering a small object
  (no cluster), with the client's request metrics (client_go_request_total and
  _duration_seconds, as a manager counts them) and without, interleaved; and the CPU
  time the two metrics add per request (their record calls alone, timed in a loop);
* peak RSS of the process.

``--queue-only`` runs just the work-queue part, ``--client-only`` just the client part
(no cluster needed for either).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import time
from pathlib import Path

from karpy.runtime import (
    Controller,
    FuncHandler,
    Informer,
    KubeClient,
    Result,
    WorkQueue,
    errors,
    kinds,
    run,
)
from karpy.runtime._objects import loads_frozen
from karpy.runtime.telemetry import Metrics

REPO = Path(__file__).resolve().parent.parent

NAMESPACE = "karpy-bench"


def kubeconfig() -> str:
    path = os.environ.get("KARPY_KUBECONFIG")
    if path:
        return path
    out = subprocess.run(
        ["bash", str(REPO / "tests/controlplane/start.sh")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _configmap(i: int) -> dict[str, object]:
    return {
        "metadata": {
            "name": f"cm-{i:05d}",
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "shard": str(i % 16)},
        },
        "data": {"index": str(i), "payload": "x" * 64},
    }


async def ensure_objects(client: KubeClient, count: int) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(kinds.NAMESPACE, {"metadata": {"name": NAMESPACE}})
    existing = {
        o["metadata"]["name"] for o in await client.list(kinds.CONFIG_MAP, namespace=NAMESPACE)
    }
    missing = [i for i in range(count) if f"cm-{i:05d}" not in existing]
    if not missing:
        return
    print(f"creating {len(missing)} ConfigMaps in {NAMESPACE} ...", flush=True)
    semaphore = asyncio.Semaphore(64)
    started = time.perf_counter()

    async def create(i: int) -> None:
        async with semaphore:
            with contextlib.suppress(errors.AlreadyExists):
                await client.create(kinds.CONFIG_MAP, _configmap(i))

    async with asyncio.TaskGroup() as tg:
        for i in missing:
            tg.create_task(create(i))
    print(f"  created in {time.perf_counter() - started:.1f}s", flush=True)


async def bench_initial_sync(client: KubeClient, runs: int) -> tuple[float, int]:
    times = []
    size = 0
    for _ in range(runs):
        informer = Informer(client, kinds.CONFIG_MAP, namespace=NAMESPACE)
        added = 0

        def on_add(obj: object) -> None:
            nonlocal added
            added += 1

        informer.add_handler(FuncHandler(add=on_add))
        started = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(informer.run(), name="bench-informer")
            await informer.wait_for_sync()
            times.append(time.perf_counter() - started)
            task.cancel()
        size = len(informer.store)
        assert added == size
    return statistics.median(times), size


async def bench_end_to_end_events(client: KubeClient, count: int, updates: int) -> float:
    informer = Informer(client, kinds.CONFIG_MAP, namespace=NAMESPACE)
    received = 0
    done = asyncio.Event()

    def on_update(old: object, new: object) -> None:
        nonlocal received
        received += 1
        if received >= updates:
            done.set()

    informer.add_handler(FuncHandler(update=on_update))
    semaphore = asyncio.Semaphore(128)

    async def patch(i: int) -> None:
        async with semaphore:
            await client.patch(
                kinds.CONFIG_MAP,
                f"cm-{i % count:05d}",
                {"data": {"tick": str(time.time_ns())}},
                namespace=NAMESPACE,
            )

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run(), name="bench-informer")
        await informer.wait_for_sync()
        started = time.perf_counter()
        async with asyncio.TaskGroup() as writers:
            for i in range(updates):
                writers.create_task(patch(i))
        await asyncio.wait_for(done.wait(), 120)
        elapsed = time.perf_counter() - started
        task.cancel()
    return updates / elapsed


async def bench_cache_ingest(client: KubeClient, events: int) -> float:
    """Decode + store + index + handler for watch-event lines, without the network."""
    page = await client.list_page(kinds.CONFIG_MAP, namespace=NAMESPACE, limit=1000)
    objects = [dict(o) for o in page.items]
    lines = []
    for n in range(events):
        obj = json.loads(json.dumps(objects[n % len(objects)]))
        obj["metadata"]["resourceVersion"] = str(10_000_000 + n)
        obj["data"]["tick"] = str(n)
        lines.append(json.dumps({"type": "MODIFIED", "object": obj}).encode())
    informer = Informer(client, kinds.CONFIG_MAP, namespace=NAMESPACE)
    seen = 0

    def on_event(*_: object) -> None:
        nonlocal seen
        seen += 1

    informer.add_handler(FuncHandler(add=on_event, update=on_event))
    started = time.perf_counter()
    for line in lines:
        event = loads_frozen(line)
        informer._apply(event["type"], event["object"])
    elapsed = time.perf_counter() - started
    assert seen == events
    return events / elapsed


class _Noop:
    async def reconcile(self, request: int) -> Result:
        return Result()


def new_queue(*, instrumented: bool) -> WorkQueue[int]:
    """The queue a Controller builds: with a manager's Metrics (as in production) or bare."""
    if not instrumented:
        return WorkQueue(name="bench")
    controller: Controller[int] = Controller("bench", _Noop(), metrics=Metrics())
    return controller.queue


class _Timer:
    """Wall and CPU time of a block: on a shared machine the CPU figure is the steadier."""

    def __enter__(self) -> _Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rates(self, ops: int) -> tuple[float, float]:
        return ops / self.wall, ops / self.cpu


async def bench_workqueue(
    keys: int, cycles: int, workers: int, *, instrumented: bool
) -> tuple[float, float]:
    queue = new_queue(instrumented=instrumented)
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            try:
                key = await queue.get()
            except errors.QueueShutDown:
                return
            processed += 1
            queue.done(key)

    with _Timer() as timer:
        async with asyncio.TaskGroup() as tg:
            for w in range(workers):
                tg.create_task(worker(), name=f"bench-worker-{w}")
            for n in range(cycles):
                queue.add(n % keys)
                if n % 256 == 0:
                    await asyncio.sleep(0)
            await queue.shutdown_with_drain()
    # One "operation" is one add; gets/dones happen for the non-deduplicated subset.
    return timer.rates(cycles)


async def bench_workqueue_unique(cycles: int, *, instrumented: bool) -> tuple[float, float]:
    queue = new_queue(instrumented=instrumented)
    with _Timer() as timer:
        for n in range(cycles):
            queue.add(n)
            key = await queue.get()
            queue.done(key)
    return timer.rates(cycles)


async def bench_queues(ops: int) -> list[str]:
    """Both queue benchmarks, with and without metrics, interleaved in one run; each
    figure is the best of three (wall and CPU time kept separately)."""
    best: dict[tuple[str, bool], tuple[float, float]] = {}
    for _ in range(3):
        for instrumented in (True, False):
            runs = {
                "unique": await bench_workqueue_unique(ops, instrumented=instrumented),
                "dedup": await bench_workqueue(
                    keys=1000, cycles=ops, workers=8, instrumented=instrumented
                ),
            }
            for case, (wall, cpu) in runs.items():
                old_wall, old_cpu = best.get((case, instrumented), (0.0, 0.0))
                best[case, instrumented] = (max(old_wall, wall), max(old_cpu, cpu))
    labels = {
        ("unique", True): "work queue add+get+done, 1 worker, with metrics (production)",
        ("unique", False): "work queue add+get+done, 1 worker, without metrics",
        ("dedup", True): "work queue adds, 1000 keys, 8 workers, with metrics",
        ("dedup", False): "work queue adds, 1000 keys, 8 workers, without metrics",
    }
    return [
        f"{label + ':':63} {best[key][0]:9,.0f} ops/s wall, {best[key][1]:9,.0f} ops/s CPU"
        for key, label in labels.items()
    ]


async def _answering_server() -> tuple[str, object]:
    """A local server answering every GET of a namespace with a small object."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Namespace", "apiVersion": "v1",
                                  "metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}", runner


async def bench_client(requests: int) -> list[str]:
    """Client GETs per second with and without request metrics (best of three each,
    interleaved), and the metrics' own cost per request."""
    import timeit

    from kubernetes_asyncio import client as k8s_client

    url, runner = await _answering_server()
    best: dict[bool, tuple[float, float]] = {}
    try:
        api = k8s_client.ApiClient(k8s_client.Configuration(host=url))
        async with KubeClient(api, timeout=30, owns_api_client=True, qps=None) as client:
            for _ in range(3):
                for counted in (True, False):
                    client._count_requests_in(Metrics().client if counted else None)
                    with _Timer() as timer:
                        for i in range(requests):
                            await client.get(kinds.NAMESPACE, f"ns-{i % 50}", live=True)
                    wall, cpu = timer.rates(requests)
                    old_wall, old_cpu = best.get(counted, (0.0, 0.0))
                    best[counted] = (max(old_wall, wall), max(old_cpu, cpu))
    finally:
        await runner.cleanup()  # type: ignore[attr-defined]
    metrics = Metrics().client
    n = 100_000

    def record() -> None:
        metrics.attempt("GET", 200)
        metrics.request("GET", "/api/v1/namespaces/ns-1", 0.002)

    per_request_us = min(timeit.repeat(record, number=n, repeat=3)) / n * 1e6
    lines = [
        f"{'client GETs, with request metrics (production):':63} "
        f"{best[True][0]:9,.0f} req/s wall, {best[True][1]:9,.0f} req/s CPU",
        f"{'client GETs, without request metrics:':63} "
        f"{best[False][0]:9,.0f} req/s wall, {best[False][1]:9,.0f} req/s CPU",
        f"{'request metrics alone (attempt + duration), per request:':63} "
        f"{per_request_us:9.2f} µs CPU",
    ]
    return lines


async def main(args: argparse.Namespace) -> None:
    import platform

    loop = type(asyncio.get_running_loop()).__module__
    print(f"python {platform.python_version()}, loop {loop}, {os.cpu_count()} CPUs")
    if args.queue_only:
        print("\n".join(await bench_queues(args.queue_ops)))
        return
    if args.client_only:
        print("\n".join(await bench_client(args.client_requests)))
        return
    async with await KubeClient.from_kubeconfig(kubeconfig(), timeout=120) as client:
        await ensure_objects(client, args.objects)
        sync_s, size = await bench_initial_sync(client, args.runs)
        rss_after_sync = peak_rss_mib()
        e2e = await bench_end_to_end_events(client, args.objects, args.updates)
        ingest = await bench_cache_ingest(client, args.ingest_events)
    queue_lines = await bench_queues(args.queue_ops)
    client_lines = await bench_client(args.client_requests)
    print()
    print(
        f"initial sync, {size} ConfigMaps:        {sync_s:8.2f} s "
        f"(median of {args.runs}; {size / sync_s:,.0f} objects/s)"
    )
    print(f"peak RSS after sync:                 {rss_after_sync:8.0f} MiB")
    print(
        f"events into cache, end to end:       {e2e:8,.0f} events/s "
        f"({args.updates} patches, bounded by API server writes)"
    )
    print(
        f"events into cache, ingest only:      {ingest:8,.0f} events/s "
        f"(decode + store + index + handler)"
    )
    print("\n".join(queue_lines))
    print("\n".join(client_lines))
    print(f"peak RSS:                            {peak_rss_mib():8.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--updates", type=int, default=5_000)
    parser.add_argument("--ingest-events", type=int, default=50_000)
    parser.add_argument("--queue-ops", type=int, default=500_000)
    parser.add_argument("--queue-only", action="store_true", help="only the work queue")
    parser.add_argument("--client-requests", type=int, default=5_000)
    parser.add_argument("--client-only", action="store_true", help="only the client")
    run(main(parser.parse_args()))
