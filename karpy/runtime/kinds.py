"""Resource kinds: the small descriptor the client, informers and controllers key on.

A :class:`Kind` says where a resource lives in the API (group, version, plural) and
whether it is namespaced. Objects themselves are plain JSON dicts; nothing is generated
per kind, so custom resources are described in one line::

    NODE_POOL = Kind(group="karpenter.sh", version="v1", plural="nodepools",
                     kind="NodePool", namespaced=False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = [
    "CONFIG_MAP",
    "CSI_NODE",
    "DAEMON_SET",
    "DEPLOYMENT",
    "EVENT",
    "LEASE",
    "NAMESPACE",
    "NODE",
    "PERSISTENT_VOLUME",
    "PERSISTENT_VOLUME_CLAIM",
    "POD",
    "POD_DISRUPTION_BUDGET",
    "REPLICATION_CONTROLLER",
    "REPLICA_SET",
    "SECRET",
    "SERVICE",
    "STATEFUL_SET",
    "STORAGE_CLASS",
    "VOLUME_ATTACHMENT",
    "Kind",
]


@dataclass(frozen=True, slots=True)
class Kind:
    """Where a resource type lives in the Kubernetes API.

    ``group`` is "" for the core group (pods, nodes, ...). ``plural`` is the URL segment.
    Its text is Karpenter's ``Kind.group`` notation (``NodeClaim.karpenter.sh``,
    ``EC2NodeClass.karpenter.k8s.aws``; just ``Pod`` for the core group), the form
    ``karpy convert --default-nodeclass`` takes and NodeClass kinds are named by.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` field of objects of this kind ("v1", "apps/v1", ...)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, *, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The URL path of the collection (no ``name``) or of one object.

        Cluster-scoped kinds ignore ``namespace``; a namespaced kind without one gives the
        all-namespaces collection.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """True if ``obj``'s apiVersion/kind are this kind's (fields missing count as a match)."""
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        return (api_version is None or api_version == self.api_version) and (
            kind is None or kind == self.kind
        )

    @property
    def resource(self) -> str:
        """The resource as kubectl, RBAC and CRD names spell it: ``nodeclaims.karpenter.sh``,
        ``pods`` for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


POD = Kind(group="", version="v1", plural="pods", kind="Pod")
NODE = Kind(group="", version="v1", plural="nodes", kind="Node", namespaced=False)
NAMESPACE = Kind(group="", version="v1", plural="namespaces", kind="Namespace", namespaced=False)
CONFIG_MAP = Kind(group="", version="v1", plural="configmaps", kind="ConfigMap")
SECRET = Kind(group="", version="v1", plural="secrets", kind="Secret")
SERVICE = Kind(group="", version="v1", plural="services", kind="Service")
EVENT = Kind(group="", version="v1", plural="events", kind="Event")
PERSISTENT_VOLUME = Kind(
    group="", version="v1", plural="persistentvolumes", kind="PersistentVolume", namespaced=False
)
PERSISTENT_VOLUME_CLAIM = Kind(
    group="", version="v1", plural="persistentvolumeclaims", kind="PersistentVolumeClaim"
)
DEPLOYMENT = Kind(group="apps", version="v1", plural="deployments", kind="Deployment")
REPLICA_SET = Kind(group="apps", version="v1", plural="replicasets", kind="ReplicaSet")
REPLICATION_CONTROLLER = Kind(
    group="", version="v1", plural="replicationcontrollers", kind="ReplicationController"
)
STATEFUL_SET = Kind(group="apps", version="v1", plural="statefulsets", kind="StatefulSet")
DAEMON_SET = Kind(group="apps", version="v1", plural="daemonsets", kind="DaemonSet")
POD_DISRUPTION_BUDGET = Kind(
    group="policy", version="v1", plural="poddisruptionbudgets", kind="PodDisruptionBudget"
)
LEASE = Kind(group="coordination.k8s.io", version="v1", plural="leases", kind="Lease")
CSI_NODE = Kind(
    group="storage.k8s.io", version="v1", plural="csinodes", kind="CSINode", namespaced=False
)
STORAGE_CLASS = Kind(
    group="storage.k8s.io",
    version="v1",
    plural="storageclasses",
    kind="StorageClass",
    namespaced=False,
)
VOLUME_ATTACHMENT = Kind(
    group="storage.k8s.io",
    version="v1",
    plural="volumeattachments",
    kind="VolumeAttachment",
    namespaced=False,
)
