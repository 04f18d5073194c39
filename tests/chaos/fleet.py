"""Several ``karpy run`` processes against one cluster, killed and restarted at will.

A :class:`Fleet` starts replicas (tests/e2e/harness.py's ``karpy_process``, leader
election on, the Lease in the test's own namespace so scenarios never wait on each
other's leases), kills one with SIGKILL as a crash would, and reads the JSON log lines
of every replica that ever ran, so a scenario can count what each did and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import RunningKarpy, karpy_process

__all__ = ["ACQUIRED", "CREATED", "Fleet", "log_time"]

ACQUIRED = "successfully acquired lease"
CREATED = "created nodeclaim"


def log_time(record: Mapping[str, Any]) -> datetime:
    """When a JSON log line was written."""
    return datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00"))


class Fleet:
    """karpy replicas of one scenario (see the module docstring). Use ``async with``."""

    def __init__(
        self,
        cluster: Any,
        *,
        lease_namespace: str,
        provider_settings: Mapping[str, str] | None = None,
        args: tuple[str, ...] = (),
        kubeconfig: str | None = None,
        cloud_provider: str = "kwok",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._cluster = cluster
        self._kubeconfig = kubeconfig  # None: the cluster's admin
        self._env = {"SYSTEM_NAMESPACE": lease_namespace, **(env or {})}
        self._args = ["--cloud-provider", cloud_provider, *args]
        for key, value in (provider_settings or {}).items():
            self._args += ["--provider-setting", f"{key}={value}"]
        self.replicas: list[RunningKarpy] = []
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Fleet:
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.__aexit__(*exc)  # type: ignore[arg-type]
        if exc[0] is not None:
            self._report()

    def _report(self) -> None:
        """A failed scenario shows every replica's last log lines; with
        ``KARPY_E2E_LOG_DIR`` set, each replica's whole log is written there too."""
        where = os.environ.get("KARPY_E2E_LOG_DIR")
        for i, replica in enumerate(self.replicas):
            print(f"\n--- replica {i} (pid {replica.pid}), last lines:\n{replica.tail(40)}")
            if where:
                path = Path(where) / f"replica-{replica.pid}.log"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("\n".join(replica.lines) + "\n")
                print(f"--- whole log: {path}")

    async def start(self) -> RunningKarpy:
        """Start one more replica; returns once its caches synced."""
        running = await self._stack.enter_async_context(
            karpy_process(self._cluster, *self._args, env=self._env, leader_election=True,
                          kubeconfig=self._kubeconfig)
        )
        self.replicas.append(running)
        return running

    @property
    def alive(self) -> list[RunningKarpy]:
        """The replicas still running."""
        return [r for r in self.replicas if r.returncode is None]

    async def kill(self, replica: RunningKarpy) -> None:
        """SIGKILL ``replica`` (a crash: no lease released, nothing flushed)."""
        assert replica.pid is not None and replica.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(replica.pid, signal.SIGKILL)
        await replica.process.wait()

    async def leader(self, *, timeout: float = 60.0) -> RunningKarpy:  # noqa: ASYNC109
        """The live replica that holds the lease (waits for one to acquire it)."""
        async with asyncio.timeout(timeout):
            while True:
                for replica in self.alive:
                    if replica.messages(ACQUIRED):
                        return replica
                await asyncio.sleep(0.1)

    def messages(self, message: str) -> list[dict[str, Any]]:
        """``message`` log lines of every replica that ran, in time order."""
        return sorted((r for k in self.replicas for r in k.messages(message)), key=log_time)

    def count(self, message: str, **fields: str) -> int:
        """How many ``message`` lines, across replicas, have these field values."""
        return sum(all(r.get(k) == v for k, v in fields.items())
                   for r in self.messages(message))
