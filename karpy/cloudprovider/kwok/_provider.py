"""KwokCloudProvider: launching a machine is creating the Node object kwok then runs.

The Node *is* the instance: ``create`` writes it (kwok annotation, labels, capacity,
allocatable, the NodeClaim's taints plus ``karpenter.sh/unregistered:NoExecute``,
providerID ``kwok://<name>``), ``get``/``list`` read Nodes back, ``delete`` deletes it.

As in Karpenter's kwok provider, ``delete`` reports NodeClaimNotFoundError as soon as the
Node is marked for deletion: the Node carries karpy's termination finalizer, which the
termination controller only removes once ``delete`` says the instance is gone, so
waiting for the Node object itself to disappear would never end.

Launches with a registration delay, and launches that never register, exist only in
this process until their Node is written; ``get``/``list``/``delete`` see them too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from karpy.apis import NodeClaim, NodePool
from karpy.apis.duration import parse_duration
from karpy.apis.labels import LABEL_HOSTNAME, nodeclass_label_key
from karpy.apis.taints import UNREGISTERED_NO_EXECUTE_TAINT
from karpy.cloudprovider._launch import LaunchChoice, choose_launch, launched_nodeclaim
from karpy.cloudprovider._launch import launched_labels as resolve_labels
from karpy.cloudprovider._nodeclass import node_class_readiness
from karpy.cloudprovider._registry import ProviderContext
from karpy.cloudprovider._types import DriftReason, NodeClassKind, RepairPolicy
from karpy.cloudprovider.errors import (
    CreateError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.kwok._catalogue import (
    generate_catalogue,
    load_catalogue,
    to_instance_types,
)
from karpy.cloudprovider.kwok._options import KwokFaults, KwokOptions
from karpy.cloudprovider.kwok._wellknown import (
    KWOK_NODE_CLASS,
    KWOK_NODE_KEY,
    KWOK_NODE_VALUE,
    LABEL_INSTANCE_PRICE,
    PROVIDER_ID_PREFIX,
)
from karpy.runtime import Client, Kind
from karpy.runtime import errors as api_errors
from karpy.runtime.kinds import NODE
from karpy.scheduling import InstanceType
from karpy.scheduling import resources as res

__all__ = ["KwokCloudProvider"]

log = logging.getLogger("karpy.cloudprovider.kwok")

_NODE_CLASS_KIND = Kind(
    group=KWOK_NODE_CLASS.group,
    version=KWOK_NODE_CLASS.version,
    plural=KWOK_NODE_CLASS.plural,
    kind=KWOK_NODE_CLASS.kind,
    namespaced=False,
)
_NODECLASS_LABEL = nodeclass_label_key(KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind)


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
        self._instance_types = tuple(instance_types)
        self.faults = KwokFaults(
            insufficient_capacity=set(self.options.insufficient_capacity),
            unregistered_launches=self.options.unregistered_launches,
        )
        # Launched instances without a Node yet (delayed) or ever (unregistered).
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
        choice = choose_launch(nodeclaim, self._instance_types, refuse=self.faults.refuses)
        node = self._node_for(nodeclaim, choice)
        name = node["metadata"]["name"]
        provider_id = node["spec"]["providerID"]
        launched = launched_nodeclaim(
            nodeclaim, choice, provider_id=provider_id, labels=dict(node["metadata"]["labels"])
        )
        if self.faults.take_unregistered():
            log.info("kwok: %s launched but will never register", name)
            self._pending[provider_id] = launched
            return launched
        delay = self.options.registration_delay + _registration_delay(node_class)
        if delay > timedelta(0):
            self._pending[provider_id] = launched
            self._tasks[provider_id] = asyncio.create_task(
                self._register_later(provider_id, node, delay), name=f"kwok-register-{name}"
            )
            return launched
        try:
            await self._client.create(NODE, node)
        except api_errors.AlreadyExists:
            # a repeated create for the same NodeClaim: the instance is the existing Node
            return await self.get(provider_id)
        return launched

    async def _register_later(
        self, provider_id: str, node: Mapping[str, Any], delay: timedelta
    ) -> None:
        await asyncio.sleep(delay.total_seconds())
        backoff = 0.1
        while provider_id in self._pending:
            try:
                await self._client.create(NODE, node)
                break
            except api_errors.AlreadyExists:
                break
            except api_errors.ClientError as exc:
                log.warning("kwok: creating node %s failed, retrying: %s", provider_id, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        self._pending.pop(provider_id, None)
        self._tasks.pop(provider_id, None)

    async def _node_class(self, nodeclaim: NodeClaim) -> Mapping[str, Any]:
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != (KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind):
            raise CreateError(
                f"nodeclaim {nodeclaim.metadata.name} refers to {ref.kind}.{ref.group}; "
                f"the kwok provider serves {KWOK_NODE_CLASS}",
                reason="UnsupportedNodeClass",
            )
        try:
            found = await self._client.get(_NODE_CLASS_KIND, ref.name)
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
        """The instance as a NodeClaim, read from its Node (live, not from a cache)."""
        pending = self._pending.get(provider_id)
        if pending is not None:
            return pending.model_copy(deep=True)
        if not provider_id.startswith(PROVIDER_ID_PREFIX):
            raise NodeClaimNotFoundError(
                f"{provider_id!r} is not a kwok provider ID", provider_id=provider_id
            )
        try:
            node = await self._client.get(NODE, _node_name(provider_id), live=True)
        except api_errors.NotFound as exc:
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
        whose Node is not written yet. Nodes made by hand are never listed, so garbage
        collection cannot mistake them for leaked instances."""
        nodes = await self._client.list(NODE)
        found = [
            _nodeclaim_from_node(node)
            for node in nodes
            if str(node.get("spec", {}).get("providerID", "")).startswith(PROVIDER_ID_PREFIX)
            and _NODECLASS_LABEL in (node.get("metadata", {}).get("labels") or {})
            and not _deleting(node)
        ]
        listed = {nc.status.provider_id for nc in found}
        found.extend(
            nc.model_copy(deep=True)
            for pid, nc in self._pending.items()
            if pid not in listed
        )
        return found

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """The whole catalogue, the same for every NodePool. Injected insufficient
        capacity is not shown here: like a real cloud's, it surfaces at launch."""
        return self._instance_types

    # -- deleting ----------------------------------------------------------------------

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the Node; raise NodeClaimNotFoundError once it is deleted or gone."""
        provider_id = nodeclaim.status.provider_id or ""
        if self._pending.pop(provider_id, None) is not None:
            task = self._tasks.pop(provider_id, None)
            if task is not None:
                task.cancel()
            return
        if not provider_id.startswith(PROVIDER_ID_PREFIX):
            raise NodeClaimNotFoundError(
                f"{provider_id!r} is not a kwok provider ID", provider_id=provider_id
            )
        name = _node_name(provider_id)
        try:
            await self._client.delete(NODE, name)
        except api_errors.NotFound as exc:
            raise NodeClaimNotFoundError(
                f"node {name} not found", provider_id=provider_id
            ) from exc
        raise NodeClaimNotFoundError(f"node {name} deleted", provider_id=provider_id)

    async def aclose(self) -> None:
        """Cancel pending registrations (their Nodes are never written)."""
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
        ``repair_toleration`` (10 minutes unless set, as Karpenter's kwok provider)."""
        toleration = self.options.repair_toleration
        return (
            RepairPolicy("Ready", "False", toleration),
            RepairPolicy("Ready", "Unknown", toleration),
        )

    def supported_node_classes(self) -> Sequence[NodeClassKind]:
        """KWOKNodeClass (karpenter.kwok.sh/v1alpha1)."""
        return (KWOK_NODE_CLASS,)


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
