"""Benchmark (not a test): a large scale-up from zero, and where its time goes.

Run:  .venv/bin/python benchmarks/scaleup_bench.py [--pods 3000] [--max-cpu 4]

Issue 15, scenario 6, as a new user would try it: a NodePool limited to on-demand kwok
types of at most ``--max-cpu`` vCPU, a Deployment of one-CPU pause pods scaled from 0 to
``--pods``, ``karpy run`` as a subprocess (leader election on, default settings). It
starts a fresh local control plane of its own (tests/controlplane/start.sh in a
temporary directory) and stops it at the end; run it under the shared cluster lock.

``--floor`` measures what the control plane costs by itself: no karpy; ⌈pods / 3⌉ kwok
Nodes of 4 vCPU (3,900m allocatable, as the kwok catalogue's 4-vCPU types, so three
one-CPU pods per node, as karpy packs them) are created and Ready before the clock
starts, then the Deployment is scaled and kube-scheduler, the ReplicaSet controller and
kwok bind and start the pods. Its time is the floor under any autoscaler's figure.

It prints the time until every pod is Running, karpy's peak RSS (VmHWM), and a timeline
of the stages every pod and NodeClaim goes through, from the objects' own timestamps
(one-second resolution) and karpy's JSON log (milliseconds): when 1/10/50/90/100 % of
them had reached each stage, counted from the scale-up, and karpy's provisioning
rounds. ``--log`` keeps karpy's log for a closer look.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from karpy.runtime import KubeClient, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

REPO = Path(__file__).resolve().parent.parent
CONTROLPLANE = REPO / "tests/controlplane"
KWOK_NODE_CLASS = kinds.Kind(group="karpenter.kwok.sh", version="v1alpha1",
                             plural="kwoknodeclasses", kind="KWOKNodeClass", namespaced=False)
NAMESPACE = "scaleup"


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _condition_time(obj: dict[str, Any], kind: str) -> float | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind and c.get("status") == "True":
            return _ts(c.get("lastTransitionTime"))
    return None


def _started(pod: dict[str, Any]) -> float | None:
    """When the pod's container started running (kwok writes it with phase Running)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        running = (status.get("state") or {}).get("running") or {}
        if running.get("startedAt"):
            return _ts(running["startedAt"])
    return None


async def _running(client: KubeClient) -> int:
    """Pods of the benchmark in phase Running. Counted rather than the Deployment's
    readyReplicas: on a loaded machine kwok can miss node heartbeats, the node-lifecycle
    controller then marks the node's pods not Ready, and nothing marks them Ready again.

    First asked as "one pod not Running, if any": while there is one, the count is not
    needed (-1). Listing all 3,000 pods every 2 s cost the API server and this process
    CPU-seconds that the measured scale-up then lacked on a 2-core machine.
    """
    page = await client.list_page(kinds.POD, namespace=NAMESPACE,
                                  field_selector="status.phase!=Running", limit=1)
    if page.items:
        return -1
    pods = await client.list(kinds.POD, namespace=NAMESPACE, live=True)
    return sum((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _quantiles(times: Iterable[float | None], t0: float, total: int) -> str:
    got = sorted(t - t0 for t in times if t is not None)
    if not got:
        return "none"
    cells = []
    for share in (0.01, 0.10, 0.50, 0.90, 1.0):
        index = min(len(got), max(1, math.ceil(share * total))) - 1
        cells.append(f"{got[index]:6.1f}")
    return " ".join(cells) + f"   ({len(got)}/{total})"


def _kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        [str(CONTROLPLANE / "bin/controlplane"), "kubectl", "--kubeconfig", kubeconfig, *args],
        input=stdin, capture_output=True, text=True, check=True,
    ).stdout


def _rss_kib(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _component_cpu(cluster_dir: Path) -> dict[str, float]:
    out = {}
    for name in ("apiserver", "controller-manager", "scheduler", "kwok", "controlplane"):
        with contextlib.suppress(OSError, ValueError):
            out[name] = _cpu_seconds(int((cluster_dir / f"{name}.pid").read_text().strip()))
    return out


def _read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _leading(path: Path) -> bool:
    return b"successfully acquired lease" in path.read_bytes()


def kwok_nodepool(name: str, max_cpu: int, disruption: dict[str, Any]) -> dict[str, Any]:
    """The benchmarks' NodePool: on-demand amd64 Linux kwok types of at most ``max_cpu``
    vCPU on the KWOKNodeClass of the same name, never expiring."""
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": name},
        "requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt",
             "values": [str(max_cpu + 1)]},
        ],
        "expireAfter": "Never",
    }}, "disruption": disruption}}


async def scale_up(
    args: argparse.Namespace, kubeconfig: str, cluster_dir: Path,
    karpy: subprocess.Popen[bytes], log_path: Path,
) -> None:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        await client.create(kinds.NAMESPACE, {"metadata": {"name": NAMESPACE}})
        await client.create(KWOK_NODE_CLASS, {"metadata": {"name": "scaleup"}, "spec": {}})
        await client.create(NODE_POOL, kwok_nodepool(
            "scaleup", args.max_cpu,
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}))
        labels = {"app": "inflate"}
        await client.create(kinds.DEPLOYMENT, {
            "metadata": {"name": "inflate"},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                    "name": "pause", "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "1"}}}]}}},
        }, namespace=NAMESPACE)
        # karpy up and leading before the clock starts, as for a user who scales later.
        while not _leading(log_path):
            if karpy.poll() is not None:
                raise SystemExit(f"karpy exited early; see {log_path}")
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)
        cpu_before = _component_cpu(cluster_dir) | {"karpy": _cpu_seconds(karpy.pid)}
        t0 = time.time()
        await client.patch(kinds.DEPLOYMENT, "inflate", {"spec": {"replicas": args.pods}},
                           namespace=NAMESPACE)
        running = 0
        rss = 0
        karpy_cpu = cpu_before["karpy"]
        while running < args.pods:
            if karpy.poll() is not None:
                print(f"karpy exited ({karpy.returncode}) before all pods were Running; "
                      f"see {log_path}")
                break
            rss = max(rss, _rss_kib(karpy.pid))  # sampled: VmHWM is gone once it exits
            karpy_cpu = _cpu_seconds(karpy.pid) or karpy_cpu  # likewise its CPU time
            if time.time() - t0 > args.timeout:
                print(f"timed out after {args.timeout}s")
                break
            await asyncio.sleep(2.0)
            running = await _running(client)
        elapsed = time.time() - t0
        cpu_after = _component_cpu(cluster_dir) | {
            "karpy": _cpu_seconds(karpy.pid) or karpy_cpu}
        rss = max(rss, _rss_kib(karpy.pid))
        pods = await client.list(kinds.POD, namespace=NAMESPACE, live=True)
        claims = await client.list(NODE_CLAIM, live=True)
        events = await client.list(kinds.EVENT, namespace=NAMESPACE, live=True)
    finally:
        await client.close()
    records = _read_log(log_path)
    report(args, t0, elapsed, rss, pods, claims, events, records,
           {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after})
    print(f"karpy log: {log_path}")


async def floor(args: argparse.Namespace, kubeconfig: str, cluster_dir: Path) -> None:
    """The control plane alone (see the module docstring)."""
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        await client.create(kinds.NAMESPACE, {"metadata": {"name": NAMESPACE}})
        labels = {"app": "inflate"}
        await client.create(kinds.DEPLOYMENT, {
            "metadata": {"name": "inflate"},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                    "name": "pause", "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "1"}}}]}}},
        }, namespace=NAMESPACE)
        count = math.ceil(args.pods / 3)
        gate = asyncio.Semaphore(32)

        async def node(i: int) -> None:
            name = f"floor-{i:05d}"
            async with gate:
                await client.create(kinds.NODE, {
                    "metadata": {"name": name,
                                 "annotations": {"kwok.x-k8s.io/node": "fake"},
                                 "labels": {"kubernetes.io/hostname": name,
                                            "kubernetes.io/os": "linux",
                                            "kubernetes.io/arch": "amd64",
                                            "type": "kwok"}},
                    "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                               "allocatable": {"cpu": "3900m", "memory": "15Gi",
                                               "pods": "110"}}})

        started = time.time()
        await asyncio.gather(*(node(i) for i in range(count)))
        while True:
            nodes = await client.list(kinds.NODE, live=True)
            ready = sum(_condition_time(n, "Ready") is not None for n in nodes)
            if ready >= count:
                break
            await asyncio.sleep(1.0)
        print(f"{count} kwok nodes created and Ready in {time.time() - started:.1f}s")
        await asyncio.sleep(5.0)  # let the node heartbeats settle
        cpu_before = _component_cpu(cluster_dir)
        t0 = time.time()
        await client.patch(kinds.DEPLOYMENT, "inflate", {"spec": {"replicas": args.pods}},
                           namespace=NAMESPACE)
        running = 0
        while running < args.pods and time.time() - t0 < args.timeout:
            await asyncio.sleep(2.0)
            running = await _running(client)
        elapsed = time.time() - t0
        cpu_after = _component_cpu(cluster_dir)
        pods = await client.list(kinds.POD, namespace=NAMESPACE, live=True)
    finally:
        await client.close()
    n = len(pods)
    ready = sum(_condition_time(p, "Ready") is not None for p in pods)
    running = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
    print(f"\nfloor (no karpy): {args.pods} pods of 1 CPU onto {count} pre-created kwok "
          f"nodes: {running} Running ({ready} Ready) after {elapsed:.1f}s")
    print("CPU seconds used during the scale-up: " + ", ".join(
        f"{k} {cpu_after[k] - cpu_before.get(k, 0.0):.1f}" for k in sorted(cpu_after)))
    print("\nstage (seconds after scale-up when 1% 10% 50% 90% 100% had reached it)")
    for label, times in (
        ("pod created (ReplicaSet)", [_ts(p["metadata"].get("creationTimestamp")) for p in pods]),
        ("pod bound (PodScheduled)", [_condition_time(p, "PodScheduled") for p in pods]),
        ("pod Running (started)", [_started(p) for p in pods]),
        ("pod Ready", [_condition_time(p, "Ready") for p in pods]),
    ):
        print(f"  {label:30} {_quantiles(times, t0, n)}")
    print(f"({os.cpu_count()} CPUs; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")


def report(
    args: argparse.Namespace, t0: float, elapsed: float, rss_kib: int,
    pods: Sequence[dict[str, Any]], claims: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]],
    cpu: dict[str, float],
) -> None:
    def logged(message: str) -> list[float]:
        return [t for r in records if r.get("message") == message
                and (t := _ts(r.get("time"))) is not None and t >= t0 - 1]

    unschedulable: dict[str, float] = {}
    for e in events:
        if e.get("reason") == "FailedScheduling":
            name = (e.get("involvedObject") or {}).get("name", "")
            t = _ts(e.get("firstTimestamp") or e.get("eventTime"))
            if t is not None:
                unschedulable[name] = min(t, unschedulable.get(name, t))
    n, c = len(pods), len(claims)
    running = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
    ready = sum(_condition_time(p, "Ready") is not None for p in pods)
    print(f"\n{args.pods} pods of 1 CPU on on-demand nodes of <= {args.max_cpu} vCPU: "
          f"{running} Running ({ready} Ready) after {elapsed:.1f}s; {c} NodeClaims; karpy "
          f"peak RSS {rss_kib / 1024:.0f} MiB")
    print("CPU seconds used during the scale-up: " + ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
    print("\nstage (seconds after scale-up when 1% 10% 50% 90% 100% had reached it)")
    rows = [
        ("pod created (ReplicaSet)",
         [_ts(p["metadata"].get("creationTimestamp")) for p in pods], n),
        ("pod marked unschedulable", list(unschedulable.values()), n),
        ("nodeclaim created", [_ts(x["metadata"].get("creationTimestamp")) for x in claims], c),
        ("  'created nodeclaim' log", logged("created nodeclaim"), c),
        ("nodeclaim launched", [_condition_time(x, "Launched") for x in claims], c),
        ("  'launched nodeclaim' log", logged("launched nodeclaim"), c),
        ("nodeclaim registered", [_condition_time(x, "Registered") for x in claims], c),
        ("nodeclaim initialized", [_condition_time(x, "Initialized") for x in claims], c),
        ("pod bound (PodScheduled)", [_condition_time(p, "PodScheduled") for p in pods], n),
        ("pod Running (started)", [_started(p) for p in pods], n),
        ("pod Ready", [_condition_time(p, "Ready") for p in pods], n),
    ]
    for label, times, total in rows:
        print(f"  {label:30} {_quantiles(times, t0, total)}")
    print("\nprovisioning rounds (karpy log)")
    for r in records:
        t = _ts(r.get("time"))
        if t is None or t < t0 - 1:
            continue
        message = r.get("message")
        if message == "found provisionable pod(s)":
            print(f"  {t - t0:6.1f}s  found provisionable pods, simulation {r.get('duration')}")
        elif message == "computed new nodeclaim(s) to fit pod(s)":
            print(f"  {t - t0:6.1f}s  computed {r.get('nodeclaims')} nodeclaims for "
                  f"{r.get('pods')} pods")
        elif message in ("computed unready node(s) will fit pod(s)",):
            print(f"  {t - t0:6.1f}s  {r.get('pods')} pods fit in-flight nodes")


def start_cluster(directory: Path) -> str:
    out = subprocess.run(["bash", str(CONTROLPLANE / "start.sh"), "--fresh", str(directory)],
                         check=True, capture_output=True, text=True)
    kubeconfig = out.stdout.strip().splitlines()[-1]
    # crds/kwok: Karpenter's NodePool and NodeClaim with the kwok provider's rules, and
    # the KWOKNodeClass (the set the test cluster serves; crds/ holds one per provider).
    _kubectl(kubeconfig, "apply", "--server-side", "-f", str(REPO / "crds" / "kwok"))
    _kubectl(kubeconfig, "wait", "--for=condition=Established", "crd", "--all",
             "--timeout=60s")
    return kubeconfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--max-cpu", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--log", help="where to keep karpy's log")
    parser.add_argument("--floor", action="store_true",
                        help="no karpy: bind the pods onto pre-created kwok nodes")
    parser.add_argument("--karpy-arg", action="append", default=[],
                        help="an extra argument for `karpy run` (repeatable)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="karpy-scaleup-cluster-"))
    log_path = Path(args.log or directory.with_suffix(".karpy.log"))
    try:
        kubeconfig = start_cluster(directory)
        if args.floor:
            asyncio.run(floor(args, kubeconfig, directory))
            return
        with log_path.open("wb") as karpy_log:
            karpy = subprocess.Popen(
                [sys.executable, "-m", "karpy.cli", "run", "--kubeconfig", kubeconfig,
                 "--cloud-provider", "kwok", "--metrics-port", "0",
                 "--health-probe-port", "0", *args.karpy_arg],
                stdout=subprocess.DEVNULL, stderr=karpy_log,
                env={**os.environ, "SYSTEM_NAMESPACE": "kube-system"},
            )
            try:
                asyncio.run(scale_up(args, kubeconfig, directory, karpy, log_path))
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
    print(f"(local control plane in a fresh temporary directory; {os.cpu_count()} CPUs; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")


if __name__ == "__main__":
    main()
