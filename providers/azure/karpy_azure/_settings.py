"""The Azure provider's settings: what Karpenter's Azure provider takes as flags and
environment variables, here as ``karpy run --provider-setting KEY=VALUE`` with the same
environment variables as fallbacks.

======================== ============================== ====================================
setting                  environment variable           meaning
======================== ============================== ====================================
subscriptionID           ARM_SUBSCRIPTION_ID            the subscription of the nodes (required)
nodeResourceGroup        AZURE_NODE_RESOURCE_GROUP      the resource group of the nodes (required)
location                 LOCATION                       the region (``southcentralus``; required)
clusterName              CLUSTER_NAME                   the cluster (required; default: karpy's
                                                        ``--cluster-name``)
vnetSubnetID             VNET_SUBNET_ID                 the nodes' default subnet ID (required)
clusterEndpoint          CLUSTER_ENDPOINT               the API server URL nodes join (required)
kubeletBootstrapToken    KUBELET_BOOTSTRAP_TOKEN        the bootstrap token nodes join with
                                                        (required; from a Secret, see below)
clusterCABundle          CLUSTER_CA_BUNDLE              base64 PEM of the API server's CA (default:
                                                        the CA karpy's own client trusts)
networkPlugin            NETWORK_PLUGIN                 ``azure`` (default), ``kubenet`` or ``none``
networkPluginMode        NETWORK_PLUGIN_MODE            ``overlay`` (default) or empty
networkPolicy            NETWORK_POLICY                 the cluster's network policy (``cilium``,
                                                        ``azure``, ``calico`` or empty)
networkDataplane         NETWORK_DATAPLANE              ``cilium`` (default), ``azure`` or empty
dnsServiceIP             DNS_SERVICE_IP                 the cluster DNS service IP (default
                                                        10.0.0.10, AKS's)
kubeletIdentityClientID  KUBELET_IDENTITY_CLIENT_ID     client ID of the kubelet's identity
vnetGUID                 VNET_GUID                      the VNet's resource GUID (Azure CNI overlay)
tenantID                 AZURE_TENANT_ID                the tenant, for the node's azure.json
provisionMode            PROVISION_MODE                 ``aksscriptless`` (default) or
                                                        ``customscript`` (see _bootstrap)
nodeIdentities           NODE_IDENTITIES                comma-separated user-assigned identity IDs
vmMemoryOverheadPercent  VM_MEMORY_OVERHEAD_PERCENT     memory the hypervisor keeps (0.075)
linuxAdminUsername       LINUX_ADMIN_USERNAME           the VMs' admin user (``azureuser``)
sshPublicKey             SSH_PUBLIC_KEY                 the admin user's SSH key (required)
additionalTags           ADDITIONAL_TAGS                ``k=v,k2=v2`` tags on every resource
imageVersion             IMAGE_VERSION                  pin node images to this gallery version
armEndpoint              ARM_ENDPOINT                   Azure Resource Manager URL
                                                        (``https://management.azure.com``)
pricingEndpoint          PRICING_ENDPOINT               Retail Prices API URL
                                                        (``https://prices.azure.com``); ``off``
                                                        uses the shipped table only
caBundle                 AZURE_CA_BUNDLE                a PEM file to verify ARM's certificate
                                                        with (test servers)
credential               AZURE_CREDENTIAL               ``default`` (DefaultAzureCredential:
                                                        workload identity, managed identity,
                                                        environment, CLI) or ``static`` (a fixed
                                                        token; only with a non-default
                                                        armEndpoint, for test servers)
pollInterval             AZURE_POLL_INTERVAL            seconds between long-running-operation
                                                        polls (default: what ARM says)
launchWait               AZURE_LAUNCH_WAIT              seconds a launch is waited for in one
                                                        reconcile before it goes on in the
                                                        background (default 30)
armCloud                 ARM_CLOUD                      the Azure cloud (``AzurePublicCloud``,
                                                        default; ``AzureChinaCloud``,
                                                        ``AzureUSGovernmentCloud`` or another)
offline                  KARPY_OFFLINE                  price only, from the shipped tables: no
                                                        Azure client, no call (true/false)
======================== ============================== ====================================

``diskEncryptionSetID`` (environment variable ``NODE_OSDISK_DISKENCRYPTIONSET_ID``, as
Karpenter's Azure provider names it) is the DiskEncryptionSet resource ID that encrypts
the nodes' OS disks with customer-managed keys (default: platform-managed keys).

``kubeletBootstrapToken`` is a credential: give it as ``KUBELET_BOOTSTRAP_TOKEN`` taken
from a Secret (the chart's ``settings.kubeletBootstrapTokenSecret`` does that with a
``secretKeyRef``), not as a ``--provider-setting`` flag that every process listing shows.
:class:`AzureSettings` holds it as a pydantic ``SecretStr``, so neither its ``repr`` nor
``str`` (in a log line, a traceback's locals) shows it; only the node bootstrap reads it
(``get_secret_value()``).

``offline`` is for ``karpy simulate``/``explain``/``top`` on a machine without Azure
access (see :mod:`karpy_azure._offline`): SKUs and prices come from the tables shipped in
``karpy_azure/data``, nothing can be launched, and only ``location`` is required.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from pydantic import SecretStr

from karpy.cloudprovider import ProviderSetting

__all__ = [
    "PROVIDER_SETTINGS",
    "PUBLIC_ARM_ENDPOINT",
    "PUBLIC_PRICING_ENDPOINT",
    "AzureSettings",
    "AzureSettingsError",
    "check_settings",
    "required_ca_bundle",
]

PUBLIC_ARM_ENDPOINT: Final = "https://management.azure.com"
PUBLIC_PRICING_ENDPOINT: Final = "https://prices.azure.com"

# setting -> environment variable
_ENV: Final = {
    "subscriptionID": "ARM_SUBSCRIPTION_ID",
    "nodeResourceGroup": "AZURE_NODE_RESOURCE_GROUP",
    "location": "LOCATION",
    "clusterName": "CLUSTER_NAME",
    "vnetSubnetID": "VNET_SUBNET_ID",
    "clusterEndpoint": "CLUSTER_ENDPOINT",
    "kubeletBootstrapToken": "KUBELET_BOOTSTRAP_TOKEN",
    "networkPlugin": "NETWORK_PLUGIN",
    "networkPluginMode": "NETWORK_PLUGIN_MODE",
    "networkPolicy": "NETWORK_POLICY",
    "networkDataplane": "NETWORK_DATAPLANE",
    "dnsServiceIP": "DNS_SERVICE_IP",
    "kubeletIdentityClientID": "KUBELET_IDENTITY_CLIENT_ID",
    "vnetGUID": "VNET_GUID",
    "tenantID": "AZURE_TENANT_ID",
    "clusterCABundle": "CLUSTER_CA_BUNDLE",
    "provisionMode": "PROVISION_MODE",
    "nodeIdentities": "NODE_IDENTITIES",
    "vmMemoryOverheadPercent": "VM_MEMORY_OVERHEAD_PERCENT",
    "linuxAdminUsername": "LINUX_ADMIN_USERNAME",
    "sshPublicKey": "SSH_PUBLIC_KEY",
    "additionalTags": "ADDITIONAL_TAGS",
    "imageVersion": "IMAGE_VERSION",
    "armEndpoint": "ARM_ENDPOINT",
    "pricingEndpoint": "PRICING_ENDPOINT",
    "caBundle": "AZURE_CA_BUNDLE",
    "credential": "AZURE_CREDENTIAL",
    "pollInterval": "AZURE_POLL_INTERVAL",
    "launchWait": "AZURE_LAUNCH_WAIT",
    "armCloud": "ARM_CLOUD",
    "offline": "KARPY_OFFLINE",
    "diskEncryptionSetID": "NODE_OSDISK_DISKENCRYPTIONSET_ID",
}
SETTINGS: Final = tuple(_ENV)

NETWORK_PLUGINS: Final = ("azure", "kubenet", "none")
NETWORK_PLUGIN_MODES: Final = ("overlay", "")
NETWORK_POLICIES: Final = ("", "azure", "calico", "cilium")
NETWORK_DATAPLANES: Final = ("cilium", "azure", "")
#: aksscriptless: the provisioning command is the VM's custom data (Karpenter's default);
#: customscript: the same command runs as the Custom Script Extension (karpy's own mode).
PROVISION_MODES: Final = ("aksscriptless", "customscript")
_GUID = re.compile(r"(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_ADMIN_USER = re.compile(r"^[A-Za-z][-A-Za-z0-9_]{0,31}$")
_BOOTSTRAP_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
_DISK_ENCRYPTION_SET_ID = re.compile(
    r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/"
    r"diskEncryptionSets/[^/]+$"
)
#: An Azure region's name as ARM spells it (eastus2, southcentralus, usgovvirginia).
_LOCATION = re.compile(r"^[a-z][a-z0-9]{2,49}$")
_SUBNET_ID = re.compile(
    r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/"
    r"virtualNetworks/[^/]+/subnets/[^/]+$"
)


class AzureSettingsError(ValueError):
    """A setting of the Azure provider is unknown, missing or malformed; the message names
    the setting, its environment variable and what is expected."""


@dataclass(frozen=True, kw_only=True)
class AzureSettings:
    """The Azure provider's settings (see the module docstring for each)."""

    subscription_id: str
    node_resource_group: str
    location: str
    cluster_name: str
    vnet_subnet_id: str
    cluster_endpoint: str = ""
    kubelet_bootstrap_token: SecretStr = field(default_factory=lambda: SecretStr(""))
    network_plugin: str = "azure"
    network_plugin_mode: str = "overlay"
    network_policy: str = ""
    network_dataplane: str = "cilium"
    dns_service_ip: str = ""
    kubelet_identity_client_id: str = ""
    vnet_guid: str = ""
    tenant_id: str = ""
    cluster_ca_bundle: str = ""
    provision_mode: str = "aksscriptless"
    node_identities: tuple[str, ...] = ()
    vm_memory_overhead_percent: float = 0.075
    linux_admin_username: str = "azureuser"
    ssh_public_key: str = ""
    additional_tags: Mapping[str, str] = field(default_factory=dict)
    image_version: str = ""
    arm_endpoint: str = PUBLIC_ARM_ENDPOINT
    pricing_endpoint: str = PUBLIC_PRICING_ENDPOINT
    ca_bundle: str = ""
    credential: str = "default"
    poll_interval: float | None = None
    launch_wait: float = 30.0
    arm_cloud: str = "AzurePublicCloud"
    offline: bool = False
    disk_encryption_set_id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kubelet_bootstrap_token, SecretStr):  # given as a plain str
            object.__setattr__(
                self, "kubelet_bootstrap_token", SecretStr(str(self.kubelet_bootstrap_token))
            )
        # offline, nothing is created: only the location (which prices) is needed
        required = (("location", "location"),) if self.offline else (
            ("subscription_id", "subscriptionID"),
            ("node_resource_group", "nodeResourceGroup"),
            ("location", "location"),
            ("cluster_name", "clusterName"),
            ("vnet_subnet_id", "vnetSubnetID"),
            # what every node needs to join (Karpenter's Azure provider requires them too)
            ("cluster_endpoint", "clusterEndpoint"),
            ("kubelet_bootstrap_token", "kubeletBootstrapToken"),
            ("ssh_public_key", "sshPublicKey"),
        )
        for name, key in required:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                if not value.get_secret_value():
                    raise AzureSettingsError(
                        f"{key} is required: set {_ENV[key]} from a Secret (the chart's "
                        "settings.kubeletBootstrapTokenSecret names it)"
                    )
            elif not value:
                raise AzureSettingsError(
                    f"{key} is required: pass --provider-setting {key}=... or set {_ENV[key]}"
                )
        if not _LOCATION.match(self.location):
            raise AzureSettingsError(
                f"location {self.location!r} (env {_ENV['location']}) is not an Azure region "
                "name: lowercase letters and digits, e.g. eastus2 or southcentralus"
            )
        _check_url("armEndpoint", self.arm_endpoint)
        if self.pricing_enabled:
            _check_url("pricingEndpoint", self.pricing_endpoint)
        if (self.vnet_subnet_id or not self.offline) and not _SUBNET_ID.match(
            self.vnet_subnet_id
        ):
            raise AzureSettingsError(
                f"vnetSubnetID {self.vnet_subnet_id!r} is not a subnet resource ID "
                "(/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Network/"
                "virtualNetworks/<vnet>/subnets/<subnet>)"
            )
        if self.network_plugin not in NETWORK_PLUGINS:
            raise AzureSettingsError(
                f"networkPlugin {self.network_plugin!r} is not one of {', '.join(NETWORK_PLUGINS)}"
            )
        if self.network_plugin_mode not in NETWORK_PLUGIN_MODES:
            raise AzureSettingsError(
                f"networkPluginMode {self.network_plugin_mode!r} must be 'overlay' or empty"
            )
        if not self.offline:
            self._check_bootstrap()
        if not 0 <= self.vm_memory_overhead_percent < 1:
            raise AzureSettingsError(
                f"vmMemoryOverheadPercent {self.vm_memory_overhead_percent} must be in [0, 1)"
            )
        if self.credential not in ("default", "static"):
            raise AzureSettingsError(
                f"credential {self.credential!r} must be 'default' or 'static'"
            )
        if self.credential == "static" and self.arm_endpoint == PUBLIC_ARM_ENDPOINT:
            raise AzureSettingsError(
                "credential 'static' sends a fixed token and is only for test servers: "
                "set armEndpoint to the test server, or use credential 'default'"
            )
        if self.poll_interval is not None and self.poll_interval < 0:
            raise AzureSettingsError(f"pollInterval {self.poll_interval} must be >= 0")
        if self.launch_wait < 0:
            raise AzureSettingsError(
                f"launchWait {self.launch_wait} (env AZURE_LAUNCH_WAIT) must be >= 0 seconds"
            )
        if self.disk_encryption_set_id and not _DISK_ENCRYPTION_SET_ID.match(
            self.disk_encryption_set_id
        ):
            raise AzureSettingsError(
                f"diskEncryptionSetID {self.disk_encryption_set_id!r} (env "
                "NODE_OSDISK_DISKENCRYPTIONSET_ID) is not a DiskEncryptionSet resource ID "
                "(/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/"
                "diskEncryptionSets/<name>)"
            )

    def _check_bootstrap(self) -> None:
        """The settings the node bootstrap passes to the kubelet and AKS's scripts."""
        endpoint = urlsplit(self.cluster_endpoint)
        if endpoint.scheme != "https" or not endpoint.hostname:
            raise AzureSettingsError(
                f"clusterEndpoint {self.cluster_endpoint!r} is not an https URL of the API "
                "server (e.g. https://my-aks-dns-abcd1234.hcp.eastus.azmk8s.io:443)"
            )
        if not _BOOTSTRAP_TOKEN.match(self.kubelet_bootstrap_token.get_secret_value()):
            raise AzureSettingsError(
                "kubeletBootstrapToken is not a bootstrap token (<6 chars [a-z0-9]>."
                "<16 chars [a-z0-9]>)"
            )
        if self.network_plugin == "none" and self.network_plugin_mode:
            raise AzureSettingsError(
                f"networkPluginMode {self.network_plugin_mode!r} is invalid with networkPlugin "
                "'none': set networkPluginMode to empty"
            )
        if self.network_policy not in NETWORK_POLICIES:
            raise AzureSettingsError(
                f"networkPolicy {self.network_policy!r} is not one of "
                f"{', '.join(repr(p) for p in NETWORK_POLICIES)}"
            )
        if self.network_dataplane not in NETWORK_DATAPLANES:
            raise AzureSettingsError(
                f"networkDataplane {self.network_dataplane!r} is not one of 'cilium', 'azure', ''"
            )
        if self.dns_service_ip:
            try:
                ipaddress.ip_address(self.dns_service_ip)
            except ValueError:
                raise AzureSettingsError(
                    f"dnsServiceIP {self.dns_service_ip!r} is not an IP address"
                ) from None
        for key, value in (("kubeletIdentityClientID", self.kubelet_identity_client_id),
                           ("vnetGUID", self.vnet_guid), ("tenantID", self.tenant_id)):
            if value and not _GUID.match(value):
                raise AzureSettingsError(f"{key} {value!r} is not a GUID")
        if not _ADMIN_USER.match(self.linux_admin_username):
            raise AzureSettingsError(
                f"linuxAdminUsername {self.linux_admin_username!r} must start with a letter, "
                "have at most 32 characters, and only letters, digits, '-' and '_'"
            )
        if self.cluster_ca_bundle:
            try:
                pem = base64.b64decode(self.cluster_ca_bundle, validate=True)
            except ValueError:
                pem = b""
            if b"-----BEGIN CERTIFICATE-----" not in pem:
                raise AzureSettingsError(
                    "clusterCABundle is not base64 of a PEM certificate bundle"
                )
        if self.provision_mode not in PROVISION_MODES:
            raise AzureSettingsError(
                f"provisionMode {self.provision_mode!r} is not one of {', '.join(PROVISION_MODES)}"
            )

    @property
    def api_server_name(self) -> str:
        """The API server's host name (``clusterEndpoint`` without scheme and port), what
        AKS's node scripts take."""
        return urlsplit(self.cluster_endpoint).hostname or ""

    @property
    def pricing_enabled(self) -> bool:
        """False when ``pricingEndpoint`` is ``off``: only the shipped table is used."""
        return self.pricing_endpoint.lower() != "off"

    @classmethod
    def from_settings(
        cls,
        settings: Mapping[str, str],
        *,
        cluster_name: str = "",
        environ: Mapping[str, str] | None = None,
    ) -> AzureSettings:
        """Build settings from ``--provider-setting`` values, falling back to the
        environment (``environ``, default ``os.environ``) and, for the cluster name, to
        karpy's own ``cluster_name``.

        Raises AzureSettingsError naming the setting that is unknown, missing or wrong.
        """
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise AzureSettingsError(
                f"unknown azure provider setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(SETTINGS)}"
            )
        env = os.environ if environ is None else environ

        def get(key: str, default: str = "") -> str:
            if key in settings:
                return settings[key].strip()
            return env.get(_ENV[key], default).strip()

        return cls(
            subscription_id=get("subscriptionID"),
            node_resource_group=get("nodeResourceGroup"),
            location=get("location").lower().replace(" ", ""),
            cluster_name=get("clusterName") or cluster_name,
            vnet_subnet_id=get("vnetSubnetID"),
            cluster_endpoint=get("clusterEndpoint"),
            kubelet_bootstrap_token=SecretStr(get("kubeletBootstrapToken")),
            network_plugin=get("networkPlugin", "azure"),
            network_plugin_mode=get("networkPluginMode", "overlay"),
            network_policy=get("networkPolicy"),
            network_dataplane=get("networkDataplane", "cilium"),
            dns_service_ip=get("dnsServiceIP"),
            kubelet_identity_client_id=get("kubeletIdentityClientID"),
            vnet_guid=get("vnetGUID"),
            tenant_id=get("tenantID"),
            cluster_ca_bundle=get("clusterCABundle"),
            provision_mode=get("provisionMode", "aksscriptless"),
            node_identities=tuple(i for i in get("nodeIdentities").split(",") if i.strip()),
            vm_memory_overhead_percent=_float(get("vmMemoryOverheadPercent", "0.075"),
                                              "vmMemoryOverheadPercent"),
            linux_admin_username=get("linuxAdminUsername", "azureuser"),
            ssh_public_key=get("sshPublicKey"),
            additional_tags=_tags(get("additionalTags")),
            image_version=get("imageVersion"),
            arm_endpoint=get("armEndpoint", PUBLIC_ARM_ENDPOINT).rstrip("/"),
            pricing_endpoint=get("pricingEndpoint", PUBLIC_PRICING_ENDPOINT).rstrip("/"),
            ca_bundle=get("caBundle"),
            credential=get("credential", "default"),
            poll_interval=(
                _float(get("pollInterval"), "pollInterval") if get("pollInterval") else None
            ),
            launch_wait=_float(get("launchWait", "30"), "launchWait"),
            arm_cloud=get("armCloud") or "AzurePublicCloud",
            offline=_flag(get("offline"), "offline"),
            disk_encryption_set_id=get("diskEncryptionSetID"),
        )


def _float(text: str, key: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AzureSettingsError(f"{key}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise AzureSettingsError(f"{key}: {text!r} (env {_ENV[key]}) is not a finite number")
    return value


def _check_url(key: str, url: str) -> None:
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        parts = urlsplit("")
    if parts.scheme != "https" or not parts.hostname:
        raise AzureSettingsError(
            f"{key} {url!r} (env {_ENV[key]}) is not an https:// URL "
            "(e.g. https://management.azure.com)"
        )


def _flag(text: str, key: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off", ""):
        return False
    raise AzureSettingsError(f"{key}: {text!r} must be true or false (env {_ENV[key]})")


def _tags(text: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AzureSettingsError(f"additionalTags: {item!r} is not key=value")
        tags[key.strip()] = value.strip()
    return tags


_HELP: Final = {
    "subscriptionID": ("", "the subscription of the nodes", True),
    "nodeResourceGroup": ("", "the resource group of the nodes", True),
    "location": ("", "the region, e.g. southcentralus", True),
    "clusterName": ("", "the cluster (default: karpy's --cluster-name)", True),
    "vnetSubnetID": ("", "the nodes' default subnet resource ID", True),
    "clusterEndpoint": ("", "the API server URL nodes join", True),
    "kubeletBootstrapToken": ("", "the bootstrap token nodes join with; set "
                              "KUBELET_BOOTSTRAP_TOKEN from a Secret, not this flag", True),
    "clusterCABundle": ("", "base64 PEM of the API server's CA (default: the CA karpy "
                        "trusts)", False),
    "networkPlugin": ("azure", "azure, kubenet or none", False),
    "networkPluginMode": ("overlay", "overlay or empty", False),
    "networkPolicy": ("", "the network policy: cilium, azure, calico or empty", False),
    "networkDataplane": ("cilium", "the network dataplane: cilium, azure or empty", False),
    "dnsServiceIP": ("", "the cluster DNS service IP (default 10.0.0.10)", False),
    "kubeletIdentityClientID": ("", "client ID of the kubelet identity", False),
    "vnetGUID": ("", "the VNet's resource GUID (Azure CNI overlay)", False),
    "tenantID": ("", "the tenant of the subscription, for the nodes' azure.json", False),
    "provisionMode": ("aksscriptless", "aksscriptless (custom data) or customscript (the "
                      "Custom Script Extension)", False),
    "nodeIdentities": ("", "comma-separated user-assigned identity IDs", False),
    "vmMemoryOverheadPercent": ("0.075", "memory the hypervisor keeps, in [0, 1)", False),
    "linuxAdminUsername": ("azureuser", "the VMs' admin user", False),
    "sshPublicKey": ("", "the admin user's SSH key", True),
    "additionalTags": ("", "k=v,k2=v2 tags on every resource", False),
    "imageVersion": ("", "pin node images to this gallery version", False),
    "armEndpoint": (PUBLIC_ARM_ENDPOINT, "Azure Resource Manager URL", False),
    "pricingEndpoint": (PUBLIC_PRICING_ENDPOINT, "Retail Prices API URL; off: the shipped "
                        "table only", False),
    "caBundle": ("", "a PEM file to verify ARM's certificate with (test servers)", False),
    "credential": ("default", "default (DefaultAzureCredential) or static (test servers)",
                   False),
    "pollInterval": ("", "seconds between long-running-operation polls", False),
    "launchWait": ("30", "seconds one reconcile waits for a launch before it goes on in "
                   "the background", False),
    "armCloud": ("AzurePublicCloud", "the Azure cloud: AzurePublicCloud, AzureChinaCloud, "
                 "AzureUSGovernmentCloud, ...", False),
    "offline": ("false", "price from the shipped tables only: no Azure client, no launches "
                "(karpy simulate/explain/top)", False),
    "diskEncryptionSetID": ("", "DiskEncryptionSet resource ID for the nodes' OS disks "
                            "(customer-managed keys)", False),
}  # fmt: skip

#: The settings as ``karpy run --help`` lists them (the module docstring's table).
PROVIDER_SETTINGS: Final = tuple(
    ProviderSetting(key, _ENV[key], default, text, required=required)
    for key, (default, text, required) in _HELP.items()
)


def check_settings(
    settings: Mapping[str, str], *, cluster_name: str, environ: Mapping[str, str]
) -> None:
    """Parse the settings as the provider will, without any Azure call; raise
    AzureSettingsError naming a bad or missing one. ``karpy run`` calls it, so
    ``offline`` is refused."""
    parsed = AzureSettings.from_settings(settings, cluster_name=cluster_name, environ=environ)
    if parsed.offline:
        raise AzureSettingsError(
            "offline=true (env KARPY_OFFLINE) is for karpy simulate, explain and top: an "
            "offline provider cannot launch nodes; unset it for karpy run"
        )


def required_ca_bundle(settings: AzureSettings, trusted: str) -> str:
    """The nodes' CA: the ``clusterCABundle`` setting, else ``trusted`` (the CA karpy's
    own client verifies the API server with); AzureSettingsError when neither is there."""
    found = settings.cluster_ca_bundle or trusted
    if not found:
        raise AzureSettingsError(
            "clusterCABundle is required: karpy's client trusts no CA file to take it "
            "from; pass --provider-setting clusterCABundle=<base64 PEM> or set "
            "CLUSTER_CA_BUNDLE"
        )
    return found
