"""Benchmark (not a test): karpy under a sustained load of scale-ups and scale-downs.

Run:  .venv/bin/python benchmarks/load_bench.py [--pods 5000] [--deployments 10]
      [--minutes 10] [--wave 30]

Issue 15, scenario 5: ``--deployments`` Deployments sharing ``--pods`` pods at most,
each resized to a random share every ``--wave`` seconds for ``--minutes`` minutes (the
first wave fills them all), against ``karpy run`` (leader election on) on a fresh local
control plane of its own (run it under the shared cluster lock). The NodePool allows any
kwok type; pods ask for 250m CPU. Prints karpy's peak RSS, its provisioning rounds
(count and the simulation time's p50/p99, from "found provisionable pod(s)"), the round
period's p99 (time between rounds that created NodeClaims), and the events it handled
per second (controller reconciles plus work-queue adds, from its /metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from scaleup_bench import CONTROLPLANE, KWOK_NODE_CLASS, _read_log, _rss_kib, _ts, start_cluster

from karpy.runtime import KubeClient, kinds
from karpy.state.kinds import NODE_POOL

NAMESPACE = "load"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(controller_runtime_reconcile_total|workqueue_adds_total)\{.*\} (\S+)$",
                     line)
        if m:
            totals[m.group(1)] = totals.get(m.group(1), 0.0) + float(m.group(2))
    return totals


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _seconds(go: str) -> float:
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|µs|us|ns|s|m|h)", go):
        total += float(number) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "µs": 1e-6,
                                  "us": 1e-6, "ns": 1e-9}[unit]
    return total


async def load(args: argparse.Namespace, kubeconfig: str, karpy: subprocess.Popen[bytes],
               log_path: Path, port: int) -> None:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    rng = random.Random(args.seed)
    names = [f"load-{i}" for i in range(args.deployments)]
    share = args.pods // args.deployments
    try:
        await client.create(kinds.NAMESPACE, {"metadata": {"name": NAMESPACE}})
        await client.create(KWOK_NODE_CLASS, {"metadata": {"name": "load"}, "spec": {}})
        await client.create(NODE_POOL, {"metadata": {"name": "load"}, "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                 "name": "load"},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
                "expireAfter": "Never"}},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}}})
        for name in names:
            labels = {"app": name}
            await client.create(kinds.DEPLOYMENT, {"metadata": {"name": name}, "spec": {
                "replicas": 0, "selector": {"matchLabels": labels}, "template": {
                    "metadata": {"labels": labels},
                    "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                        "name": "pause", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": "250m"}}}]}}}},
                namespace=NAMESPACE)
        while not _has(log_path, "successfully acquired lease"):  # noqa: ASYNC110 - a file
            await asyncio.sleep(0.2)
        before = _scrape(port)
        t0 = time.time()
        waves = 0
        rss = 0
        while time.time() - t0 < args.minutes * 60:
            if karpy.poll() is not None:
                print(f"karpy exited ({karpy.returncode}) during wave {waves}; see {log_path}")
                break
            for name in names:
                replicas = share if waves == 0 else rng.randint(0, share)
                await client.patch(kinds.DEPLOYMENT, name, {"spec": {"replicas": replicas}},
                                   namespace=NAMESPACE)
            waves += 1
            wave_end = time.time() + args.wave
            while time.time() < wave_end:
                rss = max(rss, _rss_kib(karpy.pid))  # sampled: VmHWM is gone once it exits
                await asyncio.sleep(2.0)
        elapsed = time.time() - t0
        after = _scrape(port) if karpy.poll() is None else before
        rss = max(rss, _rss_kib(karpy.pid))
        pods = await client.list(kinds.POD, namespace=NAMESPACE, live=True)
        running = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
    finally:
        await client.close()
    records = [r for r in _read_log(log_path) if (_ts(r.get("time")) or 0) >= t0]
    sims = [_seconds(str(r.get("duration", ""))) for r in records
            if r.get("message") == "found provisionable pod(s)"]
    rounds = [t for r in records if r.get("message") == "computed new nodeclaim(s) to fit pod(s)"
              and (t := _ts(r.get("time"))) is not None]
    gaps = [b - a for a, b in itertools.pairwise(rounds)]
    handled = sum(after.values()) - sum(before.values())
    print(f"\n{waves} waves over {elapsed:.0f}s across {args.deployments} Deployments "
          f"(up to {args.pods} pods of 250m CPU); at the end {running}/{len(pods)} pods Running")
    print(f"karpy peak RSS {rss / 1024:.0f} MiB")
    print(f"provisioning rounds that created NodeClaims: {len(rounds)}; simulation p50 "
          f"{statistics.median(sims) if sims else float('nan'):.3f}s, p99 "
          f"{_percentile(sims, 0.99):.3f}s; time between rounds p99 "
          f"{_percentile(gaps, 0.99):.1f}s")
    print(f"events handled: {handled / elapsed:.0f}/s (controller reconciles + work-queue "
          f"adds: {after})")


def _has(path: Path, text: str) -> bool:
    return text.encode() in path.read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--deployments", type=int, default=10)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--wave", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="karpy-load-cluster-"))
    log_path = directory.with_suffix(".karpy.log")
    port = _free_port()
    try:
        kubeconfig = start_cluster(directory)
        with log_path.open("wb") as karpy_log:
            karpy = subprocess.Popen(
                [sys.executable, "-m", "karpy.cli", "run", "--kubeconfig", kubeconfig,
                 "--cloud-provider", "kwok", "--metrics-port", str(port),
                 "--health-probe-port", "0"],
                stdout=subprocess.DEVNULL, stderr=karpy_log,
                env={**os.environ, "SYSTEM_NAMESPACE": "kube-system"})
            try:
                asyncio.run(load(args, kubeconfig, karpy, log_path, port))
            finally:
                karpy.terminate()
                try:
                    karpy.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    karpy.kill()
                    karpy.wait()
    finally:
        subprocess.run(["bash", str(CONTROLPLANE / "stop.sh"), str(directory)],
                       capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"karpy log: {log_path}")


if __name__ == "__main__":
    main()
