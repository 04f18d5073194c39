"""Where a pod's persistent volumes let it run: PVCs, PVs and StorageClasses, indexed.

kube-scheduler's VolumeBinding plugin only places a pod where its volumes can be
mounted: a bound claim's PersistentVolume ``spec.nodeAffinity.required``, or, for an
unbound claim of a ``WaitForFirstConsumer`` StorageClass, the class's
``allowedTopologies``. Capacity planned without that restriction (a NodeClaim in
zone a for a volume in zone b) would never be used, so the provisioner narrows each
pod with :meth:`VolumeIndex.requirements` before simulating.

:class:`VolumeIndex` keeps the three kinds parsed into the few fields that matter, by
``namespace/name`` or name, as their watch events arrive; resolving a pod is a handful
of dict lookups. Karpenter (pkg/controllers/provisioning/scheduling/volumetopology.go)
works the same way, with two differences: every node-affinity term and topology term
is kept as an alternative (Karpenter uses only the first), and a pending pod keeps a
local volume's hostname pin (the simulator then places it on that node or says why
not, instead of buying a node the volume cannot reach).

A pod whose claims cannot be resolved -- a claim or StorageClass that does not exist,
a claim being deleted, an unbound claim of an ``Immediate`` class -- is not
provisionable: :class:`VolumeError` says which object and what to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from karpy.scheduling import Requirements
from karpy.scheduling.volumes import combine, from_persistent_volume, from_storage_class

__all__ = ["ClaimRef", "VolumeError", "VolumeIndex", "claim_refs"]

_HOSTNAME = "kubernetes.io/hostname"
# The PV controller sets this on a claim once binding is complete; kube-scheduler treats
# a claim without it as unbound even if it names a volume.
_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


class VolumeError(Exception):
    """A pod's volumes cannot be resolved; the message names the object and the fix."""


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A PersistentVolumeClaim a pod mounts: ``name`` in the pod's namespace, through
    pod volume ``volume``; ``ephemeral`` when the claim is generated for the pod
    (``<pod>-<volume>``) from an ephemeral volume's template."""

    name: str
    volume: str
    ephemeral: bool = False


def claim_refs(pod: Mapping[str, Any]) -> tuple[ClaimRef, ...]:
    """The claims ``pod`` (an API object) mounts; empty for most pods."""
    refs = []
    pod_name = pod["metadata"].get("name") or ""
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        name = volume.get("name") or ""
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            refs.append(ClaimRef(name=claim.get("claimName") or "", volume=name))
        elif volume.get("ephemeral") is not None:
            refs.append(ClaimRef(name=f"{pod_name}-{name}", volume=name, ephemeral=True))
    return tuple(refs)


@dataclass(frozen=True, slots=True)
class _Claim:
    volume_name: str
    storage_class: str
    owner_uids: frozenset[str]
    deleting: bool
    lost: bool
    bind_completed: bool


@dataclass(frozen=True, slots=True)
class _Volume:
    alternatives: tuple[Requirements, ...]
    # The same without a hostname pin, for local and hostPath volumes of a pod that
    # is moving off its node (the pin would keep it nowhere).
    unpinned: tuple[Requirements, ...]
    deleting: bool
    driver: str = ""


@dataclass(frozen=True, slots=True)
class _StorageClass:
    alternatives: tuple[Requirements, ...]
    immediate: bool
    driver: str = ""


#: In-tree volume plugins and the CSI drivers that took them over, as
#: k8s.io/csi-translation-lib translates a StorageClass's provisioner (Karpenter's
#: ResolveDriver uses it). A table because the library is Go's; the names are stable.
IN_TREE_DRIVERS = MappingProxyType({
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
})


def _volume_driver(spec: Mapping[str, Any]) -> str:
    """The CSI driver of a PersistentVolume (Karpenter's driverFromVolume): its
    ``csi.driver``, the EBS driver for an in-tree ``awsElasticBlockStore`` volume,
    else none (not counted against attachment limits)."""
    csi = spec.get("csi")
    if isinstance(csi, Mapping) and csi.get("driver"):
        return str(csi["driver"])
    if spec.get("awsElasticBlockStore"):
        return IN_TREE_DRIVERS["kubernetes.io/aws-ebs"]
    return ""


def _unrestricted_if_any_empty(alternatives: list[Requirements]) -> tuple[Requirements, ...]:
    # An empty term allows every node: the volume restricts nothing.
    if any(not alternative for alternative in alternatives):
        return ()
    return tuple(alternatives)


def _namespaced(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


class VolumeIndex:
    """PVCs, PVs and StorageClasses as the scheduler needs them (module docstring).

    ``version`` changes with every event, so callers can cache resolutions.
    """

    def __init__(self) -> None:
        self._claims: dict[str, _Claim] = {}
        self._volumes: dict[str, _Volume] = {}
        self._classes: dict[str, _StorageClass] = {}
        self.version = 0

    def __repr__(self) -> str:
        return (
            f"VolumeIndex(claims={len(self._claims)}, volumes={len(self._volumes)}, "
            f"storage_classes={len(self._classes)})"
        )

    # -- events --------------------------------------------------------------------------

    def update_claim(self, claim: Mapping[str, Any]) -> None:
        """A PersistentVolumeClaim was added or changed."""
        meta = claim["metadata"]
        spec = claim.get("spec") or {}
        self._claims[_namespaced(claim)] = _Claim(
            volume_name=spec.get("volumeName") or "",
            storage_class=spec.get("storageClassName") or "",
            owner_uids=frozenset(
                str(ref.get("uid")) for ref in meta.get("ownerReferences") or ()
            ),
            deleting=bool(meta.get("deletionTimestamp")),
            lost=(claim.get("status") or {}).get("phase") == "Lost",
            bind_completed=_BIND_COMPLETED in (meta.get("annotations") or {}),
        )
        self.version += 1

    def delete_claim(self, claim: Mapping[str, Any]) -> None:
        """A PersistentVolumeClaim is gone."""
        self._claims.pop(_namespaced(claim), None)
        self.version += 1

    def update_volume(self, volume: Mapping[str, Any]) -> None:
        """A PersistentVolume was added or changed."""
        spec = volume.get("spec") or {}
        alternatives = _unrestricted_if_any_empty(from_persistent_volume(volume))
        unpinned = alternatives
        if "local" in spec or "hostPath" in spec:
            unpinned = _unrestricted_if_any_empty([a.without(_HOSTNAME) for a in alternatives])
        self._volumes[str(volume["metadata"]["name"])] = _Volume(
            alternatives=alternatives,
            unpinned=unpinned,
            deleting=bool(volume["metadata"].get("deletionTimestamp")),
            driver=_volume_driver(spec),
        )
        self.version += 1

    def delete_volume(self, volume: Mapping[str, Any]) -> None:
        """A PersistentVolume is gone."""
        self._volumes.pop(str(volume["metadata"]["name"]), None)
        self.version += 1

    def update_storage_class(self, storage_class: Mapping[str, Any]) -> None:
        """A StorageClass was added or changed."""
        provisioner = str(storage_class.get("provisioner") or "")
        self._classes[str(storage_class["metadata"]["name"])] = _StorageClass(
            alternatives=_unrestricted_if_any_empty(from_storage_class(storage_class)),
            immediate=(storage_class.get("volumeBindingMode") or "Immediate") == "Immediate",
            driver=IN_TREE_DRIVERS.get(provisioner, provisioner),
        )
        self.version += 1

    def delete_storage_class(self, storage_class: Mapping[str, Any]) -> None:
        """A StorageClass is gone."""
        self._classes.pop(str(storage_class["metadata"]["name"]), None)
        self.version += 1

    # -- resolving -----------------------------------------------------------------------

    def requirements(
        self,
        namespace: str,
        pod_name: str,
        pod_uid: str,
        claims: tuple[ClaimRef, ...],
        *,
        bound: bool = False,
    ) -> tuple[Requirements, ...]:
        """The alternatives (any one will do) for where the pod's volumes can be
        mounted; empty when they restrict nothing. Raises :class:`VolumeError` when a
        claim cannot be resolved.

        ``bound`` is for a running pod that must move (its node is going away): its
        ephemeral claims will be created anew, its local volumes' hostname pins are
        dropped, and only missing objects are errors -- the checks kube-scheduler makes
        on a pending pod's claims are not repeated.
        """
        per_volume = []
        for ref in claims:
            if bound and ref.ephemeral:
                continue
            per_volume.append(self._claim_requirements(namespace, pod_name, pod_uid, ref,
                                                       bound=bound))
        return tuple(combine(per_volume))

    def drivers(
        self, namespace: str, claims: tuple[ClaimRef, ...]
    ) -> dict[str, frozenset[str]]:
        """The pod's claims per CSI driver that attaches them (Karpenter's GetVolumes):
        a bound claim's volume's driver, an unbound one's StorageClass provisioner; a
        claim, volume or class that is not known, or a driver that is not CSI, is left
        out (it cannot be counted against a limit)."""
        out: dict[str, set[str]] = {}
        for ref in claims:
            key = f"{namespace}/{ref.name}"
            claim = self._claims.get(key)
            if claim is None:
                continue
            driver = ""
            if claim.volume_name:
                volume = self._volumes.get(claim.volume_name)
                driver = volume.driver if volume is not None else ""
            elif claim.storage_class:
                storage_class = self._classes.get(claim.storage_class)
                driver = storage_class.driver if storage_class is not None else ""
            if driver:
                out.setdefault(driver, set()).add(key)
        return {driver: frozenset(keys) for driver, keys in out.items()}

    def _claim_requirements(
        self, namespace: str, pod_name: str, pod_uid: str, ref: ClaimRef, *, bound: bool
    ) -> tuple[Requirements, ...]:
        key = f"{namespace}/{ref.name}"
        claim = self._claims.get(key)
        if claim is None:
            if ref.ephemeral:
                raise VolumeError(
                    f'persistentvolumeclaim "{key}" of ephemeral volume "{ref.volume}" does '
                    "not exist yet (the ephemeral volume controller creates it)"
                )
            raise VolumeError(
                f'persistentvolumeclaim "{key}" (volume "{ref.volume}") not found; create '
                "it or fix spec.volumes[].persistentVolumeClaim.claimName"
            )
        if not bound:
            self._validate_claim(key, claim, pod_name, pod_uid, ref)
        if claim.volume_name:
            volume = self._volumes.get(claim.volume_name)
            if volume is None:
                raise VolumeError(
                    f'persistentvolumeclaim "{key}" is bound to persistentvolume '
                    f'"{claim.volume_name}", which does not exist'
                )
            if not bound and volume.deleting:
                raise VolumeError(
                    f'persistentvolume "{claim.volume_name}" (of persistentvolumeclaim '
                    f'"{key}") is being deleted'
                )
            return volume.unpinned if bound else volume.alternatives
        if not claim.storage_class:
            if bound:
                return ()
            raise VolumeError(
                f'unbound persistentvolumeclaim "{key}" has no spec.storageClassName; '
                "set one or bind it to a persistentvolume (spec.volumeName)"
            )
        storage_class = self._classes.get(claim.storage_class)
        if storage_class is None:
            raise VolumeError(
                f'storageclass "{claim.storage_class}" (of persistentvolumeclaim "{key}") '
                "not found; create it or fix the claim's spec.storageClassName"
            )
        if not bound and storage_class.immediate:
            raise VolumeError(
                f'persistentvolumeclaim "{key}" is unbound and storageclass '
                f'"{claim.storage_class}" binds Immediately; the claim must be bound '
                "before the pod can be scheduled"
            )
        return storage_class.alternatives

    @staticmethod
    def _validate_claim(
        key: str, claim: _Claim, pod_name: str, pod_uid: str, ref: ClaimRef
    ) -> None:
        """The claim states kube-scheduler's VolumeBinding plugin rejects a pod for."""
        if claim.deleting:
            raise VolumeError(f'persistentvolumeclaim "{key}" is being deleted')
        if claim.lost:
            raise VolumeError(
                f'persistentvolumeclaim "{key}" is Lost: bound to persistentvolume '
                f'"{claim.volume_name}", which no longer exists'
            )
        if ref.ephemeral and pod_uid and pod_uid not in claim.owner_uids:
            raise VolumeError(
                f'persistentvolumeclaim "{key}" was not created for pod "{pod_name}" '
                f'(ephemeral volume "{ref.volume}"); delete the claim or rename the volume'
            )
        if claim.volume_name and not claim.bind_completed:
            raise VolumeError(
                f'persistentvolumeclaim "{key}" names persistentvolume '
                f'"{claim.volume_name}" but is not bound yet (no {_BIND_COMPLETED} '
                "annotation)"
            )
