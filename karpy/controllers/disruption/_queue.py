"""The orchestration queue: executes disruption commands without losing a pod.

Starting a command (Karpenter's StartCommand):

1. log "disrupting node(s)"; taint every candidate's Node ``karpenter.sh/disrupted:
   NoSchedule`` and set its NodeClaim's ``DisruptionReason`` condition;
2. mark the candidates for deletion in the cluster model, so no provisioning round
   counts on their capacity (before any replacement exists, in Karpenter's order);
3. create the replacement NodeClaims through the provisioner (the one owner of
   NodeClaim creation), nominating the candidates' pods to them and to the existing
   nodes the simulation placed them on.

Then, every second (``disruption.queue``), each command is looked at: while a
replacement is not Initialized it waits (DisruptionLaunching /
DisruptionWaitingReadiness events); once all are, the candidates' NodeClaims are
deleted (DisruptionTerminating) and termination drains them. If a replacement is
deleted or the command outlives its timeout, it is rolled back: taint and condition
removed, candidates unmarked. Nothing is deleted before its pods have somewhere to go.

The queue lives in memory. If karpy dies mid-command, the disruption controller's
next pass (in the new leader) removes the taint and condition from every Node that is
not part of a command and not being deleted: the candidates stay, their pods never
moved, and the replacements (now empty) are consolidated away like any empty node.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from karpy.apis.annotations import ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
from karpy.apis.conditions import condition_is_true
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL
from karpy.apis.pretty import to_snake_case
from karpy.apis.v1 import CONDITION_INITIALIZED
from karpy.controllers.disrupted import disrupted_labels, grace_period_of, termination_mode
from karpy.controllers.disruption._command import Command
from karpy.controllers.disruption._events import DisruptionEvents
from karpy.controllers.disruption._marks import set_disrupted_taint, set_disruption_reason
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.settings import Settings
from karpy.runtime import Client, Clock, Kind, Result, errors, format_time, parse_time
from karpy.runtime.kinds import NODE
from karpy.state import NODE_CLAIM, Cluster

__all__ = ["OrchestrationQueue"]

log = logging.getLogger("controller")

_POLL = 1.0
_RETRY_SCALE = 0.08  # Karpenter: 80 ms more patience per command in flight
_MAX_RETRY = 3600.0


class CommandFailedError(Exception):
    """A command cannot complete and must be rolled back."""


class OrchestrationQueue:
    """Executes disruption commands (see the module docstring)."""

    name = "disruption.queue"

    def __init__(
        self,
        *,
        client: Client,
        cluster: Cluster,
        provisioner: Provisioner,
        events: DisruptionEvents,
        clock: Clock,
        settings: Settings,
        metrics: KarpenterMetrics,
    ) -> None:
        self._client = client
        self._cluster = cluster
        self._provisioner = provisioner
        self._events = events
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self._commands: dict[str, Command] = {}
        """Provider ID of every candidate in flight -> its command."""

    # -- reading -------------------------------------------------------------------------

    def has(self, provider_id: str) -> bool:
        """Whether a candidate with this provider ID is part of a running command."""
        return provider_id in self._commands

    def commands(self) -> list[Command]:
        """The running commands, oldest first."""
        return sorted({id(c): c for c in self._commands.values()}.values(),
                      key=lambda c: c.created)

    def empty(self) -> bool:
        """No command is running."""
        return not self._commands

    # -- starting ------------------------------------------------------------------------

    async def start(self, command: Command) -> None:
        """Mark the candidates, create the replacements, take the command in.

        Raises on a failed write after undoing what it did (nothing is left marked).
        """
        if any(self.has(c.provider_id) for c in command.candidates):
            raise CommandFailedError("candidate is being disrupted")
        log.info("disrupting node(s)", extra=command.log_values())
        command.created = self._clock.monotonic()
        provider_ids = [c.provider_id for c in command.candidates]
        try:
            await self._mark(command)
            # Pending disruption in the model before a replacement exists (Karpenter's
            # order): a static NodePool's controllers must never see the replacement
            # beside an unmarked candidate and take it for one node too many.
            self._cluster.mark_for_deletion(*provider_ids)
            await self._create_replacements(command)
        except Exception:
            self._cluster.unmark_for_deletion(*provider_ids)
            await self._unmark(command)
            raise
        if command.results is not None:
            ttl = self._settings.pod_nomination_ttl
            for placement in command.results.existing_nodes:
                if placement.pods:
                    self._cluster.nominate(placement.pods, placement.node, ttl=ttl)
        for c in command.candidates:
            self._commands[c.provider_id] = command
        labels = {"decision": str(command.decision), "reason": command.reason.lower(),
                  "consolidation_type": command.consolidation_type}
        self._metrics.disruption_decisions.add(1, labels)
        for pool in command.nodepools:
            self._metrics.disruption_decisions_by_nodepool.add(1, {**labels, "nodepool": pool})

    async def _mark(self, command: Command) -> None:
        now = self._clock.now()
        for c in command.candidates:
            if c.node is not None:
                await set_disrupted_taint(self._client, c.node, True)
            await set_disruption_reason(self._client, c.nodeclaim, command.reason, now)

    async def _unmark(self, command: Command) -> None:
        """Take the marks off every candidate (best effort; a conflict is retried with
        fresh copies, and what still fails is cleared by the controller's next pass)."""
        now = self._clock.now()
        for c in command.candidates:
            node: Mapping[str, Any] | None = c.node
            claim: Mapping[str, Any] | None = c.nodeclaim
            for attempt in range(3):
                try:
                    if node is not None and not node["metadata"].get("deletionTimestamp"):
                        await set_disrupted_taint(self._client, node, False)
                    if claim is not None and not claim["metadata"].get("deletionTimestamp"):
                        await set_disruption_reason(self._client, claim, None, now)
                    break
                except errors.Conflict:
                    if attempt == 2:
                        log.info("could not unmark candidate, left for the next pass",
                                 extra={"Node": {"name": c.name}})
                        break
                    node = await self._get(NODE, c.state.node_name)
                    claim = await self._get(NODE_CLAIM, c.state.nodeclaim_name)

    async def _get(self, kind: Kind, name: str) -> Mapping[str, Any] | None:
        if not name:
            return None
        try:
            return await self._client.get(kind, name)
        except errors.NotFound:
            return None

    async def _create_replacements(self, command: Command) -> None:
        reason = command.reason.lower()
        for plan in command.replacements:
            name = await self._provisioner.create(plan, reason=reason)
            if name is None:
                raise CommandFailedError(
                    f"replacement nodeclaim for nodepool {plan.nodepool} could not be created"
                )
            command.replacement_names.append(name)

    # -- executing -----------------------------------------------------------------------

    async def reconcile(self) -> Result:
        """Advance every running command."""
        for command in self.commands():
            try:
                done = await self._advance(command)
            except CommandFailedError as exc:
                await self._fail(command, str(exc))
                continue
            if done:
                self._complete(command, succeeded=True)
        return Result(requeue_after=_POLL)

    def _timeout(self) -> float:
        scaled = _RETRY_SCALE * len(self.commands())
        return max(self._settings.disruption_replacement_timeout, min(scaled, _MAX_RETRY))

    async def _advance(self, command: Command) -> bool:
        waiting = []
        for name in command.replacement_names:
            if name in command.initialized:
                continue
            try:
                claim = await self._client.get(NODE_CLAIM, name)
            except errors.NotFound:
                if not self._cluster.nodeclaim_exists(name):
                    raise CommandFailedError(
                        f"replacement was deleted (NodeClaim={name})"
                    ) from None
                waiting.append(name)
                continue
            if claim["metadata"].get("deletionTimestamp"):
                raise CommandFailedError(f"replacement is being deleted (NodeClaim={name})")
            self._events.launching(claim, command.reason)
            if not condition_is_true(claim, CONDITION_INITIALIZED):
                self._events.waiting_readiness(claim)
                waiting.append(name)
                continue
            command.initialized.add(name)
        if waiting:
            if self._clock.monotonic() - command.created > self._timeout():
                raise CommandFailedError(
                    "command reached timeout waiting for replacement initialization "
                    f"(NodeClaims={', '.join(waiting)})"
                )
            return False
        await self._delete_candidates(command)
        return True

    async def _delete_candidates(self, command: Command) -> None:
        for c in command.candidates:
            name = c.state.nodeclaim_name
            try:
                bound = command.drain_bounds.get(name)
                if bound is not None:
                    await self._tighten_termination_timestamp(name, bound)
                await self._client.delete(NODE_CLAIM, name)
            except errors.NotFound:
                continue
            self._events.terminating(c.node, c.nodeclaim, command.reason)
            claim_labels = c.nodeclaim["metadata"].get("labels") or {}
            model = c.pool.entry.model
            # Drift and repair pass through this queue too: only consolidation has a policy.
            policy = (model.spec.disruption.consolidation_policy
                      if command.consolidation_type and model is not None else "")
            grace_period = grace_period_of(c.nodeclaim)
            labels = disrupted_labels(
                command.reason.lower(),
                {LABEL_NODEPOOL: str(claim_labels.get(LABEL_NODEPOOL, c.nodepool)),
                 LABEL_CAPACITY_TYPE: c.state.labels.get(LABEL_CAPACITY_TYPE, "")},
                grace_period, consolidation_policy=policy)
            self._metrics.nodeclaims_disrupted.add(1, labels)
            self._metrics.pods_disruption_initiated.add(len(c.pods), labels)
            condition = command.repaired_conditions.get(name)
            if condition is not None:
                # The drain bound repair applied, when it set one, not the NodeClaim's own.
                self._metrics.nodeclaims_unhealthy_disrupted.add(1, {
                    "condition": to_snake_case(condition), "nodepool": labels["nodepool"],
                    "capacity_type": labels["capacity_type"],
                    "image_id": str((c.nodeclaim.get("status") or {}).get("imageID") or ""),
                    "termination_mode": termination_mode(
                        grace_period if bound is None else bound),
                })  # fmt: skip

    async def _tighten_termination_timestamp(self, name: str, bound: timedelta) -> None:
        """Stamp the termination deadline now + ``bound`` right before deletion, so
        the time replacements took to launch does not eat into the drain window; an
        earlier deadline already there is kept (Karpenter v1.15.0 queue.go)."""
        nodeclaim = await self._client.get(NODE_CLAIM, name)
        annotations = (nodeclaim.get("metadata") or {}).get("annotations") or {}
        deadline = self._clock.now() + bound
        try:
            current = parse_time(annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP))
        except ValueError:
            current = None  # unreadable: write a good one
        if current is not None and current <= deadline:
            return
        await self._client.patch(NODE_CLAIM, name, {"metadata": {"annotations": {
            ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: format_time(deadline)}}})  # fmt: skip

    async def _fail(self, command: Command, why: str) -> None:
        failed = [n for n in command.replacement_names if n not in command.initialized]
        self._metrics.disruption_queue_failures.add(
            max(len(failed), 1),
            {"decision": str(command.decision), "reason": command.reason.lower(),
             "consolidation_type": command.consolidation_type},
        )
        await self._unmark(command)
        log.error(
            "failed terminating nodes while executing a disruption command",
            extra={**command.log_values(), "error": why},
        )
        self._complete(command, succeeded=False)

    def _complete(self, command: Command, *, succeeded: bool) -> None:
        if not succeeded:
            self._cluster.unmark_for_deletion(*(c.provider_id for c in command.candidates))
        else:
            log.debug("command succeeded", extra={"command": str(command)})
        for c in command.candidates:
            if self._commands.get(c.provider_id) is command:
                del self._commands[c.provider_id]
