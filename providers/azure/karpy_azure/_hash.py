"""Karpenter Azure's AKSNodeClass hash (``karpenter.azure.com/aksnodeclass-hash``, hash
version ``v3``), exactly: the same decimal string Karpenter Azure v1.14.2 writes for the
same stored AKSNodeClass, so NodeClaims it launched do not drift after a move to karpy.

Upstream (github.com/Azure/karpenter-provider-azure v1.14.2, pkg/apis/v1beta1
aksnodeclass.go)::

    hashstructure.Hash(in.Spec, FormatV2,
        &HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})

:mod:`karpy.apis.hashstructure` walks the Go value; this module describes it. The spec's
Go fields in declaration order::

    AKSNodeClassSpec{VNETSubnetID *string, OSDiskSizeGB *int32, ImageID *string (json:"-",
      never decoded), ImageFamily *string, FIPSMode *string, Tags (hash:"ignore"),
      Kubelet *KubeletConfiguration, MaxPods *int32, Security *{EncryptionAtHost *bool},
      LocalDNS *LocalDNS, GPU *{Mode *string}, ArtifactStreaming *{Enabled *bool},
      LinuxOSConfig *LinuxOSConfiguration}

``tags`` is left out: a tags change is applied in place (:mod:`karpy_azure._inplaceupdate`)
instead of replacing nodes. The CRD's defaults (``osDiskSizeGB: 128``, ``imageFamily:
Ubuntu``, the kubelet's and GPU's) are part of every stored object, and of the model.
karpy's ``security.trustedLaunch`` is not a field of Karpenter Azure v1.14.2's Security, so
Go's decoding drops it and it is not hashed here either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from karpy.apis.hashstructure import (
    GoBool,
    GoInt32,
    GoPointer,
    GoSlice,
    GoString,
    GoStruct,
    StructField,
    hash_v2,
    ptr_bool,
    ptr_int32,
    ptr_int64,
    ptr_string,
)
from karpy.apis.v1.nodepool_hash import go_metav1_duration, go_nillable_duration
from karpy.cloudprovider.nodeclass_hash import (
    NodeClassHash,
    NodeClassHashSpec,
    stamped_hash_drifted,
)
from karpy.runtime import Manager
from karpy_azure._nodeclasses import AKS_NODE_CLASS
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis import labels as az

if TYPE_CHECKING:
    from karpy.apis import NodeClaim
    from karpy_azure.apis.aksnodeclass import (
        KubeletConfiguration,
        LinuxOSConfiguration,
        LocalDNS,
        LocalDNSZoneOverride,
        SysctlConfiguration,
    )

__all__ = [
    "NODECLASS_HASH_SPEC",
    "NODECLASS_HASH_VERSION",
    "hash_drifted",
    "node_class_hash",
    "register_hash_controller",
    "spec_go_value",
]

NODECLASS_HASH_VERSION: Final = "v3"
"""Karpenter Azure v1.14.2's ``AKSNodeClassHashVersion``."""

# SysctlConfiguration's Go fields in declaration order, with the model's attribute names.
_SYSCTLS: Final = (
    ("FsAioMaxNr", "fs_aio_max_nr"), ("FsFileMax", "fs_file_max"),
    ("FsInotifyMaxUserWatches", "fs_inotify_max_user_watches"), ("FsNrOpen", "fs_nr_open"),
    ("KernelThreadsMax", "kernel_threads_max"),
    ("NetCoreNetdevMaxBacklog", "net_core_netdev_max_backlog"),
    ("NetCoreOptmemMax", "net_core_optmem_max"),
    ("NetCoreRmemDefault", "net_core_rmem_default"), ("NetCoreRmemMax", "net_core_rmem_max"),
    ("NetCoreSomaxconn", "net_core_somaxconn"),
    ("NetCoreWmemDefault", "net_core_wmem_default"), ("NetCoreWmemMax", "net_core_wmem_max"),
    ("NetIPv4IPLocalPortRange", "net_ipv4_ip_local_port_range"),
    ("NetIPv4NeighDefaultGcThresh1", "net_ipv4_neigh_default_gc_thresh1"),
    ("NetIPv4NeighDefaultGcThresh2", "net_ipv4_neigh_default_gc_thresh2"),
    ("NetIPv4NeighDefaultGcThresh3", "net_ipv4_neigh_default_gc_thresh3"),
    ("NetIPv4TCPFinTimeout", "net_ipv4_tcp_fin_timeout"),
    ("NetIPv4TCPKeepaliveProbes", "net_ipv4_tcp_keepalive_probes"),
    ("NetIPv4TCPKeepaliveTime", "net_ipv4_tcp_keepalive_time"),
    ("NetIPv4TCPMaxSynBacklog", "net_ipv4_tcp_max_syn_backlog"),
    ("NetIPv4TCPMaxTwBuckets", "net_ipv4_tcp_max_tw_buckets"),
    ("NetIPv4TCPTwReuse", "net_ipv4_tcp_tw_reuse"),
    ("NetIPv4TCPKeepaliveIntvl", "net_ipv4_tcp_keepalive_intvl"),
    ("NetNetfilterNfConntrackBuckets", "net_netfilter_nf_conntrack_buckets"),
    ("NetNetfilterNfConntrackMax", "net_netfilter_nf_conntrack_max"),
    ("VMMaxMapCount", "vm_max_map_count"), ("VMSwappiness", "vm_swappiness"),
    ("VMVfsCachePressure", "vm_vfs_cache_pressure"),
)





def _scalar(value: object) -> GoPointer:
    # Sysctls are *int32 except one *string and one *bool.
    if value is None:
        return GoPointer(None)
    if isinstance(value, bool):
        return GoPointer(GoBool(value))
    if isinstance(value, int):
        return GoPointer(GoInt32(value))
    return GoPointer(GoString(str(value)))


def _kubelet(k: KubeletConfiguration | None) -> GoPointer:
    if k is None:
        return GoPointer(None)
    sysctls = k.allowed_unsafe_sysctls
    present = bool(sysctls) or "allowed_unsafe_sysctls" in k.model_fields_set
    return GoPointer(GoStruct("KubeletConfiguration", (
        StructField("CPUManagerPolicy", ptr_string(k.cpu_manager_policy)),
        StructField("CPUCFSQuota", ptr_bool(k.cpu_cfs_quota)),
        StructField("CPUCFSQuotaPeriod", go_metav1_duration(k.cpu_cfs_quota_period)),
        StructField("ImageGCHighThresholdPercent", ptr_int32(k.image_gc_high_threshold_percent)),
        StructField("ImageGCLowThresholdPercent", ptr_int32(k.image_gc_low_threshold_percent)),
        StructField("TopologyManagerPolicy", ptr_string(k.topology_manager_policy)),
        StructField("AllowedUnsafeSysctls",
                    GoSlice([GoString(s) for s in sysctls] if present else None)),
        StructField("ContainerLogMaxSize", ptr_string(k.container_log_max_size)),
        StructField("ContainerLogMaxFiles", ptr_int32(k.container_log_max_files)),
        StructField("PodPidsLimit", ptr_int64(k.pod_pids_limit)),
        StructField("FailSwapOn", ptr_bool(k.fail_swap_on)),
    )))


def _override(o: LocalDNSZoneOverride) -> GoStruct:
    return GoStruct("LocalDNSZoneOverride", (
        StructField("Zone", GoString(o.zone)),
        StructField("QueryLogging", GoString(o.query_logging)),
        StructField("Protocol", GoString(o.protocol)),
        StructField("ForwardDestination", GoString(o.forward_destination)),
        StructField("ForwardPolicy", GoString(o.forward_policy)),
        StructField("MaxConcurrent", ptr_int32(o.max_concurrent)),
        StructField("CacheDuration", go_nillable_duration(o.cache_duration)),
        StructField("ServeStaleDuration", go_nillable_duration(o.serve_stale_duration)),
        StructField("ServeStale", GoString(o.serve_stale)),
    ))


def _local_dns(dns: LocalDNS | None) -> GoPointer:
    if dns is None:
        return GoPointer(None)
    return GoPointer(GoStruct("LocalDNS", (
        StructField("Mode", GoString(dns.mode)),
        StructField("VnetDNSOverrides", GoSlice([_override(o) for o in dns.vnet_dns_overrides])),
        StructField("KubeDNSOverrides", GoSlice([_override(o) for o in dns.kube_dns_overrides])),
    )))


def _sysctls(sysctls: SysctlConfiguration | None) -> GoPointer:
    if sysctls is None:
        return GoPointer(None)
    return GoPointer(GoStruct("SysctlConfiguration", tuple(
        StructField(go, _scalar(getattr(sysctls, attr))) for go, attr in _SYSCTLS
    )))


def _linux_os_config(config: LinuxOSConfiguration | None) -> GoPointer:
    if config is None:
        return GoPointer(None)
    return GoPointer(GoStruct("LinuxOSConfiguration", (
        StructField("SwapFileSize", ptr_string(config.swap_file_size)),
        StructField("Sysctls", _sysctls(config.sysctls)),
        StructField("TransparentHugePageDefrag", ptr_string(config.transparent_huge_page_defrag)),
        StructField("TransparentHugePageEnabled", ptr_string(config.transparent_huge_page_enabled)),
    )))


def spec_go_value(node_class: AKSNodeClass) -> GoStruct:
    """The AKSNodeClassSpec as the Go value Karpenter Azure hashes (see the module docs)."""
    s = node_class.spec
    security = s.security
    gpu = s.gpu
    streaming = s.artifact_streaming
    return GoStruct("AKSNodeClassSpec", (
        StructField("VNETSubnetID", ptr_string(s.vnet_subnet_id)),
        StructField("OSDiskSizeGB", ptr_int32(s.os_disk_size_gb)),
        StructField("ImageID", GoPointer(None)),
        StructField("ImageFamily", ptr_string(s.image_family)),
        StructField("FIPSMode", ptr_string(s.fips_mode)),
        StructField("Kubelet", _kubelet(s.kubelet)),
        StructField("MaxPods", ptr_int32(s.max_pods)),
        StructField("Security", GoPointer(None if security is None else GoStruct("Security", (
            StructField("EncryptionAtHost", ptr_bool(security.encryption_at_host)),
        )))),
        StructField("LocalDNS", _local_dns(s.local_dns)),
        StructField("GPU", GoPointer(None if gpu is None else GoStruct("GPU", (
            StructField("Mode", ptr_string(gpu.mode)),
        )))),
        StructField("ArtifactStreaming", GoPointer(
            None if streaming is None else GoStruct("ArtifactStreaming", (
                StructField("Enabled", ptr_bool(streaming.enabled)),
            )))),
        StructField("LinuxOSConfig", _linux_os_config(s.linux_os_config)),
    ))


def node_class_hash(node_class: AKSNodeClass) -> str:
    """Karpenter Azure's ``AKSNodeClass.Hash()`` (decimal)."""
    return str(hash_v2(spec_go_value(node_class)))


def hash_drifted(nodeclaim: NodeClaim, node_class: AKSNodeClass) -> bool:
    """Karpenter Azure's static drift: the hash the nodeclass.hash controller stamped on the
    AKSNodeClass differs from the NodeClaim's, both present and of the same hash version."""
    return stamped_hash_drifted(
        nodeclaim.metadata.annotations, node_class.metadata.annotations,
        hash_annotation=az.ANNOTATION_AKSNODECLASS_HASH,
        version_annotation=az.ANNOTATION_AKSNODECLASS_HASH_VERSION)


def _hash_of(stored: Mapping[str, Any]) -> str | None:
    try:
        node_class = AKSNodeClass.from_dict(stored)
    except ValueError:
        return None  # the nodeclass.status controller reports what is wrong with it
    return node_class_hash(node_class)


NODECLASS_HASH_SPEC: Final = NodeClassHashSpec(
    kind=AKS_NODE_CLASS,
    hash_annotation=az.ANNOTATION_AKSNODECLASS_HASH,
    version_annotation=az.ANNOTATION_AKSNODECLASS_HASH_VERSION,
    version=NODECLASS_HASH_VERSION,
    hash_of=_hash_of,
)
"""The ``nodeclass.hash`` controller's AKSNodeClass side
(:mod:`karpy.cloudprovider.nodeclass_hash`)."""


def register_hash_controller(manager: Manager) -> None:
    """Add ``nodeclass.hash`` for AKSNodeClasses to ``manager``."""
    hashes = NodeClassHash(NODECLASS_HASH_SPEC, manager.client)
    manager.controller(hashes.name).for_(AKS_NODE_CLASS).complete(hashes)
