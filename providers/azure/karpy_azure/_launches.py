"""Launches in flight: the NIC, VM and extension operations of one NodeClaim, run as one
task the provider owns rather than inside the reconcile that asked for them.

Why: creating an Azure VM is a chain of long-running operations (NIC, VM, then the Custom
Script Extension and the billing extension), minutes in ``customscript`` mode — longer
than one reconcile may take. Karpenter's Azure provider returns as soon as ARM accepted
the VM's PUT and polls the rest in a goroutine (its ``VirtualMachinePromise``); karpy
does the same with an :class:`asyncio.Task` per VM name:

- ``create`` starts the task (or finds the one already running for that name) and waits
  for it at most the ``launchWait`` setting, and in any case until ARM accepted the VM's
  PUT (the NIC and that answer are seconds; Karpenter-Azure waits for them too).
  Finished in time: its result or error is ``create``'s, so capacity errors reach the
  core as they happen. Not finished: the NodeClaim is returned as launched and the task
  goes on alone (*handed over*). A reconcile cancelled meanwhile (its timeout, a lost
  lease) never cancels the task: the next reconcile's ``create`` waits on the same one,
  and nothing is created twice.
- A handed-over launch that then fails has already cleaned up its VM and NIC; the
  launcher deletes its NodeClaim so the pods are planned again (as Karpenter-Azure's
  ``waitOnPromise`` does).

The registry only holds tasks; what they do is the launcher's
(:mod:`karpy_azure._vmlaunch`, which owns the registry). It cancels them all on
:meth:`Launches.aclose`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from karpy.apis import NodeClaim
from karpy.cloudprovider import CreateError

__all__ = ["Launch", "Launches"]

log = logging.getLogger("karpy.cloudprovider.azure")


@dataclass
class Launch:
    """One NodeClaim's launch: what ``create`` returns once it is under way, and the task
    running its operations."""

    name: str
    nodeclaim_name: str
    nodeclaim_uid: str
    #: the NodeClaim as launched (provider ID, labels, capacity), known before the VM is
    launched: NodeClaim
    #: set once ARM accepted the VM's PUT (the VM exists; its LRO may still run)
    accepted: asyncio.Event = field(default_factory=asyncio.Event)
    #: True once ``create`` returned ``launched`` before the task finished
    handed_over: bool = False
    task: asyncio.Task[None] | None = None


class Launches:
    """The provider's launches in flight, by VM name (see the module docstring).

    ``on_failure`` is called (as a task of the registry) for a handed-over launch that
    failed, with the launch and its error.
    """

    def __init__(
        self, on_failure: Callable[[Launch, BaseException], Coroutine[Any, Any, None]]
    ) -> None:
        self._launches: dict[str, Launch] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._on_failure = on_failure

    def get(self, name: str) -> Launch | None:
        """The launch of VM ``name``, running or finished and not yet collected."""
        return self._launches.get(name)

    def start(self, launch: Launch, work: Coroutine[Any, Any, None]) -> Launch:
        """Run ``work`` as ``launch``'s task."""
        task = asyncio.create_task(work, name=f"azure-launch:{launch.name}")
        launch.task = task
        self._launches[launch.name] = launch
        task.add_done_callback(lambda t: self._done(launch, t))
        return launch

    async def wait(self, launch: Launch, seconds: float, *, accepted: bool = False) -> bool:
        """Wait up to ``seconds`` for ``launch`` to finish; True if it did. With
        ``accepted``, wait on past ``seconds`` until ARM accepted the VM's PUT (or the
        launch ended): Karpenter-Azure waits for the NIC and that answer too. Cancelling
        the caller never cancels the launch's task."""
        task = launch.task
        assert task is not None
        await asyncio.wait({task}, timeout=seconds)
        if task.done() or not accepted or launch.accepted.is_set():
            return task.done()
        flag = asyncio.create_task(launch.accepted.wait(), name=f"azure-accepted:{launch.name}")
        try:
            await asyncio.wait({task, flag}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            flag.cancel()
        return task.done()

    def collect(self, launch: Launch) -> None:
        """Forget a finished launch; raise its error, if it failed."""
        assert launch.task is not None and launch.task.done()
        if self._launches.get(launch.name) is launch:
            del self._launches[launch.name]
        if launch.task.cancelled():
            # not CancelledError: the caller was not cancelled, its launch was
            raise CreateError(f"the launch of virtual machine {launch.name} was stopped",
                              reason="LaunchCancelled")
        error = launch.task.exception()
        if error is not None:
            raise error

    def hand_over(self, launch: Launch) -> None:
        """``create`` returned before ``launch`` finished: from now on the launch's end is
        handled here (its failure reported to ``on_failure``)."""
        launch.handed_over = True

    def cancel(self, name: str) -> None:
        """Stop the launch of VM ``name`` (its NodeClaim is being deleted)."""
        launch = self._launches.pop(name, None)
        if launch is not None and launch.task is not None:
            launch.handed_over = False  # deleting: nothing left to report
            launch.task.cancel()

    def _done(self, launch: Launch, task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()  # retrieved: no GC warning
        if not launch.handed_over:
            return  # a create() collects it
        if self._launches.get(launch.name) is launch:
            del self._launches[launch.name]
        if error is None:
            return
        follow_up = asyncio.create_task(
            self._on_failure(launch, error), name=f"azure-launch-failed:{launch.name}"
        )
        self._background.add(follow_up)
        follow_up.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Cancel every launch and follow-up and wait for them to end."""
        tasks = [launch.task for launch in self._launches.values() if launch.task is not None]
        tasks += list(self._background)
        self._launches.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
