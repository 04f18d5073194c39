"""The kubelet's side of AKS node bootstrapping: the node labels and kubelet flags a node
is launched with, as Karpenter's Azure provider computes them in its default (AKS
scriptless) provision mode.

- **Labels**: AKS's own node labels (role, cluster, mode, priority, OS SKU, the Azure CNI
  overlay and Cilium labels, ...), then the NodeClaim's launched labels (which win), less
  those the kubelet may not set on itself (``kubernetes.io`` / ``k8s.io`` namespaces other
  than ``kubelet.``/``node.`` and the well-known kubelet labels), which the API server
  would refuse.
- **Flags**: AKS's base kubelet flags for the Kubernetes version (credential provider,
  cloud config, pause image), ``--register-with-taints``, and the node's kubelet
  configuration: max pods, kube/system reserved and the eviction threshold of the
  instance type, the AKSNodeClass's ``kubelet`` settings (image GC thresholds, CPU
  manager, log rotation, pids, unsafe sysctls) and the cluster DNS IP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from karpy.apis import Taint
from karpy.scheduling import Overhead
from karpy.scheduling import resources as res
from karpy_azure._images import resolve_family
from karpy_azure._instancetypes import cluster_label, os_sku
from karpy_azure._settings import AzureSettings
from karpy_azure.apis import AKSNodeClass, KubeletConfiguration
from karpy_azure.apis import labels as az

__all__ = [
    "DEFAULT_CLUSTER_DNS",
    "KubeletParams",
    "aks_base_labels",
    "kubelet_can_set",
    "kubelet_flags",
    "kubernetes_minor",
    "node_labels",
    "taint_flag",
]

DEFAULT_CLUSTER_DNS: Final = "10.0.0.10"
PAUSE_IMAGE: Final = "mcr.microsoft.com/oss/kubernetes/pause:3.6"

AKS_LABEL_ROLE: Final = az.AKS_LABEL_DOMAIN + "/role"
AKS_LABEL_KUBELET_IDENTITY: Final = az.AKS_LABEL_DOMAIN + "/kubelet-identity-client-id"
AKS_LABEL_OS_SKU_REQUESTED: Final = az.AKS_LABEL_DOMAIN + "/os-sku-requested"
AKS_LABEL_OS_SKU_EFFECTIVE: Final = az.AKS_LABEL_DOMAIN + "/os-sku-effective"
AKS_LABEL_SUBNET_NAME: Final = az.AKS_LABEL_DOMAIN + "/network-subnet"
AKS_LABEL_VNET_GUID: Final = az.AKS_LABEL_DOMAIN + "/nodenetwork-vnetguid"
AKS_LABEL_CNI_OVERLAY: Final = az.AKS_LABEL_DOMAIN + "/azure-cni-overlay"
AKS_LABEL_POD_NETWORK_TYPE: Final = az.AKS_LABEL_DOMAIN + "/podnetwork-type"
AKS_LABEL_STATELESS_CNI: Final = az.AKS_LABEL_DOMAIN + "/network-stateless-cni"
AKS_LABEL_LOCALDNS_STATE: Final = az.AKS_LABEL_DOMAIN + "/localdns-state"
AKS_LABEL_ARTIFACT_STREAMING: Final = az.AKS_LABEL_DOMAIN + "/artifactstreaming-enabled"
LABEL_DO_NOT_SYNC_TAINTS: Final = "karpenter.sh/do-not-sync-taints"

# labels the kubelet sets on its own Node (NodeRestriction lets it)
_KUBELET_LABELS: Final = frozenset({
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
})  # fmt: skip
_KUBELET_NAMESPACES: Final = ("kubelet.kubernetes.io", "node.kubernetes.io")

# the name AKS gives what an image family boots (os-sku-effective)


def kubernetes_minor(version: str) -> int:
    """The minor of ``1.31.2`` / ``v1.31.2``; ValueError when it is not a version."""
    parts = version.strip().removeprefix("v").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"{version!r} is not a Kubernetes version")
    return int(parts[1])


def kubelet_can_set(key: str) -> bool:
    """Whether the kubelet may label its own Node with ``key`` (the NodeRestriction
    admission plugin refuses other ``kubernetes.io``/``k8s.io`` labels)."""
    if key in _KUBELET_LABELS:
        return True
    namespace = key.split("/", 1)[0] if "/" in key else ""
    kubernetes = any(
        namespace == d or namespace.endswith("." + d) for d in ("kubernetes.io", "k8s.io")
    )
    if not kubernetes:
        return True
    return any(namespace == n or namespace.endswith("." + n) for n in _KUBELET_NAMESPACES)


def effective_os_sku(node_class: AKSNodeClass, kubernetes_version: str) -> str:
    """The OS release the class's image family resolves to at ``kubernetes_version``
    (``kubernetes.azure.com/os-sku-effective``: Ubuntu2204, Ubuntu2404, AzureLinux2,
    AzureLinux3; ``Ubuntu`` for the FIPS-only Ubuntu 20.04, as Karpenter-Azure names it)."""
    release = resolve_family(
        node_class.spec.image_family,
        kubernetes_version=kubernetes_version,
        fips=node_class.spec.fips_mode == "FIPS",
        trusted_launch=node_class.trusted_launch_enabled,
    )
    return "Ubuntu" if release == "Ubuntu2004" else release


def aks_base_labels(
    settings: AzureSettings, node_class: AKSNodeClass, *, subnet_id: str, kubernetes_version: str
) -> dict[str, str]:
    """The labels AKS puts on every node of the cluster, as Karpenter's Azure provider
    passes them to the kubelet."""
    family = node_class.spec.image_family
    labels = {
        AKS_LABEL_ROLE: "agent",
        az.AKS_LABEL_CLUSTER: cluster_label(settings.node_resource_group),
        AKS_LABEL_KUBELET_IDENTITY: settings.kubelet_identity_client_id,
        az.AKS_LABEL_MODE: az.MODE_USER,
        LABEL_DO_NOT_SYNC_TAINTS: "true",
        az.AKS_LABEL_SCALE_SET_PRIORITY: az.PRIORITY_REGULAR,
        az.AKS_LABEL_PRIORITY: az.PRIORITY_REGULAR,
        az.AKS_LABEL_OS_SKU: os_sku(family),
        AKS_LABEL_OS_SKU_REQUESTED: family,
        AKS_LABEL_OS_SKU_EFFECTIVE: effective_os_sku(node_class, kubernetes_version),
        # karpy does not configure LocalDNS
        AKS_LABEL_LOCALDNS_STATE: "disabled",
    }
    if node_class.spec.fips_mode == "FIPS":
        labels[az.AKS_LABEL_FIPS_ENABLED] = "true"
    if settings.network_plugin == "azure" and settings.network_plugin_mode == "overlay":
        labels[AKS_LABEL_SUBNET_NAME] = subnet_id.rstrip("/").rsplit("/", 1)[-1]
        labels[AKS_LABEL_VNET_GUID] = settings.vnet_guid
        labels[AKS_LABEL_CNI_OVERLAY] = "true"
        labels[AKS_LABEL_POD_NETWORK_TYPE] = "overlay"
        # Azure CNI is stateless from Kubernetes 1.34 on
        labels[AKS_LABEL_STATELESS_CNI] = (
            "true" if kubernetes_minor(kubernetes_version) >= 34 else "false"
        )
    if settings.network_dataplane == "cilium":
        labels[az.AKS_LABEL_EBPF_DATAPLANE] = "cilium"
    streaming = node_class.spec.artifact_streaming
    if streaming is not None and streaming.enabled:
        labels[AKS_LABEL_ARTIFACT_STREAMING] = "true"
    return labels


def node_labels(base: Mapping[str, str], launched: Mapping[str, str]) -> dict[str, str]:
    """``--node-labels``: AKS's base labels overridden by the launched NodeClaim's, keeping
    only those the kubelet may set."""
    merged = {**base, **launched}
    return {k: v for k, v in sorted(merged.items()) if kubelet_can_set(k)}


def taint_flag(taints: Iterable[Taint]) -> str:
    """``--register-with-taints``: ``key=value:Effect`` (``key:Effect`` without a value)."""
    return ",".join(
        f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in taints
    )


@dataclass(frozen=True, kw_only=True)
class KubeletParams:
    """What shapes a node's kubelet flags."""

    kubernetes_version: str
    max_pods: int
    overhead: Overhead
    taints: tuple[Taint, ...] = ()
    kubelet: KubeletConfiguration | None = None
    cluster_dns: str = ""
    #: the node has a swap file (linuxOSConfig.swapFileSize)
    swap_file: bool = False


def _quantities(values: Mapping[str, int], sep: str) -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(res.format_resource_list(values).items()))


def _base_flags(minor: int) -> dict[str, str]:
    flags = {
        "--address": "0.0.0.0",
        "--anonymous-auth": "false",
        "--authentication-token-webhook": "true",
        "--authorization-mode": "Webhook",
        "--cgroups-per-qos": "true",
        "--client-ca-file": "/etc/kubernetes/certs/ca.crt",
        "--cloud-config": "/etc/kubernetes/azure.json",
        "--cloud-provider": "external",
        "--cluster-dns": DEFAULT_CLUSTER_DNS,
        "--cluster-domain": "cluster.local",
        "--enforce-node-allocatable": "pods",
        "--event-qps": "0",
        "--eviction-hard": "memory.available<750Mi,nodefs.available<10%,nodefs.inodesFree<5%",
        "--image-gc-high-threshold": "85",
        "--image-gc-low-threshold": "80",
        "--kubeconfig": "/var/lib/kubelet/kubeconfig",
        "--max-pods": "110",
        "--node-status-update-frequency": "10s",
        "--pod-infra-container-image": PAUSE_IMAGE,
        "--pod-manifest-path": "/etc/kubernetes/manifests",
        "--pod-max-pids": "-1",
        "--protect-kernel-defaults": "true",
        "--read-only-port": "0",
        "--resolv-conf": "/run/systemd/resolve/resolv.conf",
        "--rotate-certificates": "true",
        "--streaming-connection-idle-timeout": "4h",
        "--tls-cert-file": "/etc/kubernetes/certs/kubeletserver.crt",
        "--tls-cipher-suites": ",".join((
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_RSA_WITH_AES_256_GCM_SHA384", "TLS_RSA_WITH_AES_128_GCM_SHA256",
        )),
        "--tls-private-key-file": "/etc/kubernetes/certs/kubeletserver.key",
    }  # fmt: skip
    # flags the kubelet dropped or AKS moved, by version
    if minor < 31:
        flags["--keep-terminated-pod-volumes"] = "false"
    if minor >= 34:
        del flags["--cloud-config"]
    if minor >= 35:
        del flags["--pod-infra-container-image"]
    if minor >= 30:
        # the out-of-tree ACR credential provider (its binary: credential_provider_url)
        flags["--image-credential-provider-config"] = (
            "/var/lib/kubelet/credential-provider-config.yaml"
        )
        flags["--image-credential-provider-bin-dir"] = "/var/lib/kubelet/credential-provider"
    else:
        flags["--feature-gates"] = "DisableKubeletCloudCredentialProviders=false"
        flags["--azure-container-registry-config"] = "/etc/kubernetes/azure.json"
    return flags


def kubelet_flags(params: KubeletParams) -> dict[str, str]:
    """The kubelet's flags (name -> value), see the module docstring."""
    flags = _base_flags(kubernetes_minor(params.kubernetes_version))
    if params.taints:
        flags["--register-with-taints"] = taint_flag(params.taints)
    flags["--max-pods"] = str(params.max_pods)
    overhead = params.overhead
    # AKS reserves nothing for the system; Karpenter's Azure provider still passes its
    # zero CPU and memory (so the flag reads cpu=0,memory=0), as karpy does
    flags["--system-reserved"] = _quantities(
        {res.CPU: 0, res.MEMORY: 0, **overhead.system_reserved}, "="
    )
    if overhead.kube_reserved:
        flags["--kube-reserved"] = _quantities(overhead.kube_reserved, "=")
    if overhead.eviction_threshold.get(res.MEMORY):
        # Karpenter's Azure provider replaces AKS's default with the instance type's
        # memory.available threshold (which karpy's allocatable assumes)
        memory = res.format_resource_list({res.MEMORY: overhead.eviction_threshold[res.MEMORY]})
        flags["--eviction-hard"] = f"memory.available<{memory[res.MEMORY]}"
    kubelet = params.kubelet
    if kubelet is not None:
        if kubelet.image_gc_high_threshold_percent is not None:
            flags["--image-gc-high-threshold"] = str(kubelet.image_gc_high_threshold_percent)
        if kubelet.image_gc_low_threshold_percent is not None:
            flags["--image-gc-low-threshold"] = str(kubelet.image_gc_low_threshold_percent)
        flags["--cpu-cfs-quota"] = "true" if kubelet.cpu_cfs_quota else "false"
        if kubelet.cpu_manager_policy:
            flags["--cpu-manager-policy"] = kubelet.cpu_manager_policy
        if kubelet.topology_manager_policy:
            flags["--topology-manager-policy"] = kubelet.topology_manager_policy
        if kubelet.container_log_max_size:
            flags["--container-log-max-size"] = kubelet.container_log_max_size
        flags["--container-log-max-files"] = str(kubelet.container_log_max_files)
        if kubelet.pod_pids_limit is not None:
            flags["--pod-max-pids"] = str(kubelet.pod_pids_limit)
        if kubelet.allowed_unsafe_sysctls:
            flags["--allowed-unsafe-sysctls"] = ",".join(kubelet.allowed_unsafe_sysctls)
        if kubelet.fail_swap_on is not None:
            flags["--fail-swap-on"] = "true" if kubelet.fail_swap_on else "false"
    if params.swap_file and "--fail-swap-on" not in flags:
        # a kubelet with the default failSwapOn does not start on a node with swap
        flags["--fail-swap-on"] = "false"
    if params.cluster_dns:
        flags["--cluster-dns"] = params.cluster_dns
    return flags
