"""End to end: `karpy top` driven in a real terminal (tmux) against the local cluster,
under a read-only ServiceAccount (deploy/karpy-top-rbac.yaml), while karpy provisions.

Issue 14, acceptance 4: karpy top starts in a detached tmux session of a fixed size; the
test waits (bounded polling of capture-pane) until the pane shows every node of the
cluster under its NodePool with its instance type and price, and totals equal to what
the test computes itself from the cluster and the kwok catalogue ($/h, node count,
pending pods). Then the workload is scaled and the same pane, with no restart, shows
the new nodes and totals; the keys sort and filter it. karpy's /metrics exposes the
same total as karpy_cluster_cost_per_hour.

Set KARPY_TOP_CAPTURE=path to keep the captured pane (docs/tools.md shows one).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import karpy_operator
from kube import (
    KWOK_NODE_CLASS,
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    ready_node_class,
    running_pods,
)
from test_rbac import service_account_kubeconfig

from karpy.cloudprovider.kwok import generate_catalogue, to_instance_types
from karpy.controllers.settings import Settings
from karpy.runtime import Client, KubeClient, errors, kinds
from karpy.scheduling import resources as res
from karpy.state.kinds import NODE_CLAIM, NODE_POOL
from karpy.tools.top import bar, format_price

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed: the terminal test drives karpy top in it"),
]

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "karpy-top-rbac.yaml"
ACCOUNT = "karpy-top"
NODE_CLASS = "top-e2e"
WEB, BATCH = "top-web", "top-batch"  # the NodePools (and the apps that land on them)
STUCK = "top-stuck"  # an app no NodePool can host: its pods stay pending
SELECT = "karpy-e2e-top"
WIDTH, HEIGHT = 200, 60
CPU_2 = {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": ["2"]}


def capacity(ct: str) -> dict[str, Any]:
    return {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct]}


PRICES = {
    (it.name, o.zone, o.capacity_type): o.price
    for it in to_instance_types(generate_catalogue())
    for o in it.offerings
}
"""The kwok catalogue karpy runs with, as the test reads it itself."""


def node_price(node: Any) -> float | None:
    labels = node["metadata"].get("labels") or {}
    if "karpenter.sh/nodepool" not in labels:
        return None
    return PRICES[(labels["node.kubernetes.io/instance-type"],
                   labels["topology.kubernetes.io/zone"],
                   labels["karpenter.sh/capacity-type"])]


def unschedulable(pod: Any) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or ())


async def expected(client: Client) -> tuple[list[Any], list[Any], str]:
    """Every Node and Pod and the TOTAL line karpy top should show for the cluster as
    it is."""
    nodes = await client.list(kinds.NODE)
    claims = await client.list(NODE_CLAIM)
    node_names = {n["metadata"]["name"] for n in nodes}
    in_flight = [c for c in claims
                 if (c.get("status") or {}).get("nodeName") not in node_names]
    pods = await client.list(kinds.POD)
    pending = [p for p in pods if not p["spec"].get("nodeName") and unschedulable(p)]
    total = math.fsum(p for n in nodes if (p := node_price(n)) is not None)
    return nodes, pods, (f"TOTAL {len(nodes) + len(in_flight)} nodes  {format_price(total)}/h  "
                   f"in flight: {len(in_flight)}  pending pods: {len(pending)}")


class Tmux:
    """A tmux server of its own (private socket) running one session."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    async def run(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "tmux", "-u", "-L", self.socket, *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            # Without COLUMNS and LINES: a pytest-xdist worker has them (80x24), the tmux
            # server would pass them on, and rich would draw for them, not for the pane.
            env={**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
                 "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {err.decode()}")
        return out.decode()

    async def capture(self) -> str:
        return await self.run("capture-pane", "-p", "-t", "top")

    async def wait_for(self, what: str, check: Callable[[str], bool],
                       timeout: float = 90.0) -> str:  # noqa: ASYNC109
        """Poll the pane until ``check`` holds on its text; fail showing the pane."""
        last = ""

        async def ok() -> str | None:
            nonlocal last
            last = await self.capture()
            return last if check(last) else None

        try:
            return await eventually(ok, timeout=timeout, what=what, every=0.25)
        except AssertionError as failure:
            raise AssertionError(f"{failure}; the pane shows:\n{last}") from None


@contextlib.asynccontextmanager
async def karpy_top(cluster: Any, kubeconfig: Path, tmp: Path) -> AsyncIterator[Tmux]:
    """``karpy top`` in a detached tmux session of WIDTH x HEIGHT; the pane stays after
    it exits (so a crash is visible), and the server is killed afterwards."""
    config = tmp / "tmux.conf"
    config.write_text("set -g remain-on-exit on\nset -g status off\n")
    tmux = Tmux(f"karpy-top-e2e-{os.getpid()}")
    command = shlex.join([sys.executable, "-m", "karpy.cli", "top", "--kubeconfig",
                          str(kubeconfig), "--cloud-provider", "kwok", "--interval", "0.2"])
    await tmux.run("-f", str(config), "new-session", "-d", "-s", "top", "-x", str(WIDTH),
                   "-y", str(HEIGHT), f"env LC_ALL=C.UTF-8 LANG=C.UTF-8 {command}")
    try:
        yield tmux
    finally:
        with contextlib.suppress(AssertionError):
            await tmux.run("kill-server")


def shows(nodes: list[Any], total: str) -> Callable[[str], bool]:
    """Whether the pane lists every node and the expected TOTAL line."""

    def check(pane: str) -> bool:
        return total in pane and all(n["metadata"]["name"] in pane for n in nodes)

    return check


def requested(pods: list[Any], node: str) -> res.ResourceList:
    """The summed requests of the pods bound to ``node``."""
    return res.add(*(
        res.parse_resource_list(c.get("resources", {}).get("requests"))
        for p in pods if p["spec"].get("nodeName") == node and not p["metadata"].get(
            "deletionTimestamp") and p["status"].get("phase") not in ("Succeeded", "Failed")
        for c in p["spec"]["containers"]
    ))


def assert_rows(pane: str, nodes: list[Any], pods: list[Any]) -> None:
    """Each node's line has its instance type, zone, capacity type, its pods' CPU and
    memory requests over its allocatable and its price, and sits under its NodePool's
    header."""
    lines = pane.splitlines()
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        name = node["metadata"]["name"]
        (index,) = [i for i, line in enumerate(lines) if re.search(rf"\b{name}\b", line)]
        line = lines[index]
        pool = labels.get("karpenter.sh/nodepool")
        if pool is None:
            assert " - " in line, line  # not karpy's: no price
            continue
        allocatable = res.parse_resource_list(node["status"]["allocatable"])
        used = requested(pods, name)
        for cell in (labels["node.kubernetes.io/instance-type"],
                     labels["topology.kubernetes.io/zone"],
                     labels["karpenter.sh/capacity-type"], format_price(node_price(node)),
                     bar(used.get("cpu", 0) / allocatable["cpu"]),
                     bar(used.get("memory", 0) / allocatable["memory"])):
            assert cell in line, f"{cell!r} missing from {line!r}"
        header = next(line for line in reversed(lines[:index])
                      if line.startswith(("nodepool ", "unmanaged")))
        assert header.startswith(f"nodepool {pool}:"), (header, name)


def pool_header(pane: str, pool: str, nodes: list[Any]) -> None:
    """The pool's header counts its nodes and shows their summed price."""
    mine = [n for n in nodes if (n["metadata"].get("labels") or {}).get(
        "karpenter.sh/nodepool") == pool]
    subtotal = format_price(math.fsum(node_price(n) or 0.0 for n in mine))
    (header,) = [line for line in pane.splitlines() if line.startswith(f"nodepool {pool}:")]
    assert header.startswith(f"nodepool {pool}: {len(mine)} nodes"), header
    assert header.rstrip().endswith(subtotal), (header, subtotal)


@pytest.fixture
def top_rbac(cluster: Any) -> Any:
    cluster.kubectl("apply", "-f", str(RBAC))
    try:
        yield
    finally:
        cluster.kubectl("delete", "-f", str(RBAC), "--ignore-not-found", "--wait=false")


async def test_karpy_top_in_a_terminal_matches_the_cluster_and_follows_it(
    cluster: Any, namespace: str, kwok_crd: None, top_rbac: None, tmp_path: Path
) -> None:
    kubeconfig = service_account_kubeconfig(cluster, tmp_path / "top.kubeconfig", ACCOUNT)
    # The account really is read-only.
    as_top = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        await as_top.list(NODE_CLAIM, live=True)
        with pytest.raises(errors.Forbidden):
            await as_top.create(NODE_POOL, nodepool("top-e2e-denied", node_class=NODE_CLASS,
                                                    labels={SELECT: "x"}))
    finally:
        await as_top.close()

    settings = Settings(batch_idle_duration=0.5, batch_max_duration=3.0)
    async with connect(cluster) as client, karpy_operator(cluster, settings=settings) as op:
        await ready_node_class(client, NODE_CLASS)
        await client.create(NODE_POOL, nodepool(WEB, node_class=NODE_CLASS,
                                                labels={SELECT: WEB},
                                                requirements=[CPU_2, capacity("on-demand")]))
        await client.create(NODE_POOL, nodepool(BATCH, node_class=NODE_CLASS,
                                                labels={SELECT: BATCH},
                                                requirements=[CPU_2, capacity("spot")]))
        forced: list[str] = []
        try:
            # One pod per node (1500m on 2-CPU types): 2 web nodes, 1 batch node.
            for app, replicas, memory in ((WEB, 2, "1536Mi"), (BATCH, 1, "3Gi"),
                                          (STUCK, 2, "1Gi")):
                manifest = deployment(app, node_selector={SELECT: app}, replicas=replicas,
                                      cpu="1500m")
                (container,) = manifest["spec"]["template"]["spec"]["containers"]
                container["resources"]["requests"]["memory"] = memory
                await client.create(kinds.DEPLOYMENT, manifest, namespace=namespace)
            await eventually(lambda: running_pods(client, namespace, WEB, 2), timeout=120,
                             what="2 web pods Running")
            await eventually(lambda: running_pods(client, namespace, BATCH, 1), timeout=120,
                             what="1 batch pod Running")

            async def stuck_pending() -> bool:
                stuck = await client.list(kinds.POD, namespace=namespace,
                                          label_selector={"app": STUCK})
                return len([p for p in stuck if unschedulable(p)]) == 2

            await eventually(stuck_pending, timeout=60,
                             what="kube-scheduler to mark the stuck pods Unschedulable")

            async with karpy_top(cluster, kubeconfig, tmp_path) as tmux:
                nodes, pods, total = await expected(client)
                assert "pending pods: 2" in total and "in flight: 0" in total
                pane = await tmux.wait_for(f"every node and {total!r}", shows(nodes, total))
                assert_rows(pane, nodes, pods)
                pool_header(pane, WEB, nodes)
                pool_header(pane, BATCH, nodes)

                # karpy's /metrics has the same total.
                assert op.operator is not None
                metrics = op.operator.manager.metrics
                cost = math.fsum(p for n in nodes if (p := node_price(n)) is not None)

                async def exported() -> bool:
                    text = metrics.render().decode()
                    found = re.search(r"^karpy_cluster_cost_per_hour (\S+)$", text, re.M)
                    return found is not None and math.isclose(float(found[1]), cost)

                await eventually(exported, timeout=30,
                                 what=f"karpy_cluster_cost_per_hour {cost}")
                text = metrics.render().decode()
                web = math.fsum(node_price(n) or 0.0 for n in nodes
                                if n["metadata"]["labels"].get("karpenter.sh/nodepool") == WEB)
                found = re.search(r'^karpy_nodepool_cost_per_hour\{capacity_type="on-demand",'
                                  rf'nodepool="{WEB}"\}} (\S+)$', text, re.M)
                assert found is not None and math.isclose(float(found[1]), web), text

                # Scale: the same pane (no restart) follows the watches.
                await client.patch(kinds.DEPLOYMENT, WEB, {"spec": {"replicas": 4}},
                                   namespace=namespace)
                await eventually(lambda: running_pods(client, namespace, WEB, 4), timeout=120,
                                 what="4 web pods Running")
                nodes, pods, total = await expected(client)
                pane = await tmux.wait_for(f"the scaled cluster: {total!r}",
                                           shows(nodes, total))
                assert_rows(pane, nodes, pods)
                pool_header(pane, WEB, nodes)
                # --once prints the same frame and exits.
                once = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "karpy.cli", "top", "--once", "--width", str(WIDTH),
                    "--kubeconfig", str(kubeconfig),
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    # Without COLUMNS and LINES: a pytest-xdist worker has them (80x24), the tmux
            # server would pass them on, and rich would draw for them, not for the pane.
            env={**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
                 "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
                )
                out, err = await asyncio.wait_for(once.communicate(), timeout=60)
                assert once.returncode == 0, err.decode()
                assert total in out.decode(), out.decode()
                assert_rows(out.decode(), nodes, pods)
                if path := os.environ.get("KARPY_TOP_CAPTURE"):
                    await asyncio.to_thread(Path(path).write_text, pane)

                # Keys: s cycles the sort key, / filters (here: the spot pool only).
                await tmux.run("send-keys", "-t", "top", "s")
                await tmux.wait_for("sort: price", lambda p: "sort: price" in p)
                await tmux.run("send-keys", "-t", "top", "/", "capacity-type=spot", "Enter")
                spot = [n for n in nodes
                        if n["metadata"]["labels"].get("karpenter.sh/capacity-type") == "spot"]
                spot_total = format_price(math.fsum(node_price(n) or 0.0 for n in spot))
                pane = await tmux.wait_for(
                    "the spot filter",
                    lambda p: f"TOTAL {len(spot)} nodes  {spot_total}/h" in p
                    and "filter: capacity-type=spot" in p)
                assert f"nodepool {WEB}:" not in pane
                await tmux.run("send-keys", "-t", "top", "q")
                await tmux.wait_for("karpy top to quit", lambda p: "TOTAL" not in p,
                                    timeout=30)
        finally:
            with contextlib.suppress(errors.NotFound):
                await client.delete(kinds.DEPLOYMENT, STUCK, namespace=namespace)
            forced = await clean_up(client, namespace, WEB, [WEB, BATCH], timeout=90)
            with contextlib.suppress(errors.NotFound):
                await client.delete(kinds.DEPLOYMENT, BATCH, namespace=namespace)
            with contextlib.suppress(errors.NotFound):
                await client.delete(KWOK_NODE_CLASS, NODE_CLASS)
        assert forced == [], f"termination left these behind: {forced}"
