"""Karpenter-Azure's own examples render the same bootstrap with karpy as with
Karpenter-Azure (issue 23).

data/scriptless-parity.yaml holds, worked out from Karpenter-Azure's source at the
commit it names, every variable its scriptless custom data template renders for each pool
of its examples on one cluster. Here the same manifests go through ``karpy convert`` (the
v1beta1 NodePools, the v1alpha2 AKSNodeClass) and a launch on the ARM test server, and the
custom data karpy sends is compared variable by variable: the same names, the same values;
the kubelet's flags and labels and the base64 files compared as what they mean (Go builds
some lists from maps, in no fixed order). The differences that remain are listed in the
data file with their reason, as in docs/providers/azure.md."""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from azure_support import azure_settings
from azurearm.bootstrap import custom_data_script, kubelet_flags, node_labels, script_variables
from azurearm.server import ArmServer
from karpy_azure import ArmClients, AzureCloudProvider, StaticNodeClasses, make_credential
from karpy_azure._status import resolve_status
from karpy_azure.apis import AKSNodeClass

from karpy.apis import NodePool, Taint
from karpy.apis.convert import convert_documents, parse_nodeclass
from karpy.apis.labels import LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy.cloudprovider.testing import make_nodeclaim

DATA: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "data" / "scriptless-parity.yaml").read_text()
)
EXAMPLES: dict[str, Any] = DATA["examples"]
# flags whose comma lists Go joins from maps (JoinParameterArgsToMap): compared as sets
_UNORDERED_FLAGS = frozenset({"--system-reserved", "--kube-reserved", "--eviction-hard"})


def comparable_flags(flags: dict[str, str]) -> dict[str, object]:
    return {k: frozenset(v.split(",")) if k in _UNORDERED_FLAGS else v for k, v in flags.items()}


def expected_for(
    example: str, pool: str, version: str
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Karpenter-Azure's variables, kubelet flags and node labels for one pool."""
    spec = EXAMPLES[example]["pools"][pool]
    size = DATA["instanceTypes"][spec["instanceType"]]
    changes = DATA["kubernetesVersions"].get(version, {})
    arch = size["labels"]["kubernetes.io/arch"]
    variables = {
        k: v.replace("{arch}", arch)
        for k, v in {**DATA["variables"], **changes.get("variables", {})}.items()
    }
    flags = {
        **{k: v for k, v in DATA["kubeletFlags"].items() if k not in changes.get("dropFlags", [])},
        "--kube-reserved": size["kubeReserved"],
        "--register-with-taints": ",".join(spec["registerWithTaints"]),
    }
    # labels.Get's, then the NodeClaim's and the launch's single-valued ones (which win)
    labels = {
        **DATA["clusterLabels"], **changes.get("clusterLabels", {}), **size["labels"],
        **spec["labels"],
    }
    return variables, flags, labels


async def render(arm: ArmServer, example: str, version: str) -> dict[str, str]:
    """karpy's custom data for one launch of each NodePool of ``example`` (converted as
    ``karpy convert --default-nodeclass AKSNodeClass.karpenter.azure.com`` does), on the
    pool's size."""
    converted = convert_documents(
        copy.deepcopy(EXAMPLES[example]["manifests"]),
        default_nodeclass=parse_nodeclass("AKSNodeClass.karpenter.azure.com"),
    ).documents
    assert {d["apiVersion"] for d in converted} <= {
        "karpenter.sh/v1", "karpenter.azure.com/v1beta1"
    }
    settings = azure_settings(arm, **DATA["settings"])
    provider = AzureCloudProvider(
        settings,
        arm=ArmClients.create(settings, make_credential(settings), retry_backoff_factor=0.01),
        node_classes=StaticNodeClasses({}),
    )
    node_classes = provider.node_classes
    assert isinstance(node_classes, StaticNodeClasses)
    scripts: dict[str, str] = {}
    try:
        for doc in converted:
            if doc["kind"] == "AKSNodeClass":
                node_class = AKSNodeClass.model_validate(doc)
                await resolve_status(provider, node_class, lambda: _version(version))
                assert node_class.status.kubernetes_version == version
                node_classes.items[node_class.metadata.name or ""] = node_class
        for doc in converted:
            if doc["kind"] != "NodePool":
                continue
            pool = NodePool.model_validate(doc)
            name = pool.metadata.name or ""
            template = doc["spec"]["template"]
            size = EXAMPLES[example]["pools"][name]["instanceType"]
            # as the provisioner launches it: the pool's labels, taints and requirements,
            # here on one size
            claim = make_nodeclaim(
                pool,
                requirements=[
                    *template["spec"]["requirements"],
                    {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [size]},
                ],
                labels=(template.get("metadata") or {}).get("labels"),
            )
            claim.spec.taints = [
                Taint.model_validate(t) for t in template["spec"].get("taints", [])
            ]
            claim.spec.startup_taints = [
                Taint.model_validate(t) for t in template["spec"].get("startupTaints", [])
            ]
            launched = await provider.create(claim)
            vm = "aks-" + (launched.metadata.name or "")
            [body] = [r.body for r in arm.requests
                      if r.method == "PUT" and r.path.endswith("/virtualMachines/" + vm)]
            scripts[name] = custom_data_script(dict(body))
    finally:
        await provider.aclose()
    assert set(scripts) == set(EXAMPLES[example]["pools"])
    return scripts


async def _version(version: str) -> str:
    return version


def test_the_data_names_its_source() -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", DATA["source"]["commit"])
    # every example of Karpenter-Azure's examples/v1 and examples/v1beta1 at that commit
    assert set(EXAMPLES) == {
        "v1/general-purpose.yaml", "v1/perftest.yaml", "v1/system-surge.yaml",
        "v1beta1/general-purpose.yaml", "v1beta1/multi-arch.yaml", "v1beta1/system-surge.yaml",
    }


@pytest.mark.parametrize(
    ("example", "version"),
    [(example, DATA["kubernetesVersion"]) for example in sorted(EXAMPLES)]
    + [("v1beta1/multi-arch.yaml", version) for version in sorted(DATA["kubernetesVersions"])],
)
async def test_karpy_renders_karpenter_azures_bootstrap_for_its_example(
    arm: ArmServer, example: str, version: str
) -> None:
    scripts = await render(arm, example, version)
    ca = base64.b64encode(arm.cert.cert_file.read_bytes()).decode()
    for pool, script in scripts.items():
        expected, expected_flags, expected_labels = expected_for(example, pool, version)
        got = script_variables(script)
        # exactly the template's variables (it assigns KUBE_BINARY_URL twice, the same value)
        assert set(got) == set(expected), (
            f"{pool}: karpy only {sorted(set(got) - set(expected))}, "
            f"Karpenter-Azure only {sorted(set(expected) - set(got))}"
        )
        special = {"SYSCTL_CONTENT", "KUBELET_FLAGS", "KUBELET_NODE_LABELS", "KUBE_CA_CRT",
                    "CONTAINERD_CONFIG_CONTENT"}
        plain = {k: v for k, v in got.items() if k not in special}
        assert plain == {k: v for k, v in expected.items() if k not in special}, pool

        assert got["KUBE_CA_CRT"] == ca
        assert base64.b64decode(got["CONTAINERD_CONFIG_CONTENT"]).decode() == DATA["containerd"]
        # the same settings; Karpenter-Azure's file opens with comment lines
        # (differences.sysctlComment)
        sysctls = base64.b64decode(got["SYSCTL_CONTENT"]).decode().splitlines()
        assert [s for s in sysctls if s and not s.startswith("#")] == DATA["sysctls"]
        assert "sysctlComment" in DATA["differences"]

        assert comparable_flags(kubelet_flags(got)) == comparable_flags(expected_flags), pool
        labels = node_labels(got)
        # karpy adds the zone it placed the VM in (differences.zoneLabel)
        zone = labels.pop(LABEL_ZONE)
        assert zone.startswith("southcentralus-") and "zoneLabel" in DATA["differences"]
        # where karpy's labels differ (differences.spotPriority), they do differ
        differing = EXAMPLES[example]["pools"][pool].get("karpyLabels", {})
        assert all(expected_labels[k] != v for k, v in differing.items())
        assert labels == {**expected_labels, **differing}, pool
