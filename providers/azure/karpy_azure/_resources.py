"""The ARM resources karpy creates for a node, built with the SDK's model classes so the
request body is exactly what ARM expects (azure-mgmt-compute >= 38 would send a plain
dict as-is, camelCase or not).

Per NodeClaim ``<name>``: a NIC ``aks-<name>`` in the node subnet (accelerated
networking where the SKU has it; under Azure CNI without overlay, one secondary IP
configuration per pod), then a VM ``aks-<name>``: the chosen size and zone, Spot
(eviction policy Delete, max price -1) or Regular priority, an OS disk and the NIC with
delete option Delete (so deleting the VM deletes them), the node image, the bootstrap
custom data (:mod:`karpy_azure._nodebootstrap`; none in provision mode ``customscript``)
and the tags below. The NIC joins the AKS load balancers' backend pools and, on a
bring-your-own VNet, carries AKS's managed NSG (:mod:`karpy_azure._network`). Resource
names and tags follow Karpenter's Azure provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from azure.mgmt.compute import models as cm
from azure.mgmt.network import models as nm

from karpy.apis import NodeClaim
from karpy.apis.labels import LABEL_NODEPOOL
from karpy_azure._settings import AzureSettings
from karpy_azure.apis import AKSNodeClass

__all__ = [
    "TAG_CLUSTER",
    "TAG_NODECLAIM",
    "TAG_NODEPOOL",
    "network_interface",
    "provider_id",
    "resource_name",
    "tags_for",
    "virtual_machine",
    "vm_name_from_provider_id",
]

TAG_CLUSTER: Final = "karpenter.azure.com_cluster"
TAG_NODEPOOL: Final = LABEL_NODEPOOL.replace("/", "_")  # karpenter.sh_nodepool
TAG_NODECLAIM: Final = "karpenter.sh_nodeclaim"
TAG_NODECLASS: Final = "karpenter.azure.com_aksnodeclass"
TAG_BILLING: Final = "compute.aks.billing"
PROVIDER_ID_PREFIX: Final = "azure://"


def resource_name(nodeclaim_name: str) -> str:
    """The NIC, VM and OS disk name of a NodeClaim: ``aks-<nodeclaim>``."""
    return f"aks-{nodeclaim_name}"


def provider_id(subscription_id: str, resource_group: str, vm_name: str) -> str:
    """``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/
    virtualMachines/<name>`` (the resource group lower-cased, as the Azure cloud
    provider writes it on Nodes)."""
    return (
        f"{PROVIDER_ID_PREFIX}/subscriptions/{subscription_id}/resourceGroups/"
        f"{resource_group.lower()}/providers/Microsoft.Compute/virtualMachines/{vm_name}"
    )


def vm_name_from_provider_id(value: str) -> str | None:
    """The VM name in an Azure provider ID, or None when it is not one."""
    if not value.startswith(PROVIDER_ID_PREFIX):
        return None
    parts = value.removeprefix(PROVIDER_ID_PREFIX).strip("/").split("/")
    if len(parts) != 8 or parts[6].lower() != "virtualmachines":
        return None
    return parts[7]


def _tag_key(key: str) -> str:
    return key.replace("/", "_")


def tags_for(settings: AzureSettings, node_class: AKSNodeClass, nodeclaim: NodeClaim) -> dict[
    str, str
]:
    """Tags of every resource of a node: ``additionalTags``, then the AKSNodeClass's, then
    karpy's own (which win): cluster, billing, NodePool, NodeClaim and NodeClass. Keys
    have ``/`` replaced by ``_`` (ARM forbids ``/``)."""
    tags = {_tag_key(k): v for k, v in settings.additional_tags.items()}
    tags.update({_tag_key(k): v for k, v in node_class.spec.tags.items()})
    tags[TAG_CLUSTER] = settings.cluster_name
    tags[TAG_BILLING] = "linux"
    pool = nodeclaim.metadata.labels.get(LABEL_NODEPOOL)
    if pool:
        tags[TAG_NODEPOOL] = pool
    tags[TAG_NODECLAIM] = nodeclaim.metadata.name or ""
    tags[TAG_NODECLASS] = node_class.metadata.name or ""
    return tags


def network_interface(
    settings: AzureSettings,
    *,
    name: str,
    subnet_id: str,
    tags: Mapping[str, str],
    accelerated_networking: bool,
    max_pods: int,
    backend_pool_ids: Sequence[str] = (),
    nsg_id: str = "",
) -> nm.NetworkInterface:
    """The NIC of a node: its primary IP configuration joins ``backend_pool_ids`` (the AKS
    load balancers', :mod:`karpy_azure._network`); ``nsg_id`` goes on the NIC when set
    (a bring-your-own VNet)."""
    configs = [
        nm.NetworkInterfaceIPConfiguration(
            name=name,
            properties=nm.NetworkInterfaceIPConfigurationPropertiesFormat(
                primary=True,
                private_ip_allocation_method="Dynamic",
                subnet=nm.Subnet(id=subnet_id),
                load_balancer_backend_address_pools=[
                    nm.BackendAddressPool(id=pool) for pool in backend_pool_ids
                ]
                or None,
            ),
        )
    ]
    if settings.network_plugin == "azure" and settings.network_plugin_mode != "overlay":
        # Azure CNI with pod IPs from the subnet: one secondary IP per pod
        configs.extend(
            nm.NetworkInterfaceIPConfiguration(
                name=f"ipconfig{i}",
                properties=nm.NetworkInterfaceIPConfigurationPropertiesFormat(
                    primary=False,
                    private_ip_allocation_method="Dynamic",
                    subnet=nm.Subnet(id=subnet_id),
                ),
            )
            for i in range(1, max_pods)
        )
    return nm.NetworkInterface(
        location=settings.location,
        tags=dict(tags),
        properties=nm.NetworkInterfacePropertiesFormat(
            ip_configurations=configs,
            network_security_group=nm.NetworkSecurityGroup(id=nsg_id) if nsg_id else None,
            enable_accelerated_networking=accelerated_networking,
            enable_ip_forwarding=False,
        ),
    )


def _os_disk(
    settings: AzureSettings,
    *,
    name: str,
    size_gb: int,
    premium_storage: bool,
    ephemeral_placement: str,
) -> cm.OSDisk:
    """A managed OS disk (Premium SSD where the SKU takes it), or an ephemeral one on the
    VM's local disk (read-only host caching, as ARM requires for it); encrypted with the
    ``diskEncryptionSetID`` setting's DiskEncryptionSet when set."""
    des = (
        cm.DiskEncryptionSetParameters(id=settings.disk_encryption_set_id)
        if settings.disk_encryption_set_id
        else None
    )
    disk = cm.OSDisk(
        name=name,
        disk_size_gb=size_gb,
        create_option="FromImage",
        delete_option="Delete",
    )
    if ephemeral_placement:
        disk.diff_disk_settings = cm.DiffDiskSettings(option="Local",
                                                      placement=ephemeral_placement)
        disk.caching = "ReadOnly"
        if des is not None:
            disk.managed_disk = cm.ManagedDiskParameters(disk_encryption_set=des)
    else:
        disk.managed_disk = cm.ManagedDiskParameters(
            storage_account_type="Premium_LRS" if premium_storage else "Standard_LRS",
            disk_encryption_set=des,
        )
    return disk


def virtual_machine(
    settings: AzureSettings,
    node_class: AKSNodeClass,
    *,
    name: str,
    size: str,
    zone_number: str,
    capacity_type: str,
    nic_id: str,
    image_id: str,
    premium_storage: bool,
    custom_data: str | None,
    tags: Mapping[str, str],
    ephemeral_placement: str = "",
    ultra_ssd: bool = False,
) -> cm.VirtualMachine:
    """The VM of a node (see the module docstring). ``ephemeral_placement`` (``CacheDisk``,
    ``ResourceDisk``, ``NvmeDisk``) makes the OS disk ephemeral there; ``ultra_ssd`` lets
    Ultra SSD data disks attach."""
    spot = capacity_type == "spot"
    properties = cm.VirtualMachineProperties(
        hardware_profile=cm.HardwareProfile(vm_size=size),
        storage_profile=cm.StorageProfile(
            image_reference=cm.ImageReference(community_gallery_image_id=image_id),
            os_disk=_os_disk(
                settings,
                name=name,
                size_gb=node_class.spec.os_disk_size_gb,
                premium_storage=premium_storage,
                ephemeral_placement=ephemeral_placement,
            ),
        ),
        network_profile=cm.NetworkProfile(
            network_interfaces=[
                cm.NetworkInterfaceReference(
                    id=nic_id,
                    properties=cm.NetworkInterfaceReferenceProperties(
                        primary=True, delete_option="Delete"
                    ),
                )
            ]
        ),
        os_profile=cm.OSProfile(
            computer_name=name,
            admin_username=settings.linux_admin_username,
            custom_data=custom_data,
            linux_configuration=cm.LinuxConfiguration(
                disable_password_authentication=True,
                ssh=cm.SshConfiguration(
                    public_keys=[
                        cm.SshPublicKey(
                            key_data=settings.ssh_public_key,
                            path=f"/home/{settings.linux_admin_username}/.ssh/authorized_keys",
                        )
                    ]
                )
                if settings.ssh_public_key
                else None,
            ),
        ),
        priority="Spot" if spot else "Regular",
    )
    if spot:
        properties.eviction_policy = "Delete"
        properties.billing_profile = cm.BillingProfile(max_price=-1)
    security = node_class.spec.security
    if security is not None and security.encryption_at_host is not None:
        properties.security_profile = cm.SecurityProfile(
            encryption_at_host=security.encryption_at_host
        )
    if node_class.trusted_launch_enabled:
        profile = properties.security_profile or cm.SecurityProfile()
        profile.security_type = "TrustedLaunch"
        profile.uefi_settings = cm.UefiSettings(
            secure_boot_enabled=node_class.secure_boot_enabled,
            v_tpm_enabled=node_class.vtpm_enabled,
        )
        properties.security_profile = profile
    if ultra_ssd:
        properties.additional_capabilities = cm.AdditionalCapabilities(ultra_ssd_enabled=True)
    vm = cm.VirtualMachine(location=settings.location, tags=dict(tags), properties=properties)
    if zone_number:
        vm.zones = [zone_number]
    if settings.node_identities:
        vm.identity = cm.VirtualMachineIdentity(
            type="UserAssigned",
            user_assigned_identities={
                identity: cm.UserAssignedIdentitiesValue() for identity in settings.node_identities
            },
        )
    return vm

