"""AKS node bootstrapping: the provisioning command a node runs to join the cluster, the
way Karpenter's Azure provider builds it for Ubuntu and Azure Linux node images.

AKS node images carry AKS's provisioning scripts (``/opt/azure/containers/
provision_start.sh`` and what it sources); they are driven by shell variables. The
command karpy builds waits for the scripts, exports the variables for this node and runs
them:

- the cluster: API server host name (``clusterEndpoint``), CA (``clusterCABundle``),
  TLS bootstrapping with ``kubeletBootstrapToken``, Kubernetes version (the
  AKSNodeClass's status) with the matching kubelet and ACR credential provider
  downloads;
- the node's kubelet: ``KUBELET_NODE_LABELS`` and ``KUBELET_FLAGS``
  (:mod:`karpy_azure._kubelet`);
- the network: ``NETWORK_PLUGIN`` as AKS's scripts understand it (``none`` under Azure CNI
  overlay, Cilium on the node subnet or no plugin; ``azure`` for Azure CNI with pod IPs
  from the subnet; ``kubenet``), ``NETWORK_POLICY``, subnet/VNet/NSG/route table for the
  cloud provider config (``azure.json``);
- the cloud provider config: subscription, tenant, location, node resource group,
  managed identity (the kubelet identity's client ID), rate limits and backoff;
- containerd's config and the sysctls AKS sets, plus the AKSNodeClass's
  ``linuxOSConfig`` (sysctls, transparent huge pages, a swap file;
  :mod:`karpy_azure._osconfig`).

**Provision modes** (``provisionMode``): ``aksscriptless`` — Karpenter's default — makes
the command the VM's custom data, which cloud-init runs at first boot (provisioning
continues in the background); ``customscript`` runs the same command, to its end, as the
Custom Script Extension (:mod:`karpy_azure._extensions`), so a failed provisioning fails
the launch, and the VM gets no custom data.

GPU nodes: the NVIDIA driver AKS's scripts install (``GPU_NODE``,
``CONFIG_GPU_DRIVER_IF_NEEDED``, ``GPU_DRIVER_VERSION`` / ``_TYPE``, ``GPU_IMAGE_SHA``) and
``nvidia-container-runtime`` as containerd's default, per :mod:`karpy_azure._gpu`.

Artifact streaming (``artifactStreaming.enabled``): ``ARTIFACT_STREAMING_ENABLED=true``,
AKS's own provisioning variable, with which its scripts enable the image's streaming
snapshotter; Karpenter-Azure passes the field only to the node bootstrapping API.

Not done: custom clouds, HTTP proxy, custom CA trust, LocalDNS, Windows.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from karpy_azure._gpu import GpuDriver
from karpy_azure._kubelet import kubernetes_minor
from karpy_azure._osconfig import OSConfig
from karpy_azure._settings import AzureSettings

__all__ = [
    "AKS_MIRROR",
    "BootstrapParams",
    "bootstrap_variables",
    "command_to_execute",
    "containerd_config",
    "credential_provider_url",
    "custom_data",
    "kube_binary_url",
    "network_plugin_for_scripts",
    "provision_command",
]

AKS_MIRROR: Final = "https://acs-mirror.azureedge.net"
AZURE_CNI_VERSION: Final = "1.4.32"
CNI_PLUGINS_VERSION: Final = "1.1.1"
PROVISION_SCRIPT: Final = "/opt/azure/containers/provision.sh"
PROVISION_START: Final = "/opt/azure/containers/provision_start.sh"
# the ACR credential provider release for each Kubernetes minor (it follows
# cloud-provider-azure's releases, not Kubernetes'); newer minors take the last
_CREDENTIAL_PROVIDER: Final = {30: "1.30.12", 31: "1.31.6", 32: "1.32.5"}
_CREDENTIAL_PROVIDER_LATEST: Final = "1.33.0"

# sysctls AKS sets on every node (connection tracking, ARP cache, backlog)
_SYSCTLS: Final = (
    "net.ipv4.tcp_retries2=8",
    "net.core.message_burst=80",
    "net.core.message_cost=40",
    "net.core.somaxconn=16384",
    "net.ipv4.tcp_max_syn_backlog=16384",
    "net.ipv4.neigh.default.gc_thresh1=4096",
    "net.ipv4.neigh.default.gc_thresh2=8192",
    "net.ipv4.neigh.default.gc_thresh3=16384",
)


def kube_binary_url(kubernetes_version: str, arch: str) -> str:
    """Where AKS's scripts download the kubelet from; empty from 1.34, whose images carry
    it."""
    if kubernetes_minor(kubernetes_version) >= 34:
        return ""
    version = kubernetes_version.removeprefix("v")
    return f"{AKS_MIRROR}/kubernetes/v{version}/binaries/kubernetes-node-linux-{arch}.tar.gz"


def credential_provider_url(kubernetes_version: str, arch: str) -> str:
    """The out-of-tree ACR credential provider for 1.30 and later (empty before: the
    kubelet's in-tree provider is used)."""
    minor = kubernetes_minor(kubernetes_version)
    if minor < 30:
        return ""
    version = _CREDENTIAL_PROVIDER.get(minor, _CREDENTIAL_PROVIDER_LATEST)
    return (
        f"{AKS_MIRROR}/cloud-provider-azure/v{version}/binaries/"
        f"azure-acr-credential-provider-linux-{arch}-v{version}.tar.gz"
    )


def network_plugin_for_scripts(settings: AzureSettings) -> str:
    """``NETWORK_PLUGIN`` as AKS's scripts take it: they install Azure CNI only when pods
    take IPs from the node subnet through it; under overlay, Cilium on the node subnet, or
    no plugin the cluster's CNI is installed by its own DaemonSet."""
    if settings.network_plugin == "kubenet":
        return "kubenet"
    if settings.network_plugin == "none":
        return "none"
    if settings.network_plugin_mode == "overlay":
        return "none"
    if settings.network_dataplane == "cilium":
        return "none"
    return "azure"


def containerd_config(*, gpu: bool = False) -> str:
    """containerd's config.toml for the node: runc (systemd cgroups) as the default
    runtime, the pause image, registry mirrors under ``/etc/containerd/certs.d``, metrics
    on :10257."""
    runtime = "nvidia-container-runtime" if gpu else "runc"
    binary = "/usr/bin/nvidia-container-runtime" if gpu else "/usr/bin/runc"
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join((
        "version = 2",
        "oom_score = 0",
        f"[{cri}]",
        '  sandbox_image = "mcr.microsoft.com/oss/kubernetes/pause:3.6"',
        f"  [{cri}.containerd]",
        f'    default_runtime_name = "{runtime}"',
        f"    [{cri}.containerd.runtimes.{runtime}]",
        '      runtime_type = "io.containerd.runc.v2"',
        f"    [{cri}.containerd.runtimes.{runtime}.options]",
        f'      BinaryName = "{binary}"',
        "      SystemdCgroup = true",
        f"    [{cri}.containerd.runtimes.untrusted]",
        '      runtime_type = "io.containerd.runc.v2"',
        f"    [{cri}.containerd.runtimes.untrusted.options]",
        f'      BinaryName = "{binary}"',
        f"  [{cri}.registry]",
        '    config_path = "/etc/containerd/certs.d"',
        f"  [{cri}.registry.headers]",
        '    X-Meta-Source-Client = ["azure/aks"]',
        "[metrics]",
        '  address = "0.0.0.0:10257"',
        "",
    ))  # fmt: skip


def _sysctl_content(extra: Mapping[str, str]) -> str:
    """AKS's sysctls, then the class's (``key=value`` lines; the class's win)."""
    merged = dict(line.split("=", 1) for line in _SYSCTLS)
    merged.update(extra)
    return "".join(f"{key}={value}\n" for key, value in merged.items())


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass(frozen=True, kw_only=True)
class BootstrapParams:
    """What one node's provisioning variables depend on besides the settings."""

    kubernetes_version: str
    arch: str  # amd64 | arm64
    subnet_id: str
    node_labels: Mapping[str, str]
    kubelet_flags: Mapping[str, str]
    #: base64 PEM of the API server's CA
    ca_bundle: str
    network_security_group: str = ""
    route_table: str = ""
    #: the NVIDIA driver AKS's scripts install (:mod:`karpy_azure._gpu`); None: no driver
    gpu_driver: GpuDriver | None = None
    #: the AKSNodeClass's linuxOSConfig (:mod:`karpy_azure._osconfig`)
    os_config: OSConfig = field(default_factory=OSConfig)
    #: ``artifactStreaming.enabled``: AKS's scripts set up the image's streaming snapshotter
    artifact_streaming: bool = False


def _subnet_parts(subnet_id: str) -> tuple[str, str, str]:
    """(resource group, VNet, subnet) of a subnet resource ID."""
    parts = subnet_id.strip("/").split("/")
    # subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<v>/
    # subnets/<n>
    if len(parts) != 10:
        return "", "", ""
    return parts[3], parts[7], parts[9]


def bootstrap_variables(settings: AzureSettings, params: BootstrapParams) -> dict[str, str]:
    """The variables AKS's provisioning scripts read, in the order they are exported."""
    vnet_rg, vnet, subnet = _subnet_parts(params.subnet_id)
    arch = params.arch
    gpu = params.gpu_driver
    osc = params.os_config
    cni_url = (
        f"{AKS_MIRROR}/azure-cni/v{AZURE_CNI_VERSION}/binaries/"
        f"azure-vnet-cni-linux-{arch}-v{AZURE_CNI_VERSION}.tgz"
    )
    plugins_url = (
        f"{AKS_MIRROR}/cni-plugins/v{CNI_PLUGINS_VERSION}/binaries/"
        f"cni-plugins-linux-{arch}-v{CNI_PLUGINS_VERSION}.tgz"
    )
    flags = " ".join(f"{k}={v}" for k, v in sorted(params.kubelet_flags.items()))
    labels = ",".join(f"{k}={v}" for k, v in sorted(params.node_labels.items()))
    variables: dict[str, str] = {
        # who and where
        "ADMINUSER": settings.linux_admin_username,
        "TENANT_ID": settings.tenant_id,
        "SUBSCRIPTION_ID": settings.subscription_id,
        "RESOURCE_GROUP": settings.node_resource_group,
        "LOCATION": settings.location,
        "TARGET_CLOUD": "AzurePublicCloud",
        "TARGET_ENVIRONMENT": "AzurePublicCloud",
        "IS_CUSTOM_CLOUD": "false",
        "CUSTOM_ENV_JSON": "",
        "AZURE_ENVIRONMENT_FILEPATH": "",
        # Kubernetes binaries
        "KUBERNETES_VERSION": params.kubernetes_version.removeprefix("v"),
        "KUBE_BINARY_URL": kube_binary_url(params.kubernetes_version, arch),
        "CREDENTIAL_PROVIDER_DOWNLOAD_URL": credential_provider_url(
            params.kubernetes_version, arch
        ),
        # the images carry these; empty as Karpenter-Azure renders them
        "HYPERKUBE_URL": "",
        "CUSTOM_KUBE_BINARY_URL": "",
        "KUBEPROXY_URL": "",
        "MOBY_VERSION": "",
        "CONTAINERD_VERSION": "",
        "CONTAINERD_PACKAGE_URL": "",
        "CONTAINERD_DOWNLOAD_URL_BASE": "",
        "RUNC_VERSION": "",
        "RUNC_PACKAGE_URL": "",
        "IS_VHD": "true",
        # joining the cluster: TLS bootstrapping with the bootstrap token
        "API_SERVER_NAME": settings.api_server_name,
        "KUBE_CA_CRT": params.ca_bundle,
        "ENABLE_TLS_BOOTSTRAPPING": "true",
        "ENABLE_SECURE_TLS_BOOTSTRAPPING": "false",
        "TLS_BOOTSTRAP_TOKEN": settings.kubelet_bootstrap_token.get_secret_value(),
        # serving certificates stay self-signed, as on Karpenter-Azure's nodes (its
        # template's default for self-hosted Karpenter)
        "ENABLE_KUBELET_SERVING_CERTIFICATE_ROTATION": "false",
        "APISERVER_PUBLIC_KEY": "",
        "KUBELET_CLIENT_CONTENT": "",
        "KUBELET_CLIENT_CERT_CONTENT": "",
        # the kubelet
        "KUBELET_FLAGS": flags,
        "KUBELET_NODE_LABELS": labels,
        "KUBELET_CONFIG_FILE_ENABLED": "false",
        "KUBELET_CONFIG_FILE_CONTENT": "",
        "HAS_KUBELET_DISK_TYPE": "false",
        "NEEDS_CGROUPV2": "true",
        # network
        "NETWORK_PLUGIN": network_plugin_for_scripts(settings),
        "NETWORK_POLICY": settings.network_policy,
        "NETWORK_MODE": "",
        "VNET_CNI_PLUGINS_URL": cni_url,
        "CNI_PLUGINS_URL": plugins_url,
        "ENSURE_NO_DUPE_PROMISCUOUS_BRIDGE": "false",
        "IPV6_DUAL_STACK_ENABLED": "false",
        "DHCPV6_SERVICE_FILEPATH": "",
        "DHCPV6_CONFIG_FILEPATH": "",
        # the cloud provider's azure.json
        "VM_TYPE": "standard",
        "SUBNET": subnet or "aks-subnet",
        "VIRTUAL_NETWORK": vnet,
        "VIRTUAL_NETWORK_RESOURCE_GROUP": vnet_rg,
        "NETWORK_SECURITY_GROUP": params.network_security_group,
        "ROUTE_TABLE": params.route_table,
        "PRIMARY_AVAILABILITY_SET": "",
        "PRIMARY_SCALE_SET": "",
        "SERVICE_PRINCIPAL_CLIENT_ID": "msi",
        "SERVICE_PRINCIPAL_FILE_CONTENT": _b64("msi"),
        "USE_MANAGED_IDENTITY_EXTENSION": "true",
        "USER_ASSIGNED_IDENTITY_ID": settings.kubelet_identity_client_id,
        "USE_INSTANCE_METADATA": "true",
        "LOAD_BALANCER_SKU": "Standard",
        "LOAD_BALANCER_DISABLE_OUTBOUND_SNAT": "false",
        "EXCLUDE_MASTER_FROM_STANDARD_LB": "true",
        "MAXIMUM_LOADBALANCER_RULE_COUNT": "250",
        "CLOUDPROVIDER_BACKOFF": "true",
        "CLOUDPROVIDER_BACKOFF_MODE": "v2",
        "CLOUDPROVIDER_BACKOFF_RETRIES": "6",
        "CLOUDPROVIDER_BACKOFF_EXPONENT": "0",
        "CLOUDPROVIDER_BACKOFF_DURATION": "5",
        "CLOUDPROVIDER_BACKOFF_JITTER": "0",
        "CLOUDPROVIDER_RATELIMIT": "true",
        "CLOUDPROVIDER_RATELIMIT_QPS": "10",
        "CLOUDPROVIDER_RATELIMIT_QPS_WRITE": "10",
        "CLOUDPROVIDER_RATELIMIT_BUCKET": "100",
        "CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE": "100",
        # container runtime and OS
        "CONTAINER_RUNTIME": "containerd",
        "NEEDS_CONTAINERD": "true",
        "CLI_TOOL": "ctr",
        "CONTAINERD_CONFIG_CONTENT": _b64(containerd_config(gpu=gpu is not None)),
        "SYSCTL_CONTENT": _b64(_sysctl_content(params.os_config.sysctls)),
        # the GPU driver: installed by AKS's scripts on NVIDIA sizes (gpu.mode Driver)
        "GPU_NODE": _bool(gpu is not None),
        "CONFIG_GPU_DRIVER_IF_NEEDED": _bool(gpu is not None),
        "ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED": "false",
        "GPU_DRIVER_VERSION": gpu.version if gpu else "",
        "GPU_DRIVER_TYPE": gpu.type if gpu else "",
        "GPU_IMAGE_SHA": gpu.image_sha if gpu else "",
        "GPU_NEEDS_FABRIC_MANAGER": "false",
        "GPU_INSTANCE_PROFILE": "",
        "MIG_NODE": "false",
        "SGX_NODE": "false",
        # node features Karpenter-Azure does not offer: off, as it renders them
        "IS_KRUSTLET": "false",
        "IS_KATA": "false",
        "TELEPORT_ENABLED": "false",
        "TELEPORTD_PLUGIN_DOWNLOAD_URL": "",
        "NEEDS_DOCKER_LOGIN": "false",
        "MESSAGE_OF_THE_DAY": "",
        "DISABLE_SSH": "false",
        "ENABLE_UNATTENDED_UPGRADES": "false",
        # HTTP proxy, custom CA trust, custom search domains, private registry: not done
        "SHOULD_CONFIGURE_HTTP_PROXY": "false",
        "SHOULD_CONFIGURE_HTTP_PROXY_CA": "false",
        "HTTP_PROXY_TRUSTED_CA": "",
        "HTTP_PROXY_URLS": "",
        "HTTPS_PROXY_URLS": "",
        "NO_PROXY_URLS": "",
        "SHOULD_CONFIGURE_CUSTOM_CA_TRUST": "false",
        "CUSTOM_CA_TRUST_COUNT": "0",
        "ENABLE_HOSTS_CONFIG_AGENT": "false",
        "HAS_CUSTOM_SEARCH_DOMAIN": "false",
        "CUSTOM_SEARCH_DOMAIN_NAME": "",
        "CUSTOM_SEARCH_REALM_USER": "",
        "CUSTOM_SEARCH_REALM_PASSWORD": "",
        "AZURE_PRIVATE_REGISTRY_SERVER": "",
        "SHOULD_CONFIG_SWAP_FILE": _bool(osc.swap_file_size_mb > 0),
        "SWAP_FILE_SIZE_MB": str(osc.swap_file_size_mb),
        "SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE": _bool(
            bool(osc.transparent_huge_page_enabled or osc.transparent_huge_page_defrag)
        ),
        "THP_ENABLED": osc.transparent_huge_page_enabled,
        "THP_DEFRAG": osc.transparent_huge_page_defrag,
        "OUTBOUND_COMMAND": "curl -v --insecure --proxy-insecure https://mcr.microsoft.com/v2/",
        "MCR_REPOSITORY_BASE": "mcr.microsoft.com",
        "ENABLE_IMDS_RESTRICTION": "false",
        "INSERT_IMDS_RESTRICTION_RULE_TO_MANGLE_TABLE": "false",
        # the scripts AKS's images carry
        "CSE_HELPERS_FILEPATH": "/opt/azure/containers/provision_source.sh",
        "CSE_DISTRO_HELPERS_FILEPATH": "/opt/azure/containers/provision_source_distro.sh",
        "CSE_INSTALL_FILEPATH": "/opt/azure/containers/provision_installs.sh",
        "CSE_DISTRO_INSTALL_FILEPATH": "/opt/azure/containers/provision_installs_distro.sh",
        "CSE_CONFIG_FILEPATH": "/opt/azure/containers/provision_configs.sh",
        "CUSTOM_SEARCH_DOMAIN_FILEPATH": "/opt/azure/containers/setup-custom-search-domains.sh",
        # how long provision_start.sh lets provisioning run (Karpenter-Azure's template
        # passes it since its #1425)
        "CSE_TIMEOUT": "15m",
    }
    if params.artifact_streaming:
        # AKS's variable for it (AgentBaker's ARTIFACT_STREAMING_ENABLED); only when asked,
        # so every other node renders exactly Karpenter-Azure's scriptless variables
        variables["ARTIFACT_STREAMING_ENABLED"] = "true"
    return variables


def provision_command(variables: Mapping[str, str], *, background: bool) -> str:
    """The bash script that provisions the node: wait (up to 20 minutes) for the image's
    provisioning scripts, export ``variables``, run ``provision_start.sh`` — in the
    background for custom data (cloud-init must not block on it), in the foreground for
    the Custom Script Extension (whose result is provisioning's)."""
    lines: list[str] = [
        "#!/bin/bash",
        "# AKS node provisioning (karpy): the variables AKS's node scripts read, then them",
        "set -o allexport",
        # provision_start.sh waits for this marker; the extension's log directory is
        # expected even when no extension runs
        "echo '#EOF' >> /opt/azure/manifest.json",
        "mkdir -p /var/log/azure/Microsoft.Azure.Extensions.CustomScript/events",
        "echo \"$(date),$(hostname)\" > /var/log/azure/cluster-provision-cse-output.log",
        "for i in $(seq 1 1200); do",
        f"  grep -Fq EOF {PROVISION_SCRIPT} && break",
        '  if [ "$i" -eq 1200 ]; then exit 100; fi',
        "  sleep 1",
        "done",
    ]
    lines.extend(f"{name}={shlex.quote(value)}" for name, value in variables.items())
    if background:
        lines.append(f'/usr/bin/nohup /bin/bash -c "/bin/bash {PROVISION_START}"')
    else:
        lines.append(f"/bin/bash {PROVISION_START}")
    lines.append("")
    return "\n".join(lines)


def custom_data(command: str) -> str:
    """The VM's ``osProfile.customData``: the command, base64."""
    return _b64(command)


def command_to_execute(command: str) -> str:
    """The Custom Script Extension's ``commandToExecute`` (which ``/bin/sh -c`` runs):
    the command handed to bash."""
    return f"/bin/bash -c {shlex.quote(command)}"

