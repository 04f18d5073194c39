"""Kubelet: plays the kubelet (and the cloud node-lifecycle controller) for the test
server's VMs, so karpy-azure's end-to-end tests get real Nodes on the local cluster.

For each VM whose create finished, it registers the Node that AKS's kubelet would: named
after the VM's computer name, providerID ``azure:///subscriptions/.../virtualMachines/
<name>``, the labels and taints the node's provisioning variables pass to the kubelet
(``KUBELET_NODE_LABELS``, ``--register-with-taints`` in ``KUBELET_FLAGS``; from the custom
data, or the Custom Script Extension in provision mode customscript), capacity and
allocatable of the VM size by the AKS formulas (``nvidia.com/gpu`` only when the
bootstrap installs the NVIDIA driver, ``GPU_NODE=true``), and kwok's annotation so kwok keeps the
Node Ready and runs its pods. When a VM is gone it deletes the Node, as the cloud
node-lifecycle controller does. It does not: boot anything, report real resource use, or
honour the bootstrap token.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from karpy_azure._extensions import CSE_EXTENSION
from karpy_azure._instancetypes import InstanceTypeParams, build_instance_types
from karpy_azure._pricing import PriceTable
from karpy_azure._skus import parse_skus

from azurearm import skus
from azurearm.bootstrap import (
    cse_script,
    custom_data_script,
    kubelet_flags,
    node_labels,
    script_variables,
)
from azurearm.bootstrap import taints as register_taints
from azurearm.server import ArmServer
from karpy.cloudprovider import UnavailableOfferings
from karpy.runtime import Client, errors, kinds
from karpy.scheduling import resources as res

KWOK = "kwok.x-k8s.io/node"
NVIDIA_GPU = "nvidia.com/gpu"


class Kubelet:
    """Registers and removes Nodes for the server's VMs (see the module docstring)."""

    def __init__(self, server: ArmServer, client: Client, *, location: str, node_rg: str):
        self.server = server
        self.client = client
        self.location = location
        self.node_rg = node_rg
        self.registered: dict[str, str] = {}  # node name -> providerID
        self._vm_ids: dict[str, str] = {}  # node name -> the vmId its Node was registered for
        self._skus = parse_skus(skus(location), location)

    def _node(self, vm: dict[str, Any]) -> dict[str, Any]:
        props = vm["properties"]
        name = props["osProfile"]["computerName"]
        script = custom_data_script(vm)
        if not script:  # provision mode customscript: the command is the extension's
            cse = self.server.extensions_of(vm["name"]).get(CSE_EXTENSION)
            script = cse_script(cse) if cse is not None else ""
        variables = script_variables(script)
        labels = node_labels(variables)
        labels["kubernetes.io/hostname"] = name
        labels[KWOK] = "fake"
        taints = register_taints(variables)
        pods = int(kubelet_flags(variables).get("--max-pods") or 110)
        size = props["hardwareProfile"]["vmSize"]
        [it] = [
            t for t in build_instance_types(
                self._skus,
                InstanceTypeParams(location=self.location, node_resource_group=self.node_rg,
                                   max_pods=pods),
                PriceTable(),
                UnavailableOfferings(),
            )
            if t.name == size
        ]
        capacity, allocatable = dict(it.capacity), dict(it.allocatable)
        if variables.get("GPU_NODE") != "true":
            # no driver installed: the device plugin finds no GPU to advertise
            capacity.pop(NVIDIA_GPU, None)
            allocatable.pop(NVIDIA_GPU, None)
        provider_id = "azure://" + vm["id"].replace(
            vm["id"].split("/")[4], vm["id"].split("/")[4].lower()
        )
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK: "fake"}},
            "spec": {"providerID": provider_id, "taints": taints},
            "status": {
                "capacity": res.format_resource_list(capacity),
                "allocatable": res.format_resource_list(allocatable),
                # the version the bootstrap installed, as a real kubelet reports it
                # (karpy-azure compares it with the AKSNodeClass's: K8sVersionDrift)
                "nodeInfo": {"kubeletVersion": "v" + variables.get("KUBERNETES_VERSION", "")},
            },
        }

    async def sync(self) -> None:
        """One round: register Nodes of new VMs, delete Nodes of VMs that are gone."""
        vms = {
            vm["properties"]["osProfile"]["computerName"]: vm
            for vm in list(self.server.state.vms.values())
        }
        for name, vm in vms.items():
            # only a VM that booted gets a Node (not one whose create failed); a VM made
            # again under the same name (vmId changed) boots a new kubelet, which
            # registers again, though this loop never saw the name gone
            vm_id = str(vm["properties"].get("vmId", ""))
            if self._vm_ids.get(name) == vm_id or vm["properties"].get(
                "provisioningState"
            ) != "Succeeded":
                continue
            node = self._node(vm)
            with contextlib.suppress(errors.AlreadyExists):
                await self.client.create(kinds.NODE, node)
            self.registered[name] = node["spec"]["providerID"]
            self._vm_ids[name] = vm_id
        for name in [n for n in self.registered if n not in vms]:
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(kinds.NODE, name)
            del self.registered[name]
            self._vm_ids.pop(name, None)

    async def run(self, every: float = 0.3) -> None:
        """Sync until cancelled."""
        while True:
            await self.sync()
            await asyncio.sleep(every)
