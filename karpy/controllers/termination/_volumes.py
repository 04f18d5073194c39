"""Which VolumeAttachments still tie a terminating node to its volumes.

The attach-detach controller deletes a VolumeAttachment once the volume is detached;
termination waits for that so a StatefulSet's replacement pod can attach the volume
elsewhere. Attachments of pods that will not leave the node (mirror pods, pods that
tolerate the disrupted taint, pods stuck terminating) are not waited for: they would
never detach.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from karpy.controllers.indexes import Index
from karpy.controllers.termination._objects import INDEX_VA_NODE_NAME, pods_on_node
from karpy.runtime import Client, Object, errors, kinds
from karpy.state.pods import is_drainable

__all__ = ["pending_volume_attachments"]


async def pending_volume_attachments(
    client: Client, index: Index, node: Mapping[str, Any], now: datetime
) -> list[Object]:
    """The node's VolumeAttachments termination must wait for."""
    name = node["metadata"]["name"]
    attachments = index.by_index(kinds.VOLUME_ATTACHMENT, INDEX_VA_NODE_NAME, name)
    if not attachments:
        return []
    staying: set[str] = set()  # persistent volumes of pods that will not leave
    for pod in pods_on_node(index, name):
        if is_drainable(pod, now):
            continue
        namespace = pod["metadata"].get("namespace")
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            try:
                pvc = await client.get(kinds.PERSISTENT_VOLUME_CLAIM, claim, namespace=namespace)
            except errors.NotFound:
                continue
            volume_name = (pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                staying.add(volume_name)
    pending = []
    for attachment in attachments:
        pv = ((attachment.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
        if pv and pv not in staying:
            pending.append(attachment)
    return pending
