"""Runs the real Karpenter — sigs.k8s.io/karpenter v1.15.0's kwok provider, built by
tests/controlplane/build-karpenter.sh — against the local control plane.

It runs as a process on this machine, as Karpenter's own kwok e2e runs it in a cluster:
the kubeconfig of the cluster's admin (``KUBECONFIG``, which controller-runtime's
``GetConfigOrDie`` reads), its metrics and health probes on free ports (so they clash
neither with karpy's nor with another Karpenter's), and leader election on the Lease
``karpenter-leader-election`` in ``kube-system`` — the namespace a pod would read from its
service account; outside a pod it must be given (``LEADER_ELECTION_NAMESPACE``). karpy's
default (``SYSTEM_NAMESPACE`` unset) is the same Lease, so with both started only one
leads.

The instance types come from ``INSTANCE_TYPES_FILE_PATH`` (Karpenter kwok's
``--instance-types-file-path``): :func:`write_catalogue` writes karpy's generated kwok
catalogue in that format, and karpy's kwok provider reads the same file
(``--provider-setting instanceTypesFile=...``), so both plan over one catalogue.

Karpenter logs zap JSON lines (``message``, ``level``, ``logger``, ``controller``,
``NodeClaim``...) on stdout; they are collected in a :class:`~harness.RunningKarpy` like
karpy's, so tests wait on them the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from harness import RunningKarpy, pump_logs, stop_process

from karpy.cloudprovider.kwok._catalogue import dump_catalogue, generate_catalogue

__all__ = ["KARPENTER", "KARPENTER_VERSION", "build_karpenter", "karpenter_process",
           "write_catalogue"]

CONTROLPLANE = Path(__file__).resolve().parent.parent / "controlplane"
KARPENTER = CONTROLPLANE / "bin" / "karpenter-kwok"
BUILD = CONTROLPLANE / "build-karpenter.sh"
KARPENTER_VERSION = "v1.15.0"
LEASE_NAMESPACE = "kube-system"


def build_karpenter() -> Path:
    """Build Karpenter's kwok controller (cached: a no-op when nothing changed) and
    return the binary's path; the build's output is the failure message."""
    import subprocess

    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True,
                          timeout=3600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{BUILD} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return KARPENTER


def write_catalogue(path: Path) -> Path:
    """karpy's generated kwok catalogue, in Karpenter kwok's instance_types.json format."""
    path.write_text(dump_catalogue(generate_catalogue()))
    return path


def free_port() -> int:
    """A TCP port free on this machine right now (Karpenter binds ``:<port>``; 0 would
    work, but then its metrics could not be scraped)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RunningKarpenter(RunningKarpy):
    """A running Karpenter: its logs, pid and metrics port."""

    def __init__(self, *, metrics_port: int) -> None:
        super().__init__()
        self.metrics_port = metrics_port

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


@contextlib.asynccontextmanager
async def karpenter_process(
    cluster: Any,
    *,
    instance_types: Path,
    leader_election: bool = False,
    env: Mapping[str, str] | None = None,
    wait_leading: bool = True,
) -> AsyncIterator[RunningKarpenter]:
    """Run Karpenter against ``cluster`` until the block exits (SIGTERM, as a pod's
    stop: it releases its Lease on the way out).

    With ``wait_leading`` the block starts once Karpenter's controllers run (it logged
    "Starting workers" — after it won the Lease, with leader election on)."""
    binary = build_karpenter()
    running = RunningKarpenter(metrics_port=free_port())
    base = {k: v for k, v in os.environ.items()
            if k not in ("DISABLE_LEADER_ELECTION", "KUBECONFIG")}
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={
            **base,
            "KUBECONFIG": cluster.kubeconfig,
            "METRICS_PORT": str(running.metrics_port),
            "HEALTH_PROBE_PORT": str(free_port()),
            "DISABLE_LEADER_ELECTION": "false" if leader_election else "true",
            "LEADER_ELECTION_NAMESPACE": LEASE_NAMESPACE,
            "INSTANCE_TYPES_FILE_PATH": str(instance_types),
            "LOG_LEVEL": "info",
            **(env or {}),
        },
        start_new_session=True,
    )
    running.pid = proc.pid
    running.process = proc
    assert proc.stdout is not None
    reader = asyncio.create_task(pump_logs(running, proc.stdout), name="e2e:karpenter-logs")
    try:
        if wait_leading:
            await running.wait_for_log("Starting workers", timeout=90.0)
        yield running
    finally:
        await stop_process(proc)
        await reader

