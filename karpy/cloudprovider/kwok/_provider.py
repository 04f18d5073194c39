"""KwokCloudProvider: launching a machine is creating the Node object kwok then runs.

The Node *is* the instance: ``create`` writes it (kwok annotation, labels, capacity,
allocatable, the NodeClaim's taints plus ``karpenter.sh/unregistered:NoExecute`` and
any ``registrationTaints`` the options add, providerID ``kwok://<name>``),
``get``/``list`` read Nodes back, ``delete`` deletes it.

As in Karpenter's kwok provider, ``delete`` reports NodeClaimNotFoundError as soon as the
Node is marked for deletion: the Node carries karpy's termination finalizer, which the
termination controller only removes once ``delete`` says the instance is gone, so
waiting for the Node object itself to disappear would never end.

Launches with a registration delay, and launches that never register, have no Node
yet: they are kept as instance records in the cluster (``_records``), so they outlive
the karpy process that launched them, as a real cloud's instances do. The process that
launched one writes its Node when the delay ends; if that process dies, the boot loop
that :meth:`KwokCloudProvider.register_controllers` adds to every replica does it.
``get``/``list``/``delete`` see them too.

Cloud faults (``KwokOptions.fault_rates``) are drawn per call: ``create`` failing before
it launches (a 5xx-like CreateError or a dropped connection), ``create`` answering
slowly after it launched, ``delete`` failing transiently, ``get`` answering a stale
"not found". Each is logged as "kwok: injected fault" with the fault's name.

Capacity reservations (``reserved`` offerings of the catalogue) are counted here as a
cloud counts them: an offering's ``reservation_capacity`` is its catalogue count minus
the instances running in the reservation (Nodes and records labelled with its
``karpenter.kwok.sh/reservation-id``), and a full reservation's offerings are
unavailable. Launches are serialised while a catalogue has reservations, so two
concurrent launches cannot both take a reservation's last slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from karpy.apis import NodeClaim, NodePool
from karpy.apis.duration import parse_duration
from karpy.apis.labels import (
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    nodeclass_label_key,
)
from karpy.apis.taints import UNREGISTERED_NO_EXECUTE_TAINT
from karpy.cloudprovider._launch import (
    LaunchChoice,
    choose_launch,
    launched_nodeclaim,
    nodeclaim_requests,
)
from karpy.cloudprovider._launch import launched_labels as resolve_labels
from karpy.cloudprovider._nodeclass import node_class_readiness
from karpy.cloudprovider._registry import ProviderContext
from karpy.cloudprovider._types import DriftReason, RepairPolicy
from karpy.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.kwok._catalogue import (
    generate_catalogue,
    load_catalogue,
    to_instance_types,
)
from karpy.cloudprovider.kwok._options import (
    FAULT_CREATE_ERROR,
    FAULT_CREATE_SLOW,
    FAULT_DELETE_ERROR,
    FAULT_GET_NOT_FOUND,
    KwokFaults,
    KwokOptions,
)
from karpy.cloudprovider.kwok._records import InstanceRecord, InstanceRecords
from karpy.cloudprovider.kwok._wellknown import (
    KWOK_NODE_CLASS,
    KWOK_NODE_KEY,
    KWOK_NODE_VALUE,
    LABEL_INSTANCE_PRICE,
    LABEL_RESERVATION_ID,
    PROVIDER_ID_PREFIX,
)
from karpy.runtime import Client, Kind, Manager
from karpy.runtime import errors as api_errors
from karpy.runtime.kinds import NODE
from karpy.scheduling import InstanceType
from karpy.scheduling import resources as res

__all__ = ["BOOT_PERIOD", "KwokCloudProvider"]

log = logging.getLogger("karpy.cloudprovider.kwok")

_NODECLASS_LABEL = nodeclass_label_key(KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind)


BOOT_PERIOD = 1.0
"""Seconds between the boot loop's looks at the instance records."""


def _node_name(provider_id: str) -> str:
    return provider_id.removeprefix(PROVIDER_ID_PREFIX)


class KwokCloudProvider:
    """The CloudProvider for kwok-run fake nodes (see the module docstring).

    Build it with a :class:`karpy.runtime.Client` and :class:`KwokOptions`, or from the
    operator through :meth:`from_context` (the ``kwok`` entry point). ``faults`` can be
    changed while it runs to inject insufficient capacity or unregistered launches.
    """

    def __init__(
        self,
        client: Client,
        *,
        options: KwokOptions | None = None,
        instance_types: Sequence[InstanceType] | None = None,
    ) -> None:
        self._client = client
        self.options = options or KwokOptions()
        if instance_types is None:
            path = self.options.instance_types_file
            specs = load_catalogue(path) if path is not None else generate_catalogue()
            instance_types = to_instance_types(specs)
        if self.options.volume_attachment_limits:
            instance_types = [
                replace(it, volume_attachment_limits={
                    **it.volume_attachment_limits, **self.options.volume_attachment_limits})
                for it in instance_types
            ]
        self._instance_types = tuple(instance_types)
        self._reserved = tuple(
            i
            for i, it in enumerate(self._instance_types)
            if any(o.reserved for o in it.offerings)
        )
        self._launch_lock = asyncio.Lock()
        # Reserved launches of this process, until the Node cache shows them.
        self._in_reservation: dict[str, str] = {}
        self.faults = KwokFaults(
            insufficient_capacity=set(self.options.insufficient_capacity),
            unregistered_launches=self.options.unregistered_launches,
            rates=dict(self.options.fault_rates),
            rng=random.Random(self.options.fault_seed),
        )
        self._records = InstanceRecords(client)
        # Instances this process launched without a Node yet (delayed) or ever
        # (unregistered); their records in the cluster are what survives a restart.
        self._pending: dict[str, NodeClaim] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    @classmethod
    def from_context(cls, context: ProviderContext) -> KwokCloudProvider:
        """The ``karpy.cloudproviders`` factory: options from ``context.settings``."""
        return cls(context.client, options=KwokOptions.from_settings(context.settings))

    @property
    def name(self) -> str:
        """``"kwok"``."""
        return "kwok"

    # -- launching ---------------------------------------------------------------------

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Choose the cheapest fitting offering and create its Node (see module doc)."""
        if self._closed:
            raise CreateError("the kwok provider is closed", reason="ProviderClosed")
        node_class = await self._node_class(nodeclaim)
        if self.options.launch_delay > timedelta(0):
            await asyncio.sleep(self.options.launch_delay.total_seconds())
        if self.faults.roll(FAULT_CREATE_ERROR):
            _injected(FAULT_CREATE_ERROR, nodeclaim.metadata.name)
            if self.faults.rng.random() < 0.5:
                raise CreateError(
                    "kwok: injected fault: the cloud answered 503 Service Unavailable",
                    reason="ServiceUnavailable",
                )
            raise ConnectionResetError("kwok: injected fault: connection reset by the cloud")
        if not self._reserved:
            return await self._launch(nodeclaim, node_class, self._instance_types)
        async with self._launch_lock:
            provider_id = PROVIDER_ID_PREFIX + (nodeclaim.metadata.name or "")
            if provider_id in self._in_reservation:
                # a repeated create: its instance holds the slot it would now be refused
                return await self.get(provider_id)
            return await self._launch(nodeclaim, node_class, await self._current_types())

    async def _launch(
        self,
        nodeclaim: NodeClaim,
        node_class: Mapping[str, Any],
        instance_types: Sequence[InstanceType],
    ) -> NodeClaim:
        choice = choose_launch(
            nodeclaim, self._with_unreported(nodeclaim, instance_types),
            refuse=self.faults.refuses,
        )
        node = self._node_for(nodeclaim, choice)
        name = node["metadata"]["name"]
        provider_id = node["spec"]["providerID"]
        launched = launched_nodeclaim(
            nodeclaim, choice, provider_id=provider_id, labels=dict(node["metadata"]["labels"])
        )
        # Karpenter's kwok Create returns the Node's annotations (the claim's plus
        # kwok.x-k8s.io/node) and no NodeClass hash: its KWOKNodeClass is not hashed.
        launched.metadata.annotations = dict(node["metadata"]["annotations"])
        if choice.offering.reserved:
            self._in_reservation[provider_id] = choice.offering.reservation_id
        unregistered = self.faults.take_unregistered()
        delay = self.options.registration_delay + _registration_delay(node_class)
        try:
            if unregistered or delay > timedelta(0):
                register_at = None if unregistered else datetime.now(UTC) + delay
                # The record first: from here on the instance exists, whoever runs next.
                await self._records.create(InstanceRecord(node, register_at))
                self._pending[provider_id] = launched
                if unregistered:
                    log.info("kwok: %s launched but will never register", name)
                else:
                    self._tasks[provider_id] = asyncio.create_task(
                        self._register_later(provider_id, node, delay),
                        name=f"kwok-register-{name}",
                    )
            else:
                await self._client.create(NODE, node)
        except api_errors.AlreadyExists:
            # a repeated create for the same NodeClaim: the instance is the existing one
            return await self.get(provider_id)
        if self.faults.roll(FAULT_CREATE_SLOW):
            # Launched already: a karpy killed during this wait finds it on its retry.
            _injected(FAULT_CREATE_SLOW, name)
            await asyncio.sleep(self.options.create_slow_duration.total_seconds())
        return launched

    def _with_unreported(
        self, nodeclaim: NodeClaim, instance_types: Sequence[InstanceType]
    ) -> Sequence[InstanceType]:
        """``instance_types``, each type also offering the requested resources no type of
        the catalogue reports (extended resources a NodeOverlay's ``capacity`` adds), as
        Karpenter's kwok provider does: its nodes advertise what the NodeClaim requests,
        standing in for the device plugin a real node would run."""
        requests = nodeclaim_requests(nodeclaim)
        reported = self._reported_resources()
        extra = {name: amount for name, amount in requests.items() if name not in reported}
        if not extra:
            return instance_types
        return [
            replace(it, capacity={**it.capacity, **extra})
            for it in instance_types
        ]

    def _reported_resources(self) -> frozenset[str]:
        names: set[str] = set()
        for it in self._instance_types:
            names.update(it.capacity)
        return frozenset(names)

    async def _register_later(
        self, provider_id: str, node: Mapping[str, Any], delay: timedelta
    ) -> None:
        await asyncio.sleep(delay.total_seconds())
        backoff = 0.1
        while provider_id in self._pending:
            try:
                await self._boot(node)
                break
            except api_errors.ClientError as exc:
                log.warning("kwok: creating node %s failed, retrying: %s", provider_id, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        self._pending.pop(provider_id, None)
        self._tasks.pop(provider_id, None)

    async def _boot(self, node: Mapping[str, Any]) -> None:
        """The instance booted: write its Node, then drop its record (both idempotent,
        so a boot interrupted between the two is finished by the next attempt)."""
        with contextlib.suppress(api_errors.AlreadyExists):
            await self._client.create(NODE, node)
        await self._records.delete(node["metadata"]["name"])

    async def boot_due(self) -> int:
        """Boot every recorded instance whose registration time has passed and that no
        task of this process is booting (it was launched by a karpy that is gone).
        Returns how many were booted."""
        now = datetime.now(UTC)
        due = [
            r for r in await self._records.list()
            if r.register_at is not None and r.register_at <= now
            and r.provider_id not in self._tasks
        ]
        for record in due:
            await self._boot(record.node)
            self._pending.pop(record.provider_id, None)
        return len(due)

    def register_controllers(self, manager: Manager) -> None:
        """Run the boot loop (:meth:`boot_due` every second) on every replica: the
        cloud boots its instances whichever karpy leads, or whether one leads at all."""
        manager.add(_BootLoop(self), name="kwok.boot", needs_leader_election=False)

    async def _node_class(self, nodeclaim: NodeClaim) -> Mapping[str, Any]:
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != (KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind):
            raise CreateError(
                f"nodeclaim {nodeclaim.metadata.name} refers to {ref.kind}.{ref.group}; "
                f"the kwok provider serves {KWOK_NODE_CLASS}",
                reason="UnsupportedNodeClass",
            )
        try:
            found = await self._client.get(KWOK_NODE_CLASS, ref.name)
        except api_errors.NotFound as exc:
            raise NodeClassNotReadyError(
                f"{KWOK_NODE_CLASS.kind} {ref.name!r} not found (is the KWOKNodeClass CRD "
                "installed and the object created?)"
            ) from exc
        readiness = node_class_readiness(found)
        if not readiness.ready:
            raise NodeClassNotReadyError(
                f"{KWOK_NODE_CLASS.kind} {ref.name!r} is not ready: {readiness.reason}: "
                f"{readiness.message}"
            )
        return found

    def _node_for(self, nodeclaim: NodeClaim, choice: LaunchChoice) -> dict[str, Any]:
        name = nodeclaim.metadata.name
        if not name:
            raise CreateError("the nodeclaim has no name", reason="InvalidNodeClaim")
        labels = resolve_labels(nodeclaim, choice)
        labels[LABEL_HOSTNAME] = name
        labels[_NODECLASS_LABEL] = nodeclaim.spec.node_class_ref.name
        labels[KWOK_NODE_KEY] = KWOK_NODE_VALUE
        labels[LABEL_INSTANCE_PRICE] = f"{choice.offering.price:f}"
        spec = nodeclaim.spec
        taints = [
            t.to_dict()
            for t in [*spec.taints, *spec.startup_taints, UNREGISTERED_NO_EXECUTE_TAINT]
        ]
        taints += [t.to_dict() for t in self.options.registration_taints]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    **nodeclaim.metadata.annotations,
                    KWOK_NODE_KEY: KWOK_NODE_VALUE,
                },
            },
            "spec": {"providerID": PROVIDER_ID_PREFIX + name, "taints": taints},
            "status": {
                "capacity": res.format_resource_list(choice.instance_type.capacity),
                "allocatable": res.format_resource_list(choice.instance_type.allocatable),
            },
        }

    # -- reading back ------------------------------------------------------------------

    async def get(self, provider_id: str) -> NodeClaim:
        """The instance as a NodeClaim, read from its Node (live, not from a cache) or
        from its record while it has no Node."""
        if not provider_id.startswith(PROVIDER_ID_PREFIX):
            raise NodeClaimNotFoundError(
                f"{provider_id!r} is not a kwok provider ID", provider_id=provider_id
            )
        if self.faults.roll(FAULT_GET_NOT_FOUND):
            _injected(FAULT_GET_NOT_FOUND, _node_name(provider_id))
            raise NodeClaimNotFoundError(
                f"kwok: injected fault: instance {provider_id} not found (stale read)",
                provider_id=provider_id,
            )
        pending = self._pending.get(provider_id)
        if pending is not None:
            return pending.model_copy(deep=True)
        try:
            node = await self._client.get(NODE, _node_name(provider_id), live=True)
        except api_errors.NotFound as exc:
            record = await self._records.get(_node_name(provider_id))
            if record is not None:
                return _nodeclaim_from_node(record.node)
            raise NodeClaimNotFoundError(
                f"node {_node_name(provider_id)} not found", provider_id=provider_id
            ) from exc
        if node.get("spec", {}).get("providerID") != provider_id or _deleting(node):
            raise NodeClaimNotFoundError(
                f"node {_node_name(provider_id)} is gone", provider_id=provider_id
            )
        return _nodeclaim_from_node(node)

    async def list(self) -> Sequence[NodeClaim]:
        """Every kwok instance this provider launched: Nodes with a ``kwok://`` provider
        ID and the NodeClass label that ``create`` writes, not being deleted, and launches
        whose Node is not written yet (their records). Nodes made by hand are never
        listed, so garbage collection cannot mistake them for leaked instances."""
        nodes = await self._client.list(NODE)
        found = [
            _nodeclaim_from_node(node)
            for node in nodes
            if str(node.get("spec", {}).get("providerID", "")).startswith(PROVIDER_ID_PREFIX)
            and _NODECLASS_LABEL in (node.get("metadata", {}).get("labels") or {})
            and not _deleting(node)
        ]
        listed = {nc.status.provider_id for nc in found}
        for record in await self._records.list():
            if record.provider_id not in listed:
                listed.add(record.provider_id)
                found.append(_nodeclaim_from_node(record.node))
        found.extend(
            nc.model_copy(deep=True)
            for pid, nc in self._pending.items()
            if pid not in listed
        )
        return found

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """The whole catalogue, the same for every NodePool, with each reservation's
        free slots as of now. Injected insufficient capacity is not shown here: like a
        real cloud's, it surfaces at launch."""
        if not self._reserved:
            return self._instance_types
        return await self._current_types()

    async def _reservation_usage(self) -> dict[str, int]:
        """Instances running in each reservation."""
        found: dict[str, str] = {}
        for instance in await self.list():
            labels = instance.metadata.labels
            rid = labels.get(LABEL_RESERVATION_ID)
            if rid and labels.get(LABEL_CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED:
                found[instance.status.provider_id or ""] = rid
        found.update(self._in_reservation)
        usage: dict[str, int] = {}
        for rid in found.values():
            usage[rid] = usage.get(rid, 0) + 1
        return usage

    async def _current_types(self) -> tuple[InstanceType, ...]:
        """The catalogue with every reserved offering's capacity reduced by what runs in
        its reservation; a full reservation's offerings are unavailable."""
        usage = await self._reservation_usage()
        types = list(self._instance_types)
        for i in self._reserved:
            it = types[i]
            offerings = []
            for o in it.offerings:
                if o.reserved:
                    left = max(o.reservation_capacity - usage.get(o.reservation_id, 0), 0)
                    o = replace(o, reservation_capacity=left, available=o.available and left > 0)
                offerings.append(o)
            types[i] = replace(it, offerings=tuple(offerings))
        return tuple(types)

    # -- deleting ----------------------------------------------------------------------

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the Node (and the record of an instance without one); raise
        NodeClaimNotFoundError once it is deleted or gone."""
        provider_id = nodeclaim.status.provider_id or ""
        if not provider_id.startswith(PROVIDER_ID_PREFIX):
            raise NodeClaimNotFoundError(
                f"{provider_id!r} is not a kwok provider ID", provider_id=provider_id
            )
        name = _node_name(provider_id)
        if self.faults.roll(FAULT_DELETE_ERROR):
            _injected(FAULT_DELETE_ERROR, name)
            raise CloudProviderError(
                f"kwok: injected fault: deleting instance {provider_id} failed, try again"
            )
        task = self._tasks.pop(provider_id, None)
        if task is not None:
            task.cancel()
        self._in_reservation.pop(provider_id, None)
        was_pending = self._pending.pop(provider_id, None) is not None
        if await self._records.delete(name) or was_pending:
            # Terminated before it booted: the next call sees it gone.
            with contextlib.suppress(api_errors.NotFound):
                await self._client.delete(NODE, name)
            return
        try:
            await self._client.delete(NODE, name)
        except api_errors.NotFound as exc:
            raise NodeClaimNotFoundError(
                f"node {name} not found", provider_id=provider_id
            ) from exc
        raise NodeClaimNotFoundError(f"node {name} deleted", provider_id=provider_id)

    async def aclose(self) -> None:
        """Stop booting from this process; the instance records stay, and the boot loop of
        whichever karpy runs next boots them."""
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    # -- the rest of the protocol ------------------------------------------------------

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """kwok nodes never drift."""
        return None

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """Replace a node whose Ready condition is False or Unknown for the options'
        ``repair_toleration`` (10 minutes unless set), draining it forcefully: Karpenter
        v1.15.0's kwok policies (Ready=False the set's one fallback; Ready=Unknown matched
        by the reason ``.*``; both a termination grace period of 0)."""
        toleration = self.options.repair_toleration
        return (
            RepairPolicy("Ready", "False", toleration, termination_grace_period=timedelta(0)),
            RepairPolicy(
                "Ready", "Unknown", toleration, reason_regex=".*",
                termination_grace_period=timedelta(0),
            ),
        )  # fmt: skip

    def supported_node_classes(self) -> Sequence[Kind]:
        """KWOKNodeClass (karpenter.kwok.sh/v1alpha1)."""
        return (KWOK_NODE_CLASS,)


class _BootLoop:
    """Boots recorded instances whose launching process is gone (every BOOT_PERIOD)."""

    def __init__(self, provider: KwokCloudProvider) -> None:
        self._provider = provider

    async def run(self) -> None:
        while True:
            try:
                await self._provider.boot_due()
            except (api_errors.ClientError, OSError) as exc:  # the API may be restarting
                log.warning("kwok: booting recorded instances failed: %s", exc)
            await asyncio.sleep(BOOT_PERIOD)


def _injected(fault: str, name: str | None) -> None:
    log.warning("kwok: injected fault", extra={"fault": fault, "instance": name or ""})


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def _registration_delay(node_class: Mapping[str, Any]) -> timedelta:
    text = (node_class.get("spec") or {}).get("nodeRegistrationDelay")
    return parse_duration(text) if text else timedelta(0)


def _nodeclaim_from_node(node: Mapping[str, Any]) -> NodeClaim:
    meta = node.get("metadata", {})
    labels = dict(meta.get("labels") or {})
    status = node.get("status") or {}
    return NodeClaim.model_validate(
        {
            "metadata": {
                "name": meta.get("name"),
                "labels": labels,
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": {
                "nodeClassRef": {
                    "group": KWOK_NODE_CLASS.group,
                    "kind": KWOK_NODE_CLASS.kind,
                    "name": labels.get(_NODECLASS_LABEL, "default"),
                },
                "requirements": [],
            },
            "status": {
                "nodeName": meta.get("name"),
                "providerID": node.get("spec", {}).get("providerID"),
                "capacity": dict(status.get("capacity") or {}),
                "allocatable": dict(status.get("allocatable") or {}),
            },
        }
    )
