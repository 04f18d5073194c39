"""One node's bootstrap: from the NodeClaim, the chosen instance type and the
AKSNodeClass to the VM's custom data and, in provision mode ``customscript``, the Custom
Script Extension's command (see :mod:`karpy_azure._bootstrap` for what they carry and
:mod:`karpy_azure._kubelet` for the labels and flags)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from karpy.apis import NodeClaim, Taint
from karpy.apis.labels import LABEL_ARCH
from karpy.apis.taints import UNREGISTERED_NO_EXECUTE_TAINT
from karpy.cloudprovider import InstanceType
from karpy_azure._bootstrap import (
    BootstrapParams,
    bootstrap_variables,
    command_to_execute,
    custom_data,
    provision_command,
)
from karpy_azure._gpu import gpu_driver_for
from karpy_azure._kubelet import KubeletParams, aks_base_labels, kubelet_flags, node_labels
from karpy_azure._network import MANAGED_NSG
from karpy_azure._osconfig import os_config
from karpy_azure._settings import AzureSettings
from karpy_azure.apis import AKSNodeClass
from karpy_azure.apis.labels import LABEL_SKU_GPU_MANUFACTURER

__all__ = [
    "MANAGED_NSG",
    "NodeBootstrap",
    "cluster_id_from_nsg",
    "node_bootstrap",
    "startup_taints",
]

def cluster_id_from_nsg(nsg_name: str) -> str:
    """The 8-digit cluster ID in ``aks-agentpool-<id>-nsg`` (empty when it is not one)."""
    m = MANAGED_NSG.match(nsg_name)
    return m.group(1) if m else ""


@dataclass(frozen=True, slots=True)
class NodeBootstrap:
    """What a node is launched with."""

    #: the VM's ``osProfile.customData`` (None in provision mode ``customscript``)
    custom_data: str | None
    #: the Custom Script Extension's ``commandToExecute`` (None in ``aksscriptless``)
    cse_command: str | None
    #: the provisioning variables (for logs and tests; carried by the two above)
    variables: Mapping[str, str]


def startup_taints(nodeclaim: NodeClaim) -> tuple[Taint, ...]:
    """The taints the kubelet registers the Node with: the NodeClaim's taints and startup
    taints, and ``karpenter.sh/unregistered:NoExecute`` (which karpy removes once the
    Node registers) unless already there."""
    taints = [*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints]
    if not any(
        t.key == UNREGISTERED_NO_EXECUTE_TAINT.key
        and t.effect == UNREGISTERED_NO_EXECUTE_TAINT.effect
        for t in taints
    ):
        taints.append(UNREGISTERED_NO_EXECUTE_TAINT)
    return tuple(dict.fromkeys(taints))


def _gpu_manufacturer(instance_type: InstanceType) -> str:
    requirement = instance_type.requirements.get(LABEL_SKU_GPU_MANUFACTURER)
    return (requirement.single() or "") if requirement is not None else ""


def node_bootstrap(
    settings: AzureSettings,
    node_class: AKSNodeClass,
    *,
    instance_type: InstanceType,
    labels: Mapping[str, str],
    taints: Iterable[Taint],
    max_pods: int,
    subnet_id: str,
    ca_bundle: str,
    nsg_name: str = "",
) -> NodeBootstrap:
    """The node's custom data and extension command. ``labels`` are the launched
    NodeClaim's; the Kubernetes version is the AKSNodeClass's status (ValueError when it
    has none)."""
    version = node_class.status.kubernetes_version
    if not version:
        raise ValueError(
            f"AKSNodeClass {node_class.metadata.name} has no status.kubernetesVersion yet"
        )
    osc = os_config(node_class.spec.linux_os_config)
    base = aks_base_labels(settings, node_class, subnet_id=subnet_id, kubernetes_version=version)
    flags = kubelet_flags(
        KubeletParams(
            kubernetes_version=version,
            max_pods=max_pods,
            overhead=instance_type.overhead,
            taints=tuple(taints),
            kubelet=node_class.spec.kubelet,
            cluster_dns=settings.dns_service_ip,
            swap_file=osc.swap_file_size_mb > 0,
        )
    )
    cluster_id = cluster_id_from_nsg(nsg_name)
    variables = bootstrap_variables(
        settings,
        BootstrapParams(
            kubernetes_version=version,
            arch=labels.get(LABEL_ARCH, "amd64"),
            subnet_id=subnet_id,
            node_labels=node_labels(base, labels),
            kubelet_flags=flags,
            ca_bundle=ca_bundle,
            network_security_group=nsg_name,
            route_table=f"aks-agentpool-{cluster_id}-routetable" if cluster_id else "",
            gpu_driver=gpu_driver_for(
                instance_type.name, _gpu_manufacturer(instance_type), node_class
            ),
            os_config=osc,
            artifact_streaming=bool(
                node_class.spec.artifact_streaming and node_class.spec.artifact_streaming.enabled
            ),
        ),
    )
    if settings.provision_mode == "customscript":
        command = provision_command(variables, background=False)
        return NodeBootstrap(None, command_to_execute(command), variables)
    return NodeBootstrap(
        custom_data(provision_command(variables, background=True)), None, variables
    )
