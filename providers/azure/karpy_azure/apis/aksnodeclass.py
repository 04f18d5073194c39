"""The ``karpenter.azure.com/v1beta1`` AKSNodeClass: how karpy launches AKS nodes (subnet,
OS disk, image family, FIPS, kubelet, security, tags, max pods).

The schema follows Karpenter's Azure provider (v1.14) with its defaults, bounds,
patterns and CEL rules. ``localDNS`` is modelled but not configured by karpy's bootstrap:
mode ``Required`` is reported on the status.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Final, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from karpy.apis.conditions import ConditionSet, utc_now
from karpy.apis.core import Condition, ConditionList, NodeSelectorRequirement, ObjectMeta, Resource
from karpy.apis.duration import DURATION_PATTERN
from karpy.apis.model import CRDInfo, KubeModel, PrinterColumn, Rule, go_pattern, validations
from karpy_azure.apis.labels import GROUP

__all__ = [
    "CONDITION_IMAGES_READY",
    "CONDITION_KUBERNETES_VERSION_READY",
    "CONDITION_SUBNETS_READY",
    "CONDITION_VALIDATION_SUCCEEDED",
    "GPU",
    "SYSCTL_KEYS",
    "AKSNodeClass",
    "AKSNodeClassSpec",
    "AKSNodeClassStatus",
    "ArtifactStreaming",
    "KubeletConfiguration",
    "LinuxOSConfiguration",
    "LocalDNS",
    "LocalDNSZoneOverride",
    "NodeImage",
    "Security",
    "SysctlConfiguration",
    "TrustedLaunch",
]

CONDITION_IMAGES_READY: Final = "ImagesReady"
CONDITION_KUBERNETES_VERSION_READY: Final = "KubernetesVersionReady"
CONDITION_SUBNETS_READY: Final = "SubnetsReady"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"

ImageFamily = Literal["Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux"]
_SIZE_PATTERN = r"^\d+(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$"


class KubeletConfiguration(KubeModel):
    """Kubelet settings of the nodes (a subset of the upstream KubeletConfiguration)."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  "
                "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            )
        )
    )

    cpu_manager_policy: Literal["none", "static"] = Field(
        "none", description="The CPU manager policy: none or static."
    )
    cpu_cfs_quota: bool = Field(
        True, alias="cpuCFSQuota", description="Enforce CPU limits with CFS quota."
    )
    cpu_cfs_quota_period: str = Field(
        "100ms", alias="cpuCFSQuotaPeriod", description="The CFS quota period."
    )
    image_gc_high_threshold_percent: int | None = Field(
        None,
        alias="imageGCHighThresholdPercent",
        ge=0,
        le=100,
        description="Disk usage percent above which image garbage collection always runs.",
        json_schema_extra={"format": "int32"},
    )
    image_gc_low_threshold_percent: int | None = Field(
        None,
        alias="imageGCLowThresholdPercent",
        ge=0,
        le=100,
        description="Disk usage percent image garbage collection frees down to.",
        json_schema_extra={"format": "int32"},
    )
    topology_manager_policy: Literal["restricted", "best-effort", "none", "single-numa-node"] = (
        Field("none", description="The topology manager policy.")
    )
    allowed_unsafe_sysctls: list[str] = Field(
        default_factory=list, description="Unsafe sysctls (or patterns) pods may set."
    )
    container_log_max_size: str = Field(
        "50Mi",
        pattern=_SIZE_PATTERN,
        description="The largest a container log file grows before rotation.",
    )
    container_log_max_files: int = Field(
        5,
        ge=2,
        description="How many rotated log files to keep per container.",
        json_schema_extra={"format": "int32"},
    )
    pod_pids_limit: int | None = Field(
        None, description="The most processes a pod may run.", json_schema_extra={"format": "int64"}
    )
    fail_swap_on: bool | None = Field(
        None, description="Refuse to start the kubelet when swap is enabled."
    )


def _both(first: str, second: str, op: str, message: str) -> Rule:
    return Rule(
        f"has(self.{first}) && has(self.{second}) ? self.{first} {op} self.{second} : true",
        message,
    )


_PORTS = "self.netIPv4IPLocalPortRange.split(' ')"


class SysctlConfiguration(KubeModel):
    """Sysctls of the nodes (AKS's custom node configuration), each within AKS's bounds."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            _both("netCoreRmemDefault", "netCoreRmemMax", "<=",
                  "netCoreRmemDefault must be <= netCoreRmemMax"),
            _both("netCoreWmemDefault", "netCoreWmemMax", "<=",
                  "netCoreWmemDefault must be <= netCoreWmemMax"),
            _both("netIPv4NeighDefaultGcThresh1", "netIPv4NeighDefaultGcThresh2", "<=",
                  "netIPv4NeighDefaultGcThresh1 must be <= netIPv4NeighDefaultGcThresh2"),
            _both("netIPv4NeighDefaultGcThresh2", "netIPv4NeighDefaultGcThresh3", "<=",
                  "netIPv4NeighDefaultGcThresh2 must be <= netIPv4NeighDefaultGcThresh3"),
            Rule(
                f"!has(self.netIPv4IPLocalPortRange) || (int({_PORTS}[0]) >= 1024 && "
                f"int({_PORTS}[0]) <= 60999)",
                "netIPv4IPLocalPortRange first port must be in [1024, 60999]",
            ),
            Rule(
                f"!has(self.netIPv4IPLocalPortRange) || (int({_PORTS}[1]) >= 32768 && "
                f"int({_PORTS}[1]) <= 65535)",
                "netIPv4IPLocalPortRange last port must be in [32768, 65535]",
            ),
            Rule(
                f"!has(self.netIPv4IPLocalPortRange) || int({_PORTS}[0]) <= int({_PORTS}[1])",
                "netIPv4IPLocalPortRange first port must be <= last port",
            ),
        )
    )

    fs_aio_max_nr: int | None = Field(
        None,
        alias="fsAioMaxNr",
        ge=65536,
        le=6553500,
        description="The most asynchronous I/O requests (fs.aio-max-nr).",
        json_schema_extra={"format": "int32"},
    )
    fs_file_max: int | None = Field(
        None,
        alias="fsFileMax",
        ge=8192,
        le=12000500,
        description="The most file handles the kernel allocates (fs.file-max).",
        json_schema_extra={"format": "int32"},
    )
    fs_inotify_max_user_watches: int | None = Field(
        None,
        alias="fsInotifyMaxUserWatches",
        ge=781250,
        le=2097152,
        description="The most inotify watches per user (fs.inotify.max_user_watches).",
        json_schema_extra={"format": "int32"},
    )
    fs_nr_open: int | None = Field(
        None,
        alias="fsNrOpen",
        ge=8192,
        le=20000500,
        description="The most file handles a process may allocate (fs.nr_open).",
        json_schema_extra={"format": "int32"},
    )
    kernel_threads_max: int | None = Field(
        None,
        alias="kernelThreadsMax",
        ge=20,
        le=513785,
        description="The most threads the kernel creates (kernel.threads-max).",
        json_schema_extra={"format": "int32"},
    )
    net_core_netdev_max_backlog: int | None = Field(
        None,
        alias="netCoreNetdevMaxBacklog",
        ge=1000,
        le=3240000,
        description="The most packets queued on the input side (net.core.netdev_max_backlog).",
        json_schema_extra={"format": "int32"},
    )
    net_core_optmem_max: int | None = Field(
        None,
        alias="netCoreOptmemMax",
        ge=20480,
        le=4194304,
        description="The largest ancillary buffer per socket (net.core.optmem_max).",
        json_schema_extra={"format": "int32"},
    )
    net_core_rmem_default: int | None = Field(
        None,
        alias="netCoreRmemDefault",
        ge=212992,
        le=134217728,
        description="The default receive buffer size in bytes (net.core.rmem_default).",
        json_schema_extra={"format": "int32"},
    )
    net_core_rmem_max: int | None = Field(
        None,
        alias="netCoreRmemMax",
        ge=212992,
        le=134217728,
        description="The largest receive buffer size in bytes (net.core.rmem_max).",
        json_schema_extra={"format": "int32"},
    )
    net_core_somaxconn: int | None = Field(
        None,
        alias="netCoreSomaxconn",
        ge=4096,
        le=3240000,
        description="The most queued connection requests per listening socket "
        "(net.core.somaxconn).",
        json_schema_extra={"format": "int32"},
    )
    net_core_wmem_default: int | None = Field(
        None,
        alias="netCoreWmemDefault",
        ge=212992,
        le=134217728,
        description="The default send buffer size in bytes (net.core.wmem_default).",
        json_schema_extra={"format": "int32"},
    )
    net_core_wmem_max: int | None = Field(
        None,
        alias="netCoreWmemMax",
        ge=212992,
        le=134217728,
        description="The largest send buffer size in bytes (net.core.wmem_max).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_neigh_default_gc_thresh1: int | None = Field(
        None,
        alias="netIPv4NeighDefaultGcThresh1",
        ge=128,
        le=80000,
        description="The fewest entries in the ARP cache (net.ipv4.neigh.default.gc_thresh1).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_neigh_default_gc_thresh2: int | None = Field(
        None,
        alias="netIPv4NeighDefaultGcThresh2",
        ge=512,
        le=90000,
        description="The soft maximum of ARP cache entries (net.ipv4.neigh.default.gc_thresh2).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_neigh_default_gc_thresh3: int | None = Field(
        None,
        alias="netIPv4NeighDefaultGcThresh3",
        ge=1024,
        le=100000,
        description="The hard maximum of ARP cache entries (net.ipv4.neigh.default.gc_thresh3).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_tcp_fin_timeout: int | None = Field(
        None,
        alias="netIPv4TCPFinTimeout",
        ge=5,
        le=120,
        description="Seconds an orphaned connection stays in FIN_WAIT_2 "
        "(net.ipv4.tcp_fin_timeout).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_tcp_keepalive_probes: int | None = Field(
        None,
        alias="netIPv4TCPKeepaliveProbes",
        ge=1,
        le=15,
        description="Keepalive probes before a connection is broken "
        "(net.ipv4.tcp_keepalive_probes).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_tcp_keepalive_time: int | None = Field(
        None,
        alias="netIPv4TCPKeepaliveTime",
        ge=30,
        le=432000,
        description="Seconds between keepalive probes (net.ipv4.tcp_keepalive_time).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_tcp_max_syn_backlog: int | None = Field(
        None,
        alias="netIPv4TCPMaxSynBacklog",
        ge=128,
        le=3240000,
        description="The most queued unacknowledged connection requests "
        "(net.ipv4.tcp_max_syn_backlog).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_tcp_max_tw_buckets: int | None = Field(
        None,
        alias="netIPv4TCPMaxTwBuckets",
        ge=8000,
        le=1440000,
        description="The most sockets in TIME_WAIT (net.ipv4.tcp_max_tw_buckets).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_tcp_keepalive_intvl: int | None = Field(
        None,
        alias="netIPv4TCPKeepaliveIntvl",
        ge=10,
        le=90,
        description="Seconds between unanswered keepalive probes (net.ipv4.tcp_keepalive_intvl).",
        json_schema_extra={"format": "int32"},
    )
    net_netfilter_nf_conntrack_buckets: int | None = Field(
        None,
        alias="netNetfilterNfConntrackBuckets",
        ge=65536,
        le=524288,
        description="The size of the connection tracking hash table "
        "(net.netfilter.nf_conntrack_buckets).",
        json_schema_extra={"format": "int32"},
    )
    net_netfilter_nf_conntrack_max: int | None = Field(
        None,
        alias="netNetfilterNfConntrackMax",
        ge=131072,
        le=2097152,
        description="The most tracked connections (net.netfilter.nf_conntrack_max).",
        json_schema_extra={"format": "int32"},
    )
    vm_max_map_count: int | None = Field(
        None,
        alias="vmMaxMapCount",
        ge=65530,
        le=262144,
        description="The most memory map areas per process (vm.max_map_count).",
        json_schema_extra={"format": "int32"},
    )
    vm_swappiness: int | None = Field(
        None,
        alias="vmSwappiness",
        ge=0,
        le=100,
        description="How eagerly the kernel swaps (vm.swappiness).",
        json_schema_extra={"format": "int32"},
    )
    vm_vfs_cache_pressure: int | None = Field(
        None,
        alias="vmVfsCachePressure",
        ge=0,
        le=100,
        description="How eagerly the kernel reclaims directory and inode caches "
        "(vm.vfs_cache_pressure).",
        json_schema_extra={"format": "int32"},
    )
    net_ipv4_ip_local_port_range: str | None = Field(
        None, alias="netIPv4IPLocalPortRange", pattern=go_pattern(r"^\d+ \d+$"),
        description="The local port range, 'first last' (net.ipv4.ip_local_port_range).",
    )
    net_ipv4_tcp_tw_reuse: bool | None = Field(
        None, alias="netIPv4TCPTwReuse",
        description="Reuse TIME_WAIT sockets for new connections (net.ipv4.tcp_tw_reuse).",
    )


#: SysctlConfiguration attribute -> the kernel parameter it sets
SYSCTL_KEYS: Final = {
    "fs_aio_max_nr": "fs.aio-max-nr",
    "fs_file_max": "fs.file-max",
    "fs_inotify_max_user_watches": "fs.inotify.max_user_watches",
    "fs_nr_open": "fs.nr_open",
    "kernel_threads_max": "kernel.threads-max",
    "net_core_netdev_max_backlog": "net.core.netdev_max_backlog",
    "net_core_optmem_max": "net.core.optmem_max",
    "net_core_rmem_default": "net.core.rmem_default",
    "net_core_rmem_max": "net.core.rmem_max",
    "net_core_somaxconn": "net.core.somaxconn",
    "net_core_wmem_default": "net.core.wmem_default",
    "net_core_wmem_max": "net.core.wmem_max",
    "net_ipv4_neigh_default_gc_thresh1": "net.ipv4.neigh.default.gc_thresh1",
    "net_ipv4_neigh_default_gc_thresh2": "net.ipv4.neigh.default.gc_thresh2",
    "net_ipv4_neigh_default_gc_thresh3": "net.ipv4.neigh.default.gc_thresh3",
    "net_ipv4_tcp_fin_timeout": "net.ipv4.tcp_fin_timeout",
    "net_ipv4_tcp_keepalive_probes": "net.ipv4.tcp_keepalive_probes",
    "net_ipv4_tcp_keepalive_time": "net.ipv4.tcp_keepalive_time",
    "net_ipv4_tcp_max_syn_backlog": "net.ipv4.tcp_max_syn_backlog",
    "net_ipv4_tcp_max_tw_buckets": "net.ipv4.tcp_max_tw_buckets",
    "net_ipv4_tcp_keepalive_intvl": "net.ipv4.tcp_keepalive_intvl",
    "net_netfilter_nf_conntrack_buckets": "net.netfilter.nf_conntrack_buckets",
    "net_netfilter_nf_conntrack_max": "net.netfilter.nf_conntrack_max",
    "vm_max_map_count": "vm.max_map_count",
    "vm_swappiness": "vm.swappiness",
    "vm_vfs_cache_pressure": "vm.vfs_cache_pressure",
    "net_ipv4_ip_local_port_range": "net.ipv4.ip_local_port_range",
    "net_ipv4_tcp_tw_reuse": "net.ipv4.tcp_tw_reuse",
}


class LinuxOSConfiguration(KubeModel):
    """OS settings of the nodes (AKS's custom Linux OS configuration)."""

    swap_file_size: str | None = Field(
        None, pattern=_SIZE_PATTERN,
        description="A swap file of this size on each node (e.g. 1500Mi, 2Gi; whole MiB).",
    )
    sysctls: SysctlConfiguration | None = Field(None, description="Sysctls of the nodes.")
    transparent_huge_page_defrag: (
        Literal["always", "defer", "defer+madvise", "madvise", "never"] | None
    ) = Field(None, description="/sys/kernel/mm/transparent_hugepage/defrag.")
    transparent_huge_page_enabled: Literal["always", "madvise", "never"] | None = Field(
        None, description="/sys/kernel/mm/transparent_hugepage/enabled."
    )


_ZONE_PATTERN = (
    r"^(\.|[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?)$"
)


class LocalDNSZoneOverride(KubeModel):
    """How LocalDNS serves one DNS zone."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "!(self.zone.endsWith('cluster.local') && self.forwardDestination == 'VnetDNS')",
                "'cluster.local' cannot be forwarded to VnetDNS",
            ),
            Rule(
                "!(self.serveStale == 'Verify' && self.protocol == 'ForceTCP')",
                "serveStale Verify cannot be used with protocol ForceTCP",
            ),
        )
    )

    zone: str = Field(min_length=1, max_length=254, pattern=_ZONE_PATTERN,
                      description="The DNS zone (e.g. '.', 'cluster.local').")
    query_logging: Literal["Error", "Log"] = Field(description="Query log level.")
    protocol: Literal["PreferUDP", "ForceTCP"] = Field(
        description="The protocol to the upstream DNS server."
    )
    forward_destination: Literal["ClusterCoreDNS", "VnetDNS"] = Field(
        description="Where queries are forwarded."
    )
    forward_policy: Literal["Sequential", "RoundRobin", "Random"] = Field(
        description="How the upstream DNS server is picked."
    )
    max_concurrent: int = Field(ge=0, description="The most concurrent queries.",
                                json_schema_extra={"format": "int32"})
    cache_duration: str = Field(pattern=DURATION_PATTERN, description="The cache's max TTL.")
    serve_stale_duration: str = Field(pattern=DURATION_PATTERN,
                                      description="How long stale data is served.")
    serve_stale: Literal["Verify", "Immediate", "Disable"] = Field(
        description="The policy for serving stale data."
    )


_REQUIRED_ZONES = Rule(
    "['.', 'cluster.local'].all(z, self.exists(x, x.zone == z))",
    "must contain required zones '.' and 'cluster.local'",
)


class LocalDNS(KubeModel):
    """The per-node local DNS (AKS's LocalDNS). karpy's bootstrap does not configure it
    yet: mode Required is reported on the class's status (ValidationSucceeded False)."""

    mode: Literal["Preferred", "Required", "Disabled"] = Field(
        description="Preferred: where supported; Required; Disabled."
    )
    vnet_dns_overrides: Annotated[
        list[LocalDNSZoneOverride],
        Field(
            max_length=100,
            json_schema_extra=validations(
                _REQUIRED_ZONES,
                Rule(
                    "!self.exists(x, x.zone == '.' && x.forwardDestination == 'ClusterCoreDNS')",
                    "root zone '.' cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides",
                ),
                Rule(
                    "!self.exists(x, x.zone != '.' && !x.zone.endsWith('cluster.local') && "
                    "x.forwardDestination == 'ClusterCoreDNS')",
                    "external domains cannot be forwarded to ClusterCoreDNS from "
                    "vnetDNSOverrides",
                ),
                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["zone"]},
            ),
        ),
    ] = Field(alias="vnetDNSOverrides", description="Overrides for VnetDNS traffic (pods "
              "with dnsPolicy Default, the kubelet).")
    kube_dns_overrides: Annotated[
        list[LocalDNSZoneOverride],
        Field(
            max_length=100,
            json_schema_extra=validations(
                _REQUIRED_ZONES,
                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["zone"]},
            ),
        ),
    ] = Field(alias="kubeDNSOverrides", description="Overrides for KubeDNS traffic (pods "
              "with dnsPolicy ClusterFirst).")


class TrustedLaunch(KubeModel):
    """Trusted launch (secure boot and vTPM) of the VMs."""

    secure_boot: bool | None = Field(None, description="Enable secure boot.")
    vtpm: bool | None = Field(None, description="Enable the virtual TPM.")


class Security(KubeModel):
    """Security settings of the VMs."""

    encryption_at_host: bool | None = Field(
        None, description="Encrypt temporary disks and caches at the host."
    )
    trusted_launch: TrustedLaunch | None = Field(None, description="Trusted launch settings.")


class ArtifactStreaming(KubeModel):
    """Artifact streaming (lazy image pulls) on the nodes."""

    enabled: bool | None = Field(None, description="Enable artifact streaming.")


class GPU(KubeModel):
    """GPU driver handling on GPU nodes."""

    mode: Literal["Driver", "None"] = Field(
        "Driver", description="Driver: install the GPU driver; None: bring your own."
    )


class AKSNodeClassSpec(KubeModel):
    """How to launch AKS nodes for the NodePools that reference this class."""

    vnet_subnet_id: str | None = Field(
        None,
        alias="vnetSubnetID",
        pattern=(
            r"(?i)^\/subscriptions\/[^\/]+\/resourceGroups\/[a-zA-Z0-9_\-().]{0,89}"
            r"[a-zA-Z0-9_\-()]\/providers\/Microsoft\.Network\/virtualNetworks\/[^\/]+"
            r"\/subnets\/[^\/]+$"
        ),
        description="The subnet's resource ID (default: the cluster's subnet).",
    )
    os_disk_size_gb: int = Field(
        128,
        alias="osDiskSizeGB",
        ge=30,
        le=2048,
        description="The OS disk size in GB (30-2048).",
        json_schema_extra={"format": "int32"},
    )
    image_family: ImageFamily = Field(
        "Ubuntu", description="The node image: Ubuntu, Ubuntu2204, Ubuntu2404 or AzureLinux."
    )
    fips_mode: Literal["FIPS", "Disabled"] | None = Field(
        None, description="FIPS: use a FIPS-compliant image."
    )
    tags: Annotated[
        dict[str, str],
        Field(
            json_schema_extra=validations(
                Rule("self.all(k, size(k) <= 512)", "tags keys must be less than 512 characters"),
                Rule(
                    "self.all(k, !k.matches('[<>%&?]'))",
                    "tags keys must not contain '<', '>', '%', '&', or '?'",
                ),
                Rule("self.all(k, !k.contains('\\\\'))", "tags keys must not contain '\\'"),
                Rule(
                    "self.all(k, size(self[k]) <= 256)",
                    "tags values must be less than 256 characters",
                ),
            )
        ),
    ] = Field(default_factory=dict, description="Azure tags for the VMs and their resources.")
    kubelet: KubeletConfiguration | None = Field(None, description="Kubelet settings.")
    max_pods: int | None = Field(
        None,
        ge=10,
        le=250,
        description="The most pods a node runs (10-250).",
        json_schema_extra={"format": "int32"},
    )
    security: Security | None = Field(None, description="Security settings.")
    artifact_streaming: ArtifactStreaming | None = Field(
        None, description="Artifact streaming settings."
    )
    gpu: GPU | None = Field(None, description="GPU settings.")
    local_dns: LocalDNS | None = Field(
        None, alias="localDNS", description="The per-node local DNS (AKS's LocalDNS)."
    )
    linux_os_config: LinuxOSConfiguration | None = Field(
        None, alias="linuxOSConfig", description="OS settings of the nodes: sysctls, "
        "transparent huge pages, a swap file."
    )

    @model_validator(mode="after")
    def _swap_needs_fail_swap_on_false(self) -> Self:
        # The spec's CEL rule (below, on AKSNodeClass.spec) read by the model as well, so
        # simulate and convert refuse what the API server refuses.
        swap = self.linux_os_config is not None and self.linux_os_config.swap_file_size
        if swap and (self.kubelet is None or self.kubelet.fail_swap_on is not False):
            raise ValueError(
                "kubelet.failSwapOn must be set to false when linuxOSConfig.swapFileSize "
                "is specified"
            )
        return self


class NodeImage(KubeModel):
    """A node image the class resolved to, with the instance types it suits."""

    id: str = Field(description="The image ID.")
    requirements: list[NodeSelectorRequirement] = Field(
        description="Requirements an instance type must meet to use this image."
    )


class AKSNodeClassStatus(KubeModel):
    """What the class resolved to, and readiness."""

    images: list[NodeImage] = Field(default_factory=list, description="The images in use.")
    kubernetes_version: str | None = Field(
        None, description="The Kubernetes version the nodes run."
    )
    conditions: ConditionList = Field(
        default_factory=list,
        description="Ready, ImagesReady, KubernetesVersionReady, SubnetsReady, "
        "ValidationSucceeded.",
    )


_FIPS = "has(self.fipsMode) && self.fipsMode == 'FIPS'"
_TRUSTED_LAUNCH_ON = (
    "has(self.security) && has(self.security.trustedLaunch) && "
    "((has(self.security.trustedLaunch.vtpm) && self.security.trustedLaunch.vtpm) || "
    "(has(self.security.trustedLaunch.secureBoot) && self.security.trustedLaunch.secureBoot))"
)


class AKSNodeClass(Resource):
    """Azure-specific settings for launching AKS nodes (karpenter.azure.com/v1beta1)."""

    crd = CRDInfo(
        group=GROUP,
        version="v1beta1",
        kind="AKSNodeClass",
        plural="aksnodeclasses",
        singular="aksnodeclass",
        categories=("karpenter", "nap"),
        short_names=("aksnc", "aksncs"),
        # Azure's published examples still use v1alpha2; it is served, v1beta1 stored
        served_versions=("v1alpha2",),
        printer_columns=(
            PrinterColumn("Ready", ".status.conditions[?(@.type=='Ready')].status"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
            PrinterColumn("ImageFamily", ".spec.imageFamily", priority=1),
        ),
    )

    api_version: Literal["karpenter.azure.com/v1beta1"] = Field(
        "karpenter.azure.com/v1beta1", alias="apiVersion"
    )
    kind: Literal["AKSNodeClass"] = "AKSNodeClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AKSNodeClassSpec = Field(
        default_factory=AKSNodeClassSpec,
        description="How to launch the nodes.",
        json_schema_extra=validations(
            Rule(
                f"{_FIPS} ? (has(self.imageFamily) && self.imageFamily != 'Ubuntu2404') : true",
                "FIPS is not yet supported for Ubuntu2404",
            ),
            Rule(
                f"{_FIPS} ? (has(self.imageFamily) && (self.imageFamily != 'Ubuntu2204' || "
                f"({_TRUSTED_LAUNCH_ON}))) : true",
                "TrustedLaunch is required for FIPS support with Ubuntu2204",
            ),
            Rule(
                f"{_FIPS} && {_TRUSTED_LAUNCH_ON} ? (!has(self.imageFamily) || "
                "self.imageFamily == 'Ubuntu' || self.imageFamily == 'Ubuntu2204') : true",
                "TrustedLaunch with FIPSMode FIPS is only supported for Ubuntu and Ubuntu2204",
            ),
            # Karpenter-Azure's rule (karpenter-provider-azure@00ae112, v1beta1 spec): a
            # swap file is useless on a kubelet that refuses to start with swap on.
            Rule(
                "!has(self.linuxOSConfig) || !has(self.linuxOSConfig.swapFileSize) || "
                "(has(self.kubelet) && has(self.kubelet.failSwapOn) && "
                "self.kubelet.failSwapOn == false)",
                "kubelet.failSwapOn must be set to false when linuxOSConfig.swapFileSize is "
                "specified",
            ),
        ),
    )
    status: AKSNodeClassStatus = Field(default_factory=AKSNodeClassStatus)

    @property
    def secure_boot_enabled(self) -> bool:
        """``spec.security.trustedLaunch.secureBoot`` (default false)."""
        security = self.spec.security
        return bool(security and security.trusted_launch and security.trusted_launch.secure_boot)

    @property
    def vtpm_enabled(self) -> bool:
        """``spec.security.trustedLaunch.vtpm`` (default false)."""
        security = self.spec.security
        return bool(security and security.trusted_launch and security.trusted_launch.vtpm)

    @property
    def trusted_launch_enabled(self) -> bool:
        """True when secure boot or the vTPM is on: the VMs are Trusted Launch VMs, booted
        from a trusted-launch image."""
        return self.secure_boot_enabled or self.vtpm_enabled

    def status_conditions(
        self, *, now: Callable[[], datetime] = utc_now
    ) -> ConditionSet[Condition]:
        """Ready summarises images, Kubernetes version, subnets and validation."""
        return ConditionSet.of(
            self.metadata,
            self.status.conditions,
            Condition,
            dependents=(
                CONDITION_IMAGES_READY,
                CONDITION_KUBERNETES_VERSION_READY,
                CONDITION_SUBNETS_READY,
                CONDITION_VALIDATION_SUCCEEDED,
            ),
            now=now,
        )
