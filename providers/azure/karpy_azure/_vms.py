"""An Azure VM read back as a NodeClaim (what ``get`` and ``list`` return)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from azure.mgmt.compute import models as cm

from karpy.apis import NodeClaim
from karpy.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from karpy.cloudprovider import InstanceType
from karpy.runtime import format_time
from karpy.scheduling import resources as res
from karpy_azure._instancetypes import REGIONAL_ZONE, zone_label
from karpy_azure._nodeclasses import AKS_NODE_CLASS
from karpy_azure._resources import TAG_NODECLASS, TAG_NODEPOOL, provider_id
from karpy_azure._settings import AzureSettings

__all__ = ["arm_text", "nodeclaim_from_vm"]


def arm_text(value: object) -> str:
    """An SDK enum's wire value (their str() is the Python name), or the string itself."""
    if value is None:
        return ""
    return str(getattr(value, "value", value))


def nodeclaim_from_vm(
    vm: cm.VirtualMachine, settings: AzureSettings, instance_types: Mapping[str, InstanceType]
) -> NodeClaim:
    """``vm`` as the NodeClaim ``get``/``list`` return: instance type, zone, capacity type
    and NodePool labels, provider ID, image, and (when its size is one of
    ``instance_types``, by name) the type's labels, capacity and allocatable."""
    name = str(vm.name)
    tags = dict(vm.tags or {})
    props = vm.properties
    size = arm_text(props.hardware_profile.vm_size) if props and props.hardware_profile else ""
    zones = list(vm.zones or [])
    zone = zone_label(settings.location, zones[0]) if zones else REGIONAL_ZONE
    spot = bool(props and arm_text(props.priority).lower() == "spot")
    labels: dict[str, str] = {}
    it = instance_types.get(size)
    if it is not None:
        labels.update(it.requirements.labels())
    labels.update({LABEL_INSTANCE_TYPE: size, LABEL_ZONE: zone,
                   LABEL_CAPACITY_TYPE: CAPACITY_TYPE_SPOT if spot else CAPACITY_TYPE_ON_DEMAND})
    if TAG_NODEPOOL in tags:
        labels[LABEL_NODEPOOL] = tags[TAG_NODEPOOL]
    image = ""
    if props and props.storage_profile and props.storage_profile.image_reference:
        image = str(props.storage_profile.image_reference.community_gallery_image_id or "")
    created = props.time_created if props and props.time_created else None
    status: dict[str, Any] = {
        "providerID": provider_id(
            settings.subscription_id, settings.node_resource_group, name
        ),
        "imageID": image or None,
    }
    if it is not None:
        status["capacity"] = res.format_resource_list(it.capacity)
        status["allocatable"] = res.format_resource_list(it.allocatable)
    metadata: dict[str, Any] = {"name": name.removeprefix("aks-"), "labels": labels}
    if isinstance(created, datetime):
        metadata["creationTimestamp"] = format_time(created)
    return NodeClaim.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "nodeClassRef": {
                    "group": AKS_NODE_CLASS.group,
                    "kind": AKS_NODE_CLASS.kind,
                    "name": tags.get(TAG_NODECLASS, "default"),
                },
                "requirements": [],
            },
            "status": status,
        }
    )
