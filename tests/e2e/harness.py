"""Runs karpy against the local control plane for end-to-end tests.

Two ways, one interface (:class:`RunningKarpy`):

- :func:`karpy_operator` builds the :class:`~karpy.operator.Operator` in this process and
  runs it as a task on the test's event loop; settings are passed as values, so tests can
  shorten timeouts or inject provider faults.
- :func:`karpy_process` runs ``karpy run`` as a subprocess, exactly as a user would, and
  can report the process's peak resident memory (``VmHWM``).

Both collect the JSON log lines karpy writes, so a test can wait for Karpenter's
lifecycle messages and assert their fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from karpy.controllers.settings import Settings
from karpy.operator import Operator
from karpy.options import Options
from karpy.runtime import Client
from karpy.runtime.telemetry import JsonFormatter

__all__ = ["RunningKarpy", "in_cluster_env", "karpy_operator", "karpy_process", "pump_logs",
           "stop_process"]

LogRecord = dict[str, Any]


class _ClusterLike(Protocol):
    kubeconfig: str


class RunningKarpy:
    """A running karpy: its log records so far and a way to wait for one."""

    def __init__(self) -> None:
        self.logs: list[LogRecord] = []
        self.lines: list[str] = []
        """Every stderr line of a :func:`karpy_process`, JSON or not."""
        self._changed = asyncio.Event()
        self.pid: int | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.operator: Operator | None = None

    @property
    def returncode(self) -> int | None:
        """The subprocess's exit status once it has exited (None while it runs)."""
        return self.process.returncode if self.process is not None else None

    def tail(self, n: int = 30) -> str:
        """The last ``n`` stderr lines of a :func:`karpy_process`, for failure messages."""
        return "\n".join(self.lines[-n:])

    @property
    def client(self) -> Client:
        """The operator's client (reads of watched kinds from its cache), in-process only."""
        if self.operator is None:
            raise RuntimeError("the client is reachable only with karpy_operator")
        return self.operator.manager.client

    def _add(self, record: LogRecord) -> None:
        self.logs.append(record)
        self._changed.set()

    def messages(self, message: str) -> list[LogRecord]:
        """Every record whose ``message`` is exactly ``message``."""
        return [r for r in self.logs if r.get("message") == message]

    async def wait_for_log(
        self,
        message: str,
        *,
        where: Callable[[LogRecord], bool] | None = None,
        count: int = 1,
        timeout: float = 60.0,  # noqa: ASYNC109 - the one knob a test wants here
    ) -> list[LogRecord]:
        """Wait until ``count`` records with ``message`` (matching ``where``) were logged."""

        def found() -> list[LogRecord]:
            return [r for r in self.messages(message) if where is None or where(r)]

        try:
            async with asyncio.timeout(timeout):
                while len(hits := found()) < count:
                    if self.returncode is not None:
                        raise AssertionError(
                            f"karpy exited ({self.returncode}) before logging {message!r}:\n"
                            f"{self.tail()}"
                        )
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"karpy did not log {message!r} {count} time(s) within {timeout:g}s:\n"
                f"{self.tail()}"
            ) from None
        return hits

    def peak_rss_bytes(self) -> int:
        """The subprocess's peak resident set size (VmHWM), for :func:`karpy_process`."""
        if self.pid is None:
            raise RuntimeError("peak RSS is known only for karpy_process")
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM in /proc status")


class _Collector(logging.Handler):
    def __init__(self, running: RunningKarpy) -> None:
        super().__init__(level=logging.INFO)
        self._running = running
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._running._add(json.loads(self.format(record)))
        except Exception:  # a log line must never break the code that logged it
            self.handleError(record)


@contextlib.asynccontextmanager
async def karpy_operator(
    cluster: _ClusterLike,
    *,
    settings: Settings | None = None,
    provider_settings: Mapping[str, str] | None = None,
    cloud_provider: str = "kwok",
) -> AsyncIterator[RunningKarpy]:
    """Run karpy in-process against ``cluster`` until the block exits."""
    running = RunningKarpy()
    handler = _Collector(running)
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    operator = Operator(
        Options(
            cloud_provider=cloud_provider,
            provider_settings=dict(provider_settings or {}),
            kubeconfig=cluster.kubeconfig,
            settings=settings or Settings(),
            leader_elect=False,
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="127.0.0.1:0",
            graceful_shutdown_timeout=10.0,
        )
    )
    running.operator = operator
    try:
        await operator.start()
        task = asyncio.create_task(operator.run(), name="e2e:karpy-operator")
        try:
            await _wait_ready(operator, task)
            yield running
        finally:
            operator.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=30.0)
    finally:
        await operator.close()
        root.removeHandler(handler)
        root.setLevel(previous_level)


async def _wait_ready(operator: Operator, task: asyncio.Task[None]) -> None:
    """Return once the manager's caches have synced (its /readyz would answer 200)."""
    manager = operator.manager
    async with asyncio.timeout(60.0):
        while not manager.cache.synced:
            if task.done():
                task.result()  # raises what made the operator stop
                raise RuntimeError("karpy stopped before its caches synced")
            await asyncio.sleep(0.05)


def in_cluster_env(*, server: str, token: str, ca_pem: str, namespace: str,
                   directory: Path) -> dict[str, str]:
    """What a pod gives karpy for in-cluster configuration, for a process on this
    machine: ``token``, ``ca.crt`` and ``namespace`` written to ``directory`` laid out like
    /var/run/secrets/kubernetes.io/serviceaccount, ``KUBERNETES_SERVICE_HOST``/``PORT``
    pointing at ``server``, ``KARPY_SERVICE_ACCOUNT_DIR`` at ``directory`` (the one thing
    a pod would not set), and a HOME without ~/.kube/config to fall back on."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("token", token), ("ca.crt", ca_pem), ("namespace", namespace)):
        (directory / name).write_text(text)
        (directory / name).chmod(0o600)
    url = urlsplit(server)
    home = directory / "home"
    home.mkdir(exist_ok=True)
    return {
        "KUBERNETES_SERVICE_HOST": url.hostname or "",
        "KUBERNETES_SERVICE_PORT": str(url.port or 443),
        "KARPY_SERVICE_ACCOUNT_DIR": str(directory),  # karpy.runtime.KubeClient.in_cluster
        "HOME": str(home),
    }


async def stop_process(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM, as a pod's stop does, then SIGKILL after 30 s."""
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), timeout=30.0)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def pump_logs(running: RunningKarpy, stream: asyncio.StreamReader) -> None:
    """Feed karpy's log lines from ``stream`` (its stderr, or a container's output) into
    ``running`` until EOF; JSON lines become records, others ``{"message": line}``."""
    async for raw in stream:
        line = raw.decode(errors="replace").rstrip()
        running.lines.append(line)
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        running._add(record if isinstance(record, dict) else {"message": line, "raw": True})
    running._changed.set()  # EOF: karpy exited; wake waiters so they can say so


@contextlib.asynccontextmanager
async def karpy_process(
    cluster: _ClusterLike,
    *args: str,
    env: Mapping[str, str] | None = None,
    kubeconfig: str | None = None,
    leader_election: bool = False,
    service_account: Mapping[str, str] | None = None,
) -> AsyncIterator[RunningKarpy]:
    """Run ``karpy run --kubeconfig ... <args>`` as a subprocess until the block exits.

    ``kubeconfig`` overrides the cluster's admin kubeconfig (e.g. a ServiceAccount's);
    ``leader_election`` keeps karpy's Lease election on, as in a real deployment;
    ``service_account`` (the environment :func:`in_cluster_env` makes) runs it with no
    kubeconfig at all, configured in-cluster as in a pod.
    """
    running = RunningKarpy()
    flags = ["--metrics-port", "0", "--health-probe-port", "0"]
    if not leader_election:
        flags.append("--disable-leader-election")
    base = {k: v for k, v in os.environ.items() if k != "DISABLE_LEADER_ELECTION"}
    if service_account is None:
        where = ["--kubeconfig", kubeconfig or cluster.kubeconfig]
    else:
        where = []
        base = {k: v for k, v in base.items() if k != "KUBECONFIG"} | dict(service_account)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "karpy.cli", "run", *where, *flags, *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**base, **(env or {})},
    )
    running.pid = proc.pid
    running.process = proc
    assert proc.stderr is not None

    reader = asyncio.create_task(pump_logs(running, proc.stderr), name="e2e:karpy-logs")
    try:
        await running.wait_for_log("caches synced", timeout=60.0)
        yield running
    finally:
        await stop_process(proc)
        await reader
