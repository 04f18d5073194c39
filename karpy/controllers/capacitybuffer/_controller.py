"""``capacitybuffer``: resolve each CapacityBuffer's chunk, count its chunks, keep its
virtual pods and write its status (Karpenter v1.14's buffer controller).

The chunk's shape comes from the PodTemplate ``podTemplateRef`` names or from the pod
template of the ``apps`` workload ``scalableRef`` names. Status, as Karpenter writes it:

* ``ReadyForProvisioning``: True (``Resolved``) once the shape resolved; False with
  ``PodTemplateNotFound``, ``ScalableRefNotFound`` or ``ResolutionFailed`` (an
  unsupported kind or group, or a provisioningStrategy karpy does not act on);
* ``replicas``, ``podTemplateRef``, ``podTemplateGeneration``, ``provisioningStrategy``;
* ``Provisioning``, from where the provisioner's last round put the virtual pods: True
  ``FitsExistingCapacity`` when all fit existing capacity; False with
  ``RequiresNewCapacity``, ``NotReadyForProvisioning`` or ``BufferEmpty``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from karpy.apis.autoscaling import (
    ACTIVE_PROVISIONING_STRATEGY,
    CONDITION_PROVISIONING,
    CONDITION_READY_FOR_PROVISIONING,
    SCALABLE_KINDS,
    CapacityBuffer,
)
from karpy.apis.conditions import set_condition
from karpy.controllers.capacitybuffer._replicas import buffer_replicas
from karpy.controllers.capacitybuffer._virtualpods import VirtualPods, build_virtual_pods
from karpy.runtime import (
    Cache,
    Client,
    Clock,
    Kind,
    Object,
    Request,
    Result,
    errors,
    format_time,
    kinds,
)
from karpy.scheduling.pod import pod_requests

__all__ = ["CAPACITY_BUFFER", "POD_TEMPLATE", "CapacityBufferController", "buffers_using"]

log = logging.getLogger("controller")

CAPACITY_BUFFER: Final = Kind(
    group="autoscaling.x-k8s.io", version="v1beta1", plural="capacitybuffers",
    kind="CapacityBuffer",
)  # fmt: skip
POD_TEMPLATE: Final = Kind(group="", version="v1", plural="podtemplates", kind="PodTemplate")
_SCALABLE: Final = {"Deployment": kinds.DEPLOYMENT, "ReplicaSet": kinds.REPLICA_SET,
                    "StatefulSet": kinds.STATEFUL_SET}  # fmt: skip
_RESYNC: Final = 10.0
"""Re-read the workload (its replicas drive percentage) and refresh Provisioning."""


@dataclass(frozen=True, slots=True)
class _Resolved:
    template: Mapping[str, Any]
    template_name: str = ""
    template_generation: int | None = None
    scalable_replicas: int | None = None


class _UnresolvedError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def buffers_using(cache: Cache) -> Any:
    """Maps a PodTemplate to the buffers in its namespace whose podTemplateRef names it."""

    def buffers(template: Object) -> Iterable[Request]:
        meta = template["metadata"]
        return [
            Request(meta.get("namespace") or "", b["metadata"]["name"])
            for b in cache.list(CAPACITY_BUFFER, namespace=meta.get("namespace"))
            if ((b.get("spec") or {}).get("podTemplateRef") or {}).get("name") == meta["name"]
        ]

    return buffers


class CapacityBufferController:
    """The ``capacitybuffer`` reconciler (see the module docstring)."""

    name = "capacitybuffer"

    def __init__(
        self, *, client: Client, virtual_pods: VirtualPods, trigger: Any, clock: Clock
    ) -> None:
        self._client = client
        self._virtual = virtual_pods
        self._trigger = trigger
        self._clock = clock

    async def reconcile(self, request: Request) -> Result:
        """Resolve the buffer, refresh its virtual pods and write its status."""
        key = f"{request.namespace}/{request.name}"
        try:
            stored = await self._client.get(
                CAPACITY_BUFFER, request.name, namespace=request.namespace
            )
        except errors.NotFound:
            self._virtual.remove(key)
            return Result()
        status = dict(stored.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or ()]
        generation = int(stored["metadata"].get("generation") or 0)
        replicas = 0
        try:
            buffer = _parse(stored)
            resolved = await self._resolve(buffer)
        except _UnresolvedError as exc:
            self._virtual.remove(key)
            _set(conditions, CONDITION_READY_FOR_PROVISIONING, "False", exc.reason, exc.message,
                 generation, self._clock)  # fmt: skip
        else:
            requests = pod_requests(resolved.template.get("spec") or {})
            replicas = buffer_replicas(buffer.spec, requests, resolved.scalable_replicas)
            _set(conditions, CONDITION_READY_FOR_PROVISIONING, "True", "Resolved",
                 "Pod template resolved successfully", generation, self._clock)  # fmt: skip
            status["replicas"] = replicas
            if resolved.template_name:
                status["podTemplateRef"] = {"name": resolved.template_name}
                status["podTemplateGeneration"] = resolved.template_generation
            else:
                status["podTemplateRef"] = None
                status["podTemplateGeneration"] = None
            self._virtual.update(key, build_virtual_pods(
                request.namespace, request.name, str(stored["metadata"].get("uid") or ""),
                resolved.template, replicas,
            ))  # fmt: skip
        status["provisioningStrategy"] = (stored.get("spec") or {}).get("provisioningStrategy")
        self._provisioning(key, conditions, replicas, generation)
        status["conditions"] = conditions
        if _changed(stored.get("status") or {}, status):
            try:
                await self._client.patch_status(
                    CAPACITY_BUFFER, request.name, {"status": status},
                    namespace=request.namespace,
                )  # fmt: skip
            except errors.NotFound:
                self._virtual.remove(key)
                return Result()
        if self._virtual.is_buffer(key):
            self._trigger(("capacitybuffer", key))
        return Result(requeue_after=_RESYNC)

    def _provisioning(
        self, key: str, conditions: list[dict[str, Any]], replicas: int, generation: int
    ) -> None:
        ready = any(c.get("type") == CONDITION_READY_FOR_PROVISIONING
                    and c.get("status") == "True" for c in conditions)  # fmt: skip
        if not ready:
            _set(conditions, CONDITION_PROVISIONING, "False", "NotReadyForProvisioning",
                 "Buffer is not ReadyForProvisioning", generation, self._clock)  # fmt: skip
            return
        if replicas == 0:
            _set(conditions, CONDITION_PROVISIONING, "False", "BufferEmpty",
                 "Buffer has zero desired replicas", generation, self._clock)  # fmt: skip
            return
        placed = self._virtual.placement(key)
        if placed is None:
            return  # no round has seen these pods yet
        if placed.new or placed.failed:
            _set(conditions, CONDITION_PROVISIONING, "False", "RequiresNewCapacity",
                 f"{placed.new}/{replicas} virtual pods required new capacity, "
                 f"{placed.failed} failed", generation, self._clock)  # fmt: skip
        elif placed.existing == replicas:
            _set(conditions, CONDITION_PROVISIONING, "True", "FitsExistingCapacity",
                 f"All {replicas} virtual pods fit on existing capacity", generation,
                 self._clock)  # fmt: skip

    async def _resolve(self, buffer: CapacityBuffer) -> _Resolved:
        spec = buffer.spec
        namespace = buffer.metadata.namespace or "default"
        strategy = spec.provisioning_strategy or ACTIVE_PROVISIONING_STRATEGY
        if strategy != ACTIVE_PROVISIONING_STRATEGY:
            raise _UnresolvedError(
                "ResolutionFailed",
                f"spec.provisioningStrategy {strategy!r} is not supported by karpy; use "
                f"{ACTIVE_PROVISIONING_STRATEGY!r}",
            )
        if spec.pod_template_ref is not None:
            name = spec.pod_template_ref.name
            try:
                template = await self._client.get(POD_TEMPLATE, name, namespace=namespace)
            except errors.NotFound:
                raise _UnresolvedError(
                    "PodTemplateNotFound", f'podtemplates "{name}" not found'
                ) from None
            return _Resolved(
                template=template.get("template") or {}, template_name=name,
                template_generation=int(template["metadata"].get("generation") or 0),
            )  # fmt: skip
        ref = spec.scalable_ref
        if ref is None:
            raise _UnresolvedError(
                "ResolutionFailed", "Neither podTemplateRef nor scalableRef is set"
            )
        group = ref.api_group or "apps"
        if group != "apps":
            raise _UnresolvedError(
                "ResolutionFailed", f"unsupported scalableRef API group {ref.api_group!r}"
            )
        kind = _SCALABLE.get(ref.kind)
        if kind is None:
            raise _UnresolvedError(
                "ResolutionFailed",
                f"unsupported kind {ref.kind!r}; scalableRef.kind must be one of "
                f"{', '.join(SCALABLE_KINDS)}",
            )
        try:
            workload = await self._client.get(kind, ref.name, namespace=namespace)
        except errors.NotFound:
            raise _UnresolvedError(
                "ScalableRefNotFound", f'{kind.resource} "{ref.name}" not found'
            ) from None
        workload_spec = workload.get("spec") or {}
        replicas = workload_spec.get("replicas")
        return _Resolved(
            template=workload_spec.get("template") or {},
            scalable_replicas=1 if replicas is None else int(replicas),
        )


def _parse(stored: Object) -> CapacityBuffer:
    try:
        return CapacityBuffer.from_dict(stored)
    except ValidationError as exc:
        raise _UnresolvedError("ResolutionFailed", f"invalid CapacityBuffer: {exc}") from None


def _set(
    conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
    generation: int, clock: Clock,
) -> None:
    set_condition(conditions, type_, status, reason, message, generation=generation,
                  now=format_time(clock.now()))


def _changed(stored: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    for key, value in status.items():
        if value is None:
            if stored.get(key) is not None:
                return True
        elif stored.get(key) != value:
            return True
    return False
