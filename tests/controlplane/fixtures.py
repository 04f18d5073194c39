"""pytest plugin: the local Kubernetes control plane of tests/controlplane as fixtures.

Registered from tests/conftest.py. Fixtures:

- ``cluster`` (session): a running control plane, as a :class:`Cluster`. With
  ``KARPY_KUBECONFIG`` set, the cluster that kubeconfig points at is used as is (set
  ``KARPY_CLUSTER_DIR`` as well to allow :meth:`Cluster.restart_apiserver` and
  :meth:`Cluster.pid`, unless the kubeconfig is the admin.kubeconfig of a cluster
  directory made by start.sh, which is then found by itself). Otherwise the binaries
  are built (cached) and a new cluster is started in a temporary directory on free
  loopback ports, so several test sessions can run at once; it is stopped when the
  session ends, and its logs stay in that directory.
  karpy's CRDs (crds/kwok/ and every provider's NodeClass; see ``controlplane.crdsets``)
  are installed and Established before the first test runs.
- ``api_client`` (function): a kubernetes_asyncio ``ApiClient`` for the cluster.
- ``namespace`` (function): the name of a fresh namespace, deleted after the test.

Every test that uses ``cluster`` (directly or through the others) gets the ``cluster``
marker, so ``pytest -m "not cluster"`` runs only the tests that need no cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BIN = HERE / "bin"
CONTROLPLANE = BIN / "controlplane"
CRDS = REPO / "crds"

#: Components whose pid :meth:`Cluster.pid` knows. etcd runs inside the supervisor
#: ("controlplane"), so its pid is the supervisor's.
COMPONENTS = ("controlplane", "etcd", "apiserver", "controller-manager", "scheduler", "kwok")

_START_TIMEOUT = 90.0
_STOP_TIMEOUT = 30.0

#: What the session's cluster start spent its time on, in seconds by step, for the run's
#: time per phase (tests/testrun/phases.py): the wait for the Go builds first of all,
#: which scripts/test.sh runs in the background while the pure tests run.
STARTUP = pytest.StashKey[dict[str, float]]()


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started, or did not answer in time."""


class KubectlError(RuntimeError):
    """``kubectl`` exited non-zero; the message carries its arguments and stderr."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.kubectl_args = args
        self.returncode = returncode
        self.stderr = stderr


class Cluster:
    """A running control plane: where it is, and a few things tests do to it."""

    def __init__(self, *, kubeconfig: str, server: str, dir: Path | None) -> None:
        #: Path of a kubeconfig for an admin (system:masters) user.
        self.kubeconfig = kubeconfig
        #: The API server's URL, ``https://127.0.0.1:<port>``.
        self.server = server
        #: The cluster directory (pid files, logs, pki/), or None for a foreign cluster.
        self.dir = dir

    def __repr__(self) -> str:
        return f"Cluster(server={self.server!r}, dir={self.dir!r})"

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60.0) -> str:
        """Run kubectl against this cluster and return its stdout.

        Raises :class:`KubectlError` (with kubectl's stderr) when it exits non-zero.
        """
        argv = [str(CONTROLPLANE), "kubectl", "--kubeconfig", self.kubeconfig, *args]
        proc = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            raise KubectlError(list(args), proc.returncode, proc.stderr)
        return proc.stdout

    def kubectl_json(self, *args: str, timeout: float = 60.0) -> Any:
        """Run ``kubectl ... -o json`` and return the parsed document."""
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout))

    def pid(self, component: str) -> int:
        """The pid of a running component (one of :data:`COMPONENTS`)."""
        if component not in COMPONENTS:
            raise ValueError(f"unknown component {component!r}; expected one of {COMPONENTS}")
        directory = self._require_dir("pid")
        name = "controlplane" if component == "etcd" else component
        path = directory / f"{name}.pid"
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError) as err:
            raise ControlPlaneError(f"{component} is not running: cannot read {path}") from err
        if not _alive(pid):
            raise ControlPlaneError(f"{component} (pid {pid} from {path}) is not running")
        return pid

    def log_path(self, component: str) -> Path:
        """The log file of a component (for a failing test's message)."""
        return self._require_dir("log_path") / f"{component}.log"

    def restart_apiserver(self, *, graceful: bool = False, timeout: float = 60.0) -> None:
        """Stop the API server process and return once its replacement is ready.

        The supervisor restarts it on the same port with the same certificates, so
        ``server`` and ``kubeconfig`` stay valid; open connections and watches break.
        ``graceful=False`` kills it (SIGKILL, a crash); ``graceful=True`` sends SIGTERM.
        """
        old = self.pid("apiserver")
        os.kill(old, signal.SIGTERM if graceful else signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.pid("apiserver") != old:
                    break
            except ControlPlaneError:
                pass  # between the old process's exit and the new one's pid file
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"the API server was not restarted within {timeout}s")
            time.sleep(0.05)
        self.wait_ready(timeout=max(1.0, deadline - time.monotonic()))

    def wait_ready(self, *, timeout: float = 60.0) -> None:
        """Block until every component answers healthy (see ``controlplane wait``)."""
        directory = self._require_dir("wait_ready")
        _run_checked(
            [
                str(CONTROLPLANE),
                "wait",
                "--quiet",
                "--dir",
                str(directory),
                "--timeout",
                f"{timeout}s",
            ],
            what="waiting for the control plane",
            timeout=timeout + 10,
        )

    def _require_dir(self, what: str) -> Path:
        if self.dir is None:
            raise ControlPlaneError(
                f"Cluster.{what} needs the cluster directory: set KARPY_CLUSTER_DIR "
                "along with KARPY_KUBECONFIG"
            )
        return self.dir


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_checked(argv: list[str], *, what: str, timeout: float) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"{what} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}".rstrip()
        )
    return proc.stdout


def build() -> None:
    """Build the control-plane binaries (a no-op when nothing changed)."""
    _run_checked(["bash", str(HERE / "build.sh")], what="building tests/controlplane", timeout=3600)


def _server_of(kubeconfig: str) -> str:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters", [])}
    context = contexts[config["current-context"]]
    return str(clusters[context["cluster"]]["server"])


def _dir_of(kubeconfig: str) -> Path | None:
    """The cluster directory of a foreign cluster: KARPY_CLUSTER_DIR, or the
    kubeconfig's own directory when it is one of ours (start.sh's admin.kubeconfig)."""
    if dir_env := os.environ.get("KARPY_CLUSTER_DIR"):
        return Path(dir_env).resolve()
    parent = Path(kubeconfig).resolve().parent
    return parent if (parent / "cluster.json").is_file() else None


def _install_crds(cluster: Cluster) -> None:
    """Apply the test cluster's CRD manifests and wait until each is Established."""
    from controlplane.crdsets import default_manifests

    manifests = default_manifests()
    if not manifests:
        return
    names: list[str] = []
    for manifest in manifests:
        # Server-side apply: CRDs can outgrow the last-applied annotation's size limit.
        out = cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-o", "name", "-f", str(manifest)
        )
        names += [line for line in out.split() if line.startswith("customresourcedefinition")]
    if names:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


@pytest.fixture(scope="session")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[Cluster]:
    """A running control plane for the whole session (see the module docstring)."""
    steps = pytestconfig.stash.setdefault(STARTUP, {})
    external = os.environ.get("KARPY_KUBECONFIG")
    if external:
        if not CONTROLPLANE.exists():
            with _timed(steps, "waiting for the Go builds"):
                build()  # for its kubectl
        c = Cluster(kubeconfig=external, server=_server_of(external), dir=_dir_of(external))
        with _timed(steps, "installing the CRDs"):
            _install_crds(c)
        yield c
        return

    with _timed(steps, "waiting for the Go builds"):
        build()  # cached and locked: waits for the test command's background build
    start = time.monotonic()
    directory = tmp_path_factory.mktemp("controlplane")
    with (directory / "controlplane.log").open("ab") as log:
        proc = subprocess.Popen(
            # --exit-with: the cluster goes away even if this session is killed outright.
            [str(CONTROLPLANE), "up", "--dir", str(directory), "--exit-with", str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _run_checked(
            [
                str(CONTROLPLANE),
                "wait",
                "--quiet",
                "--dir",
                str(directory),
                "--pid",
                str(proc.pid),
                "--timeout",
                f"{_START_TIMEOUT}s",
            ],
            what=f"starting the control plane in {directory}",
            timeout=_START_TIMEOUT + 10,
        )
        steps["starting the control plane"] = time.monotonic() - start
        info = json.loads((directory / "cluster.json").read_text())
        c = Cluster(kubeconfig=info["kubeconfig"], server=info["server"], dir=directory)
        with _timed(steps, "installing the CRDs"):
            _install_crds(c)
        yield c
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _timed(steps: dict[str, float], name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        steps[name] = steps.get(name, 0.0) + time.monotonic() - start


@pytest.fixture
async def api_client(cluster: Cluster) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ``ApiClient`` authenticated as the cluster's admin."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=cluster.kubeconfig, client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        yield api


_NOT_DNS = re.compile(r"[^a-z0-9-]+")


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace named after the test; deleted (without waiting) afterwards.

    Yielded only once its ``default`` ServiceAccount exists: the controller manager
    creates it a moment after the namespace, and until then the ServiceAccount
    admission plugin rejects every pod created there.
    """
    slug = _NOT_DNS.sub("-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{secrets.token_hex(3)}"
    cluster.kubectl("create", "namespace", name)
    deadline = time.monotonic() + 30
    while not cluster.kubectl(
        "get", "serviceaccount", "default", "-n", name, "--ignore-not-found", "-o", "name"
    ).strip():
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"namespace {name}: no default ServiceAccount after 30s")
        time.sleep(0.05)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the cluster (directly or through another fixture), and
    run those after the pure tests: scripts/test.sh builds the control plane in the
    background meanwhile (a cold Go build takes minutes), and the first cluster test's
    fixture waits for that build on its lock. The sort is stable, so each group keeps
    the order pytest collected it in (see :func:`_phase` for the groups)."""
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)
    items.sort(key=_phase)


def _phase(item: pytest.Item) -> int:
    """0: pure tests; 1: the pure chart tests, which need helm (a Go build that
    scripts/test.sh starts first in the background: run last of the pure tests, they find
    it built instead of holding every pure test up while it builds — 197 s cold in a CI
    run); 2: the takeover e2e, the longest cluster test by far (three minutes): it starts
    first, so that the cluster tests' two workers (scripts/test.sh) finish together
    instead of one running it alone at the end — on a cold run its worker waits for the
    real Karpenter's build, the last of scripts/test.sh's background builds, while the
    other worker runs on; 3: the AWS provider's cluster tests, which share the session's
    moto account with its pure tests (tests/providers/aws/conftest.py) and must see it
    before any other test resets moto; 4: every other cluster test (some reset moto's
    state)."""
    if item.get_closest_marker("cluster") is None:
        return 1 if item.nodeid.startswith("tests/charts/") else 0
    if item.nodeid.startswith("tests/e2e/test_takeover.py"):
        return 2
    return 3 if "providers/aws/" in item.nodeid else 4
