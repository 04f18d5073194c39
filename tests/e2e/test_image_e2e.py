"""End to end: the image users deploy, run as the chart runs it.

scripts/image.sh builds the image (cached: a no-op when its inputs are unchanged). The
chart is installed as tests/e2e/test_chart_install.py does, with the image's repository
and tag; then the Deployment's own container — its image, command, args, env and
securityContext as ``helm template`` rendered them — runs under podman on this machine's
network, configured in-cluster exactly as in a pod: a TokenRequest token of the chart's
ServiceAccount and the cluster's CA mounted read-only at
/var/run/secrets/kubernetes.io/serviceaccount, and KUBERNETES_SERVICE_HOST/PORT.

What a user would notice is checked: it takes the Lease, serves /metrics and the probes
on the chart's ports, scales inflate 0 → 20 → 0 with the kwok provider, runs as uid
65532 with no capabilities, cannot write anywhere on its root filesystem, is never
refused by the API server (the chart's RBAC is all it has), and on SIGTERM releases the
Lease and exits 0 within the pod's termination grace period.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import resource
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts.charts_support import container_env, one, render
from harness import RunningKarpy, pump_logs
from kube import (
    clean_up,
    connect,
    deployment,
    eventually,
    nodepool,
    pool_objects,
    ready_node_class,
)
from test_chart_install import resolve
from test_rbac import denied_lines

from karpy.apis.quantity import parse_quantity
from karpy.runtime import errors, kinds
from karpy.state.kinds import NODE_CLAIM, NODE_POOL

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RELEASE = "karpy-image-e2e"
REPOSITORY, TAG = "localhost/karpy", "e2e"
NODE_CLASS = POOL = "image-e2e"
APP = "image-inflate"
SELECT = "karpy-e2e-image"
REPLICAS = 20
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Kubernetes' default when the chart leaves terminationGracePeriodSeconds unset.
DEFAULT_GRACE = 30


def podman(*args: str) -> list[str]:
    """podman as it works on these machines: crun refuses the hybrid cgroup layout."""
    return ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", *args]


def ulimits() -> list[str]:
    """Rlimits the container may have. Rootful podman 4.3 ignores ``--ulimit host`` and
    asks runc for 1048576 open files and 32768 processes, beyond what this machine lets
    a process raise to; the container gets this process's open-file limit instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = min(32768, resource.getrlimit(resource.RLIMIT_NPROC)[0])
    return ["--ulimit", f"nofile={soft}:{hard}", "--ulimit", f"nproc={nproc}:{nproc}"]


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built by scripts/image.sh (seconds when cached)."""
    # mmdebstrap, buildah and rootful podman cannot run unprivileged here (rootless
    # podman needs subuid ranges this machine does not grant), so an unprivileged run
    # cannot build or start the image at all: it skips, saying why, rather than fail.
    # CI and scripts/test.sh run as root, where the image is built and this test runs.
    if os.geteuid() != 0:
        pytest.skip("scripts/image.sh and rootful podman need root; run as root (as CI does)")
    ref = f"{REPOSITORY}:{TAG}"
    built = subprocess.run(["bash", str(REPO / "scripts" / "image.sh")],
                           env={**os.environ, "KARPY_IMAGE": ref}, capture_output=True,
                           text=True, timeout=3600)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr[-4000:]
    return ref


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chart_values(metrics_port: int, health_port: int) -> list[str]:
    return [
        "--set", "cloudProvider=kwok",
        "--set", "settings.clusterName=image-e2e",
        "--set", "controller.resources.requests.cpu=1",
        "--set", "controller.resources.requests.memory=1Gi",
        "--set", "controller.resources.limits.cpu=1",
        "--set", "controller.resources.limits.memory=1Gi",
        "--set", f"controller.image.repository={REPOSITORY}",
        "--set", f"controller.image.tag={TAG}",
        # the host's network is shared with other tests: ports nobody uses
        "--set", f"controller.metrics.port={metrics_port}",
        "--set", f"controller.healthProbe.port={health_port}",
        "--set", f"podDisruptionBudget.name={RELEASE}",
        # Its pods would land on kwok nodes and run nothing: podman runs the container.
        "--set", "replicas=0",
    ]  # fmt: skip


@pytest.fixture
def installed(cluster: Any, namespace: str) -> Any:
    docs = render(*chart_values(free_port(), free_port()), release=RELEASE, namespace=namespace)
    stream = "\n---\n".join(json.dumps(d) for d in docs)
    cluster.kubectl("apply", "--server-side", "-f", "-", input=stream)
    try:
        yield docs
    finally:
        # The kwok records' Namespace stays (test_chart_install.py says why).
        kept = "\n---\n".join(json.dumps(d) for d in docs if d.get("kind") != "Namespace")
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=kept)


def service_account_volume(cluster: Any, namespace: str, account: str, directory: Path) -> Path:
    """The projected volume the kubelet gives the pod: a TokenRequest token of
    ``account``, the cluster's CA and the namespace, readable by the container's user."""
    directory.mkdir(parents=True)
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=1h").strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    ca = base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    for name, text in (("token", token), ("ca.crt", ca), ("namespace", namespace)):
        (directory / name).write_text(text)
        (directory / name).chmod(0o644)
    directory.chmod(0o755)
    return directory


def run_args(pod: dict[str, Any], env: dict[str, str], sa: Path, name: str,
             cluster: Any) -> list[str]:  # fmt: skip
    """``podman run`` for the pod's one container, from its rendered spec."""
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["runAsNonRoot"] and context["runAsUser"] != 0
    assert not context.get("privileged")
    server = cluster.server.removeprefix("https://")
    host, _, port = server.rpartition(":")
    args = ["run", "--rm", "--name", name, "--hostname", name, "--network", "host",
            "--pull", "never", *ulimits(),
            "--user", f"{context['runAsUser']}:{context['runAsGroup']}",
            "--volume", f"{sa}:{SA_DIR}:ro",
            "--env", f"KUBERNETES_SERVICE_HOST={host}",
            "--env", f"KUBERNETES_SERVICE_PORT={port}"]  # fmt: skip
    if context.get("readOnlyRootFilesystem"):
        # A pod's root is read-only with no tmpfs on /tmp; podman adds one unless told not to.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if context.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    for cap in context.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    for cap in context.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    # The kubelet's cgroup limits: karpy is told MEMORY_LIMIT and must live within it.
    limits = container.get("resources", {}).get("limits", {})
    if "memory" in limits:
        args += ["--memory", str(int(parse_quantity(limits["memory"])))]
    if "cpu" in limits:
        args += ["--cpus", str(float(parse_quantity(limits["cpu"])))]
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]
    if container.get("command"):
        args += ["--entrypoint", json.dumps(container["command"])]
    return [*args, container["image"], *container.get("args", [])]


def get(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return answer.status, answer.read().decode()


def port_of(container: dict[str, Any], ref: int | str) -> int:
    if isinstance(ref, int):
        return ref
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == ref]
    return int(port)


def process_status(name: str) -> dict[str, str]:
    """/proc/<pid>/status of the container's main process, as this machine sees it."""
    pid = subprocess.run(podman("inspect", "--format", "{{.State.Pid}}", name),
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


WRITE = """
import sys
failed = []
for path in sys.argv[1:]:
    try:
        open(path + "/karpy-write-probe", "w").close()
    except OSError as e:
        failed.append(f"{path}: {e.strerror}")
print("\\n".join(failed))
"""


async def test_the_image_runs_as_the_chart_runs_it(
    image: str, cluster: Any, namespace: str, kwok_crd: None, installed: Any, tmp_path: Path
) -> None:
    started = time.monotonic()
    deploy = one(installed, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == image
    env = resolve(container_env(deploy), namespace)
    grace = pod.get("terminationGracePeriodSeconds") or DEFAULT_GRACE
    sa = service_account_volume(cluster, namespace, pod["serviceAccountName"], tmp_path / "sa")
    name = f"karpy-e2e-{secrets.token_hex(3)}"
    metrics = port_of(container, "http-metrics")
    probes = {container[p]["httpGet"]["path"]: port_of(container, container[p]["httpGet"]["port"])
              for p in ("livenessProbe", "readinessProbe")}  # fmt: skip

    pool = nodepool(POOL, node_class=NODE_CLASS, labels={SELECT: APP})
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
    running = RunningKarpy()
    async with connect(cluster) as admin:
        await ready_node_class(admin, NODE_CLASS)
        await admin.create(NODE_POOL, pool)
        proc = await asyncio.create_subprocess_exec(
            *podman(*run_args(pod, env, sa, name, cluster)),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        running.process = proc
        assert proc.stdout is not None
        reader = asyncio.create_task(pump_logs(running, proc.stdout), name="e2e:image-logs")
        try:
            await running.wait_for_log("successfully acquired lease", timeout=120)
            lease = await admin.get(kinds.LEASE, "karpenter-leader-election", namespace=namespace)
            assert lease["spec"]["holderIdentity"].startswith(name), lease["spec"]

            # The process: uid/gid 65532 everywhere, no capabilities, no new privileges.
            status = process_status(name)
            assert status["Uid"].split() == ["65532"] * 4, status["Uid"]
            assert status["Gid"].split() == ["65532"] * 4, status["Gid"]
            assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
            assert status["NoNewPrivs"] == "1"
            # Nowhere to write: the root, /tmp, the venv, the mounted credentials.
            wrote = await asyncio.to_thread(
                subprocess.run,
                podman("exec", name, "python3", "-c", WRITE, "/", "/tmp", "/opt/karpy/lib",
                       "/etc", SA_DIR),
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert wrote.returncode == 0, wrote.stderr
            refused = wrote.stdout.strip().splitlines()
            assert len(refused) == 5 and all("Read-only file system" in r for r in refused), (
                wrote.stdout)

            # The chart's ports: the metrics and both probes answer.
            for path, port in probes.items():
                code, _ = await asyncio.to_thread(get, port, path)
                assert code == 200, f"{path} on :{port}: {code}"

            # inflate 0 -> 20 -> 0
            await admin.create(
                kinds.DEPLOYMENT,
                deployment(APP, node_selector={SELECT: APP}, replicas=0, cpu="500m"),
                namespace=namespace,
            )
            await admin.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": REPLICAS}},
                              namespace=namespace)  # fmt: skip

            async def all_running() -> bool:
                pods = await admin.list(kinds.POD, namespace=namespace,
                                        label_selector={"app": APP})  # fmt: skip
                up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
                return len(up) == REPLICAS

            await eventually(all_running, timeout=150, what=f"{REPLICAS} inflate pods Running")
            assert await pool_objects(admin, NODE_CLAIM, [POOL])
            code, text = await asyncio.to_thread(get, metrics, "/metrics")
            assert code == 200 and "karpenter_nodeclaims_created_total" in text, text[:500]

            await admin.patch(kinds.DEPLOYMENT, APP, {"spec": {"replicas": 0}},
                              namespace=namespace)  # fmt: skip

            async def emptied() -> bool:
                return not await pool_objects(admin, kinds.NODE, [POOL]) and not (
                    await pool_objects(admin, NODE_CLAIM, [POOL]))

            await eventually(emptied, timeout=180, what="empty nodes and NodeClaims removed")
            assert proc.returncode is None, f"karpy exited:\n{running.tail()}"

            # SIGTERM, as the kubelet sends it: out within the grace period, exit 0,
            # the Lease handed back.
            stopping = time.monotonic()
            await asyncio.to_thread(subprocess.run,
                                    podman("kill", "--signal", "TERM", name),
                                    capture_output=True, check=True)  # fmt: skip
            try:
                code = await asyncio.wait_for(proc.wait(), timeout=grace)
            except TimeoutError:
                pytest.fail(f"karpy still running {grace}s after SIGTERM:\n{running.tail()}")
            took = time.monotonic() - stopping
            assert code == 0, f"exit {code} after SIGTERM:\n{running.tail()}"
            lease = await admin.get(kinds.LEASE, "karpenter-leader-election", namespace=namespace)
            assert lease["spec"].get("holderIdentity", "") == "", lease["spec"]
            print(f"image e2e: SIGTERM to exit {took:.1f}s (grace {grace}s); "
                  f"whole test {time.monotonic() - started:.0f}s")
        except AssertionError as failure:
            if denied := denied_lines(running.lines):
                raise AssertionError(
                    f"{failure}\nrefused requests:\n" + "\n".join(denied[:10])
                ) from failure
            raise
        finally:
            if proc.returncode is None:
                # Only after a failure: what the test made goes while karpy still runs
                # (termination included), then the container.
                await clean_up(admin, namespace, APP, [POOL], timeout=60)
                remove = podman("rm", "--force", "--time", "0", name)
                await asyncio.to_thread(subprocess.run, remove, capture_output=True)
                await proc.wait()
            await reader
            with contextlib.suppress(errors.NotFound):
                await admin.delete(NODE_POOL, POOL)
    denied = denied_lines(running.lines)
    assert not denied, "the chart's RBAC refused karpy:\n" + "\n".join(denied)
