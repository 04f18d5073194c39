"""The kwok cloud's record of instances that are launched but have no Node yet.

A real cloud keeps its instances whatever happens to the autoscaler that asked for
them; so must the kwok provider, or a test that kills karpy mid-launch proves nothing.
A booted instance is its Node object, which already outlives karpy. An instance that is
still "booting" (a registration delay) or never will (an injected unregistered launch)
has no Node, so it is recorded as a ConfigMap ``kwok-instance-<node>`` in the namespace
``karpy-kwok-instances`` (:data:`RECORD_NAMESPACE`), labelled
``karpenter.kwok.sh/instance``, holding the Node to write and when to write it. The
cluster is the kwok cloud's only durable store, and a ConfigMap per instance keeps each
launch one create and each boot one delete, with no read-modify-write of a shared
document to conflict on.

The records have a namespace of their own so that the Role which lets karpy delete
them lets it delete nothing else: a Role cannot be narrowed to a label, and one on
``kube-system`` would let karpy delete every ConfigMap there (kube-proxy's, CoreDNS's,
the cluster's CA bundle). The chart creates the namespace with that Role; run by hand
with wider rights (the local demo, tests), karpy creates it on the first record.

The record is written before ``create`` answers, so an instance exists from the moment
the cloud accepted the launch; whichever karpy replica runs next boots it when its time
comes (:class:`BootLoop`), since the "cloud" keeps running whoever leads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from karpy.cloudprovider.errors import CreateError
from karpy.cloudprovider.kwok._wellknown import GROUP
from karpy.runtime import Client, format_micro_time, parse_time
from karpy.runtime import errors as api_errors
from karpy.runtime.kinds import CONFIG_MAP, NAMESPACE

__all__ = ["RECORD_LABEL", "RECORD_NAMESPACE", "InstanceRecord", "InstanceRecords"]

RECORD_NAMESPACE: Final = "karpy-kwok-instances"
RECORD_LABEL: Final = GROUP + "/instance"
_PREFIX: Final = "kwok-instance-"
_NEVER: Final = "never"


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """A launched instance without a Node: the Node to write, and when (None: never)."""

    node: Mapping[str, Any]
    register_at: datetime | None

    @property
    def name(self) -> str:
        """The Node's (and NodeClaim's) name."""
        return str(self.node["metadata"]["name"])

    @property
    def provider_id(self) -> str:
        """The instance's provider ID."""
        return str(self.node["spec"]["providerID"])


class InstanceRecords:
    """Reads and writes :class:`InstanceRecord` ConfigMaps (module docstring)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def create(self, record: InstanceRecord) -> None:
        """Write the record; raises ``errors.AlreadyExists`` if the instance has one.

        Creates :data:`RECORD_NAMESPACE` if it is missing; raises ``CreateError``
        (reason ``RecordNamespaceMissing``) if karpy may not create it.
        """
        when = format_micro_time(record.register_at) if record.register_at is not None else _NEVER
        obj = {
            "metadata": {
                "name": _PREFIX + record.name,
                "namespace": RECORD_NAMESPACE,
                "labels": {RECORD_LABEL: record.name},
            },
            "data": {"node": json.dumps(record.node), "registerAt": when},
        }
        try:
            await self._client.create(CONFIG_MAP, obj, namespace=RECORD_NAMESPACE)
        except api_errors.NotFound:  # the namespace (a ConfigMap create finds nothing else)
            await self._create_namespace()
            await self._client.create(CONFIG_MAP, obj, namespace=RECORD_NAMESPACE)

    async def _create_namespace(self) -> None:
        try:
            await self._client.create(NAMESPACE, {"metadata": {"name": RECORD_NAMESPACE}})
        except api_errors.AlreadyExists:
            pass
        except api_errors.Forbidden as exc:
            raise CreateError(
                f"kwok: namespace {RECORD_NAMESPACE!r}, where the kwok cloud records "
                "instances that have not booted, does not exist and karpy may not create "
                "it: install the chart with cloudProvider=kwok (or apply "
                f"deploy/rbac.yaml), or run `kubectl create namespace {RECORD_NAMESPACE}`",
                reason="RecordNamespaceMissing",
            ) from exc

    async def get(self, name: str) -> InstanceRecord | None:
        """The record of instance ``name``, or None."""
        try:
            obj = await self._client.get(
                CONFIG_MAP, _PREFIX + name, namespace=RECORD_NAMESPACE, live=True
            )
        except api_errors.NotFound:
            return None
        return _parse(obj)

    async def list(self) -> list[InstanceRecord]:
        """Every record (live, not from a cache)."""
        found = await self._client.list(
            CONFIG_MAP, namespace=RECORD_NAMESPACE, label_selector=RECORD_LABEL, live=True
        )
        return [r for obj in found if (r := _parse(obj)) is not None]

    async def delete(self, name: str) -> bool:
        """Delete the record of instance ``name``; False if there was none."""
        try:
            await self._client.delete(CONFIG_MAP, _PREFIX + name, namespace=RECORD_NAMESPACE)
        except api_errors.NotFound:
            return False
        return True


def _parse(obj: Mapping[str, Any]) -> InstanceRecord | None:
    """The record a ConfigMap holds; None if it is not one (hand-made, or mangled)."""
    data = obj.get("data") or {}
    try:
        node = json.loads(data["node"])
        when = data.get("registerAt", _NEVER)
        register_at = None if when == _NEVER else parse_time(when)
        if register_at is None and when != _NEVER:
            raise ValueError("registerAt is empty")  # mangled: not a record
        InstanceRecord(node, register_at).provider_id  # noqa: B018 - validates the shape
    except (KeyError, TypeError, ValueError):
        return None
    return InstanceRecord(node, register_at)
