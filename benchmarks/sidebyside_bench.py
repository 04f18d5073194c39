"""Benchmark (not a test): karpy and the real Karpenter side by side, on one cluster.

Run (under the shared cluster lock):

    flock /tmp/karpy-cluster.lock .venv/bin/python benchmarks/sidebyside_bench.py \\
        --pods 1000 [--pods 3000] [--rounds 1]

Issue 34. Karpenter is sigs.k8s.io/karpenter v1.15.0's kwok controller
(tests/controlplane/build-karpenter.sh); karpy is ``karpy run --cloud-provider kwok``.
Both read one catalogue file (karpy's generated kwok catalogue, in Karpenter kwok's
instance_types.json format) and run with their defaults and leader election on. One
fresh local control plane (tests/controlplane/start.sh) serves every run; the runs
alternate (karpy first in even rounds, Karpenter first in odd ones), each with the
controller started for it and the cluster empty of nodes before it.

Each run: a NodePool of on-demand kwok types of at most ``--max-cpu`` vCPU that
consolidates (WhenEmptyOrUnderutilized, consolidateAfter 30s), a Deployment of one-CPU
pause pods scaled 0 -> N, then down to ``--keep`` of N. It measures:

- scale-up: seconds until all N pods are Running; NodeClaims made; $/h of the fleet
  (each NodeClaim's instance type, zone and capacity type priced from the catalogue);
  API requests the controller made (its own ``client_go_request_total``, the metric
  both expose; a watch counts once); its CPU seconds (/proc) and peak RSS (VmHWM);
- scale-down: seconds from the scale-down until the fleet last changed (consolidation
  done: no NodeClaim created or deleted for ``--settle`` seconds, every pod Running),
  the NodeClaims and $/h left.

It prints one table; docs/performance.md keeps it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaleup_bench import _cpu_seconds, _rss_kib, kwok_nodepool, start_cluster

from karpy.cloudprovider.kwok._catalogue import dump_catalogue, generate_catalogue
from karpy.runtime import KubeClient, errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

REPO = Path(__file__).resolve().parent.parent
CONTROLPLANE = REPO / "tests/controlplane"
KARPENTER = CONTROLPLANE / "bin" / "karpenter-kwok"
KWOK_NODE_CLASS = kinds.Kind(group="karpenter.kwok.sh", version="v1alpha1",
                             plural="kwoknodeclasses", kind="KWOKNodeClass", namespaced=False)
NAMESPACE = "sidebyside"
NAME = "sidebyside"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Result:
    controller: str
    pods: int
    up_seconds: float = 0.0
    up_claims: int = 0
    up_price: float = 0.0
    requests: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss_mib: float = 0.0
    down_seconds: float = 0.0
    down_claims: int = 0
    down_price: float = 0.0
    notes: list[str] = field(default_factory=list)


class Controller:
    """karpy or Karpenter as a subprocess with its metrics on a known port."""

    def __init__(self, which: str, kubeconfig: str, catalogue: Path, log: Path) -> None:
        self.which = which
        self.metrics_port = free_port()
        health = free_port()
        env = {k: v for k, v in os.environ.items() if k != "DISABLE_LEADER_ELECTION"}
        if which == "karpy":
            argv = [sys.executable, "-m", "karpy.cli", "run", "--kubeconfig", kubeconfig,
                    "--cloud-provider", "kwok", "--metrics-port", str(self.metrics_port),
                    "--health-probe-port", str(health),
                    "--provider-setting", f"instanceTypesFile={catalogue}"]
            env["SYSTEM_NAMESPACE"] = "kube-system"
        else:
            argv = [str(KARPENTER)]
            env |= {"KUBECONFIG": kubeconfig, "METRICS_PORT": str(self.metrics_port),
                    "HEALTH_PROBE_PORT": str(health), "LEADER_ELECTION_NAMESPACE": "kube-system",
                    "INSTANCE_TYPES_FILE_PATH": str(catalogue)}
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.rss_kib = 0
        self.cpu = 0.0

    def sample(self) -> None:
        """RSS high-water mark and CPU time, read while the process lives."""
        self.rss_kib = max(self.rss_kib, _rss_kib(self.proc.pid))
        self.cpu = _cpu_seconds(self.proc.pid) or self.cpu

    def requests(self) -> float:
        """The sum of its client_go_request_total (both controllers expose it)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("client_go_request_total{"))

    def leading(self) -> bool:
        text = self.log.read_bytes()
        marker = b"starting controllers" if self.which == "karpy" else b"Starting workers"
        return marker in text

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def prices() -> dict[tuple[str, str, str], float]:
    out = {}
    for spec in generate_catalogue():
        for o in spec.offerings:
            out[(spec.name, o.zone, o.capacity_type)] = o.price
    return out


PRICES = prices()


def fleet_price(claims: list[Any]) -> float:
    total = 0.0
    for c in claims:
        labels = c["metadata"].get("labels") or {}
        key = (labels.get("node.kubernetes.io/instance-type", ""),
               labels.get("topology.kubernetes.io/zone", ""),
               labels.get("karpenter.sh/capacity-type", ""))
        total += PRICES.get(key, 0.0)
    return total


async def running_pods(client: KubeClient) -> int:
    pods = await client.list(kinds.POD, namespace=NAMESPACE, live=True)
    return sum((p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp") for p in pods)


async def live_claims(client: KubeClient) -> list[Any]:
    return [c for c in await client.list(NODE_CLAIM, live=True)
            if not c["metadata"].get("deletionTimestamp")]


def exited(controller: Controller, result: Result) -> bool:
    """Whether the controller died mid-run (Karpenter panics when it loses its Lease, as
    it did once on a loaded machine): the run is reported as such instead of waiting
    out its timeout with nothing acting."""
    code = controller.proc.poll()
    if code is None:
        return False
    result.notes.append(f"{controller.which} exited with {code} mid-run; see {controller.log}")
    return True


async def one_run(args: argparse.Namespace, which: str, pods: int, kubeconfig: str,
                  catalogue: Path, logs: Path) -> Result:
    result = Result(which, pods)
    controller = Controller(which, kubeconfig, catalogue, logs / f"{which}-{pods}.log")
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        while not controller.leading():
            if controller.proc.poll() is not None:
                raise SystemExit(f"{which} exited early; see {controller.log}")
            await asyncio.sleep(0.2)
        await client.create(KWOK_NODE_CLASS, {"metadata": {"name": NAME}, "spec": {}})
        await client.create(NODE_POOL, kwok_nodepool(
            NAME, args.max_cpu,
            {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}))
        labels = {"app": NAME}
        await client.create(kinds.DEPLOYMENT, {"metadata": {"name": NAME}, "spec": {
            "replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                    "name": "pause", "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "1"}}}]}}},
        }, namespace=NAMESPACE)
        await asyncio.sleep(2.0)
        controller.sample()
        requests0, cpu0 = controller.requests(), controller.cpu
        t0 = time.time()
        await client.patch(kinds.DEPLOYMENT, NAME, {"spec": {"replicas": pods}},
                           namespace=NAMESPACE)
        while await running_pods(client) < pods:
            controller.sample()
            if exited(controller, result):
                return result
            if time.time() - t0 > args.timeout:
                result.notes.append(f"scale-up timed out after {args.timeout:g}s")
                break
            await asyncio.sleep(2.0)
        result.up_seconds = time.time() - t0
        claims = await live_claims(client)
        result.up_claims, result.up_price = len(claims), fleet_price(claims)

        keep = max(1, round(pods * args.keep))
        t1 = time.time()
        await client.patch(kinds.DEPLOYMENT, NAME, {"spec": {"replicas": keep}},
                           namespace=NAMESPACE)
        last_change, seen = t1, {c["metadata"]["name"] for c in claims}
        while True:
            controller.sample()
            if exited(controller, result):
                return result
            await asyncio.sleep(2.0)
            now = {c["metadata"]["name"] for c in await live_claims(client)}
            if now != seen:
                seen, last_change = now, time.time()
            elif (time.time() - last_change > args.settle
                  and await running_pods(client) == keep):
                break
            if time.time() - t1 > args.timeout:
                result.notes.append(f"scale-down still changing after {args.timeout:g}s")
                break
        result.down_seconds = last_change - t1
        claims = await live_claims(client)
        result.down_claims, result.down_price = len(claims), fleet_price(claims)
        controller.sample()
        result.requests = controller.requests() - requests0
        result.cpu_seconds = controller.cpu - cpu0
        result.peak_rss_mib = controller.rss_kib / 1024

        # Empty the cluster while the controller still runs (its termination drains).
        await client.delete(kinds.DEPLOYMENT, NAME, namespace=NAMESPACE)
        await client.delete(NODE_POOL, NAME)
        deadline = time.time() + 300
        while await client.list(NODE_CLAIM, live=True) or await client.list(kinds.NODE,
                                                                           live=True):
            if time.time() > deadline:
                result.notes.append("teardown: NodeClaims/Nodes left after 300s")
                break
            await asyncio.sleep(2.0)
        with contextlib.suppress(errors.NotFound):
            await client.delete(KWOK_NODE_CLASS, NAME)
        while True:
            try:
                await client.get(kinds.DEPLOYMENT, NAME, namespace=NAMESPACE)
            except errors.NotFound:
                break
            await asyncio.sleep(0.5)
    finally:
        await client.close()
        controller.stop()
    return result


def table(results: list[Result]) -> str:
    head = ("| controller | pods | to all Running (s) | NodeClaims | $/h | API requests "
            "| CPU s | peak RSS (MiB) | consolidation (s) | NodeClaims left | $/h left |")
    rows = [head, "|" + "---|" * 11]
    for r in results:
        rows.append(
            f"| {r.controller} | {r.pods} | {r.up_seconds:.1f} | {r.up_claims} "
            f"| {r.up_price:.3f} | {r.requests:.0f} | {r.cpu_seconds:.1f} "
            f"| {r.peak_rss_mib:.0f} | {r.down_seconds:.1f} | {r.down_claims} "
            f"| {r.down_price:.3f} |" + (f" {'; '.join(r.notes)}" if r.notes else ""))
    return "\n".join(rows)


async def run_all(args: argparse.Namespace, kubeconfig: str, catalogue: Path,
                  logs: Path) -> list[Result]:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        await client.create(kinds.NAMESPACE, {"metadata": {"name": NAMESPACE}})
    finally:
        await client.close()
    results = []
    for pods in args.pods or [1000]:
        for round_ in range(args.rounds):
            order = ("karpy", "karpenter") if round_ % 2 == 0 else ("karpenter", "karpy")
            for which in order:
                r = await one_run(args, which, pods, kubeconfig, catalogue, logs)
                print(table([r]).splitlines()[-1], flush=True)
                results.append(r)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, action="append", help="repeatable (default 1000)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-cpu", type=int, default=4)
    parser.add_argument("--keep", type=float, default=0.3,
                        help="share of the pods kept by the scale-down")
    parser.add_argument("--settle", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--logs", help="directory to keep the controllers' logs in")
    args = parser.parse_args()
    if not KARPENTER.exists():
        subprocess.run(["bash", str(CONTROLPLANE / "build-karpenter.sh")], check=True)
    directory = Path(tempfile.mkdtemp(prefix="karpy-sidebyside-cluster-"))
    logs = Path(args.logs or tempfile.mkdtemp(prefix="karpy-sidebyside-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    catalogue = logs / "instance_types.json"
    catalogue.write_text(dump_catalogue(generate_catalogue()))
    try:
        kubeconfig = start_cluster(directory)
        results = asyncio.run(run_all(args, kubeconfig, catalogue, logs))
    finally:
        subprocess.run(["bash", str(CONTROLPLANE / "stop.sh"), str(directory)],
                       capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)
    print()
    print(table(results))
    print(f"\n(Karpenter v1.15.0 kwok vs karpy, one local control plane; "
          f"{os.cpu_count()} CPUs; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; logs in {logs})")
    print(json.dumps([r.__dict__ for r in results]))


if __name__ == "__main__":
    main()
