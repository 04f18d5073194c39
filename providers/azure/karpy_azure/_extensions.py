"""The VM extensions karpy adds to a node once its VM exists, as Karpenter's Azure
provider does, built with the SDK's model classes (the body ARM expects):

- the **Custom Script Extension** ``cse-agent-karpenter`` (``Microsoft.Azure.Extensions``
  / ``CustomScript`` 2.0), only in provision mode ``customscript``: it runs the node's
  provisioning command (``protectedSettings.commandToExecute``, encrypted at rest by
  Azure) and succeeds when provisioning did;
- the **AKS billing extension** ``computeAksLinuxBilling`` (``Microsoft.AKS`` /
  ``Compute.AKS.Linux.Billing`` 1.0), which marks the VM as an AKS node for billing.

Both carry the node's tags and are created in that order, each a long-running operation.
The billing extension exists only in Azure's public, China and US Government clouds:
elsewhere (``armCloud`` names another cloud) it is not sent, as Karpenter's Azure provider
decides (its ``aksIdentifyingExtensionEnvs``).
A failed extension fails the launch: the VM and its NIC are deleted (Karpenter's
Azure provider returns the error and its cloud provider deletes the instance).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from azure.mgmt.compute import models as cm

__all__ = [
    "BILLING_CLOUDS",
    "BILLING_EXTENSION",
    "CSE_EXTENSION",
    "billing_applies",
    "billing_extension",
    "cse_extension",
    "extension_names",
]

#: The extension names Karpenter's Azure provider gives (and finds) on its VMs.
BILLING_EXTENSION: Final = "computeAksLinuxBilling"
CSE_EXTENSION: Final = "cse-agent-karpenter"
#: the clouds (``armCloud``, Karpenter-Azure's ``ARM_CLOUD``) with the AKS billing extension
BILLING_CLOUDS: Final = frozenset({"AzurePublicCloud", "AzureChinaCloud",
                                   "AzureUSGovernmentCloud"})


def billing_applies(arm_cloud: str) -> bool:
    """True when the AKS billing extension exists in cloud ``arm_cloud`` (names compared
    case-insensitively, as the SDKs resolve them)."""
    return arm_cloud.lower() in {c.lower() for c in BILLING_CLOUDS}


def extension_names(cse_command: str | None, *, arm_cloud: str) -> list[str]:
    """The extensions karpy makes on a VM, in order: the Custom Script Extension when
    there is a provisioning command to run, the billing extension where it applies (in
    cloud ``arm_cloud``)."""
    names = [] if cse_command is None else [CSE_EXTENSION]
    if billing_applies(arm_cloud):
        names.append(BILLING_EXTENSION)
    return names


def billing_extension(location: str, tags: Mapping[str, str]) -> cm.VirtualMachineExtension:
    """The AKS billing (identifying) extension."""
    return cm.VirtualMachineExtension(
        location=location,
        tags=dict(tags),
        properties=cm.VirtualMachineExtensionProperties(
            publisher="Microsoft.AKS",
            type="Compute.AKS.Linux.Billing",
            type_handler_version="1.0",
            auto_upgrade_minor_version=True,
            settings={},
        ),
    )


def cse_extension(
    location: str, tags: Mapping[str, str], command: str
) -> cm.VirtualMachineExtension:
    """The Custom Script Extension running ``command`` (a ``/bin/sh -c`` command line)."""
    return cm.VirtualMachineExtension(
        location=location,
        tags=dict(tags),
        properties=cm.VirtualMachineExtensionProperties(
            publisher="Microsoft.Azure.Extensions",
            type="CustomScript",
            type_handler_version="2.0",
            auto_upgrade_minor_version=True,
            settings={},
            protected_settings={"commandToExecute": command},
        ),
    )
