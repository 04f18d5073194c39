"""The API server rejects invalid manifests with a message that names the field: one
case per validation the CRDs carry (bounds, enums, patterns, required fields and the
CEL rules Karpenter's CRDs have)."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from apis_support import Created, load_example, unique_name
from controlplane import crdsets
from controlplane.fixtures import KubectlError

Doc = dict[str, Any]


def set_path(doc: Doc, path: str, value: Any) -> None:
    """Set ``a.b[0].c`` in ``doc`` (creating mappings on the way)."""
    node: Any = doc
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


def delete_path(doc: Doc, path: str) -> None:
    node: Any = doc
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    del node[parts[-1]]


@dataclass(frozen=True)
class Case:
    id: str
    example: str
    change: Callable[[Doc], None]
    field: str
    message: str
    #: The provider CRD set whose rule this is (crds/<crd_set>/).
    crd_set: str = crdsets.DEFAULT


def setting(path: str, value: Any) -> Callable[[Doc], None]:
    return lambda doc: set_path(doc, path, value)


def requirement(req: dict[str, Any], where: str = "spec.template.spec") -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        node: Any = doc
        for part in where.split("."):
            node = node[part]
        node["requirements"] = [req]

    return change


POOL = "nodepool-minimal.yaml"
STATIC = "nodepool-static.yaml"
FULL = "nodepool-full.yaml"
CLAIM = "nodeclaim.yaml"
OVERLAY = "nodeoverlay.yaml"
EC2 = "ec2nodeclass-alias.yaml"
EC2_CUSTOM = "ec2nodeclass-custom.yaml"
AKS = "aksnodeclass.yaml"


def _dns_zone(zone: str, destination: str) -> Doc:
    return {"zone": zone, "queryLogging": "Error", "protocol": "PreferUDP",
            "forwardDestination": destination, "forwardPolicy": "Sequential",
            "maxConcurrent": 1000, "cacheDuration": "1h", "serveStaleDuration": "1h",
            "serveStale": "Immediate"}


REQ = "spec.template.spec.requirements"

CASES = [
    # NodePool: bounds, enums, patterns
    Case(
        "weight-too-low",
        POOL,
        setting("spec.weight", 0),
        "spec.weight",
        "greater than or equal to 1",
    ),
    Case(
        "weight-too-high",
        POOL,
        setting("spec.weight", 101),
        "spec.weight",
        "less than or equal to 100",
    ),
    # Static NodePools (Karpenter v1.8's rules)
    Case("static-with-weight", STATIC, setting("spec.weight", 10), "spec",
         "'weight' is not supported on static NodePools"),
    Case("static-with-cpu-limit", STATIC, setting("spec.limits", {"nodes": "6", "cpu": "8"}),
         "spec", "only 'limits.nodes' is supported on static NodePools"),
    Case("static-negative-replicas", STATIC, setting("spec.replicas", -1), "spec.replicas",
         "greater than or equal to 0"),
    Case(
        "v1beta1-consolidation-policy",
        POOL,
        setting("spec.disruption.consolidationPolicy", "WhenUnderutilized"),
        "spec.disruption.consolidationPolicy",
        "Unsupported value",
    ),
    Case(
        "consolidate-after-not-a-duration",
        POOL,
        setting("spec.disruption.consolidateAfter", "5 minutes"),
        "spec.disruption.consolidateAfter",
        "should match",
    ),
    Case(
        "expire-after-in-days",
        POOL,
        setting("spec.template.spec.expireAfter", "30d"),
        "spec.template.spec.expireAfter",
        "should match",
    ),
    Case(
        "termination-grace-period-never",
        POOL,
        setting("spec.template.spec.terminationGracePeriod", "Never"),
        "spec.template.spec.terminationGracePeriod",
        "should match",
    ),
    Case(
        "budget-over-100-percent",
        POOL,
        setting("spec.disruption.budgets", [{"nodes": "110%"}]),
        "spec.disruption.budgets[0].nodes",
        "should match",
    ),
    Case(
        "budget-schedule-without-duration",
        POOL,
        setting("spec.disruption.budgets", [{"nodes": "1", "schedule": "@daily"}]),
        "spec.disruption.budgets",
        "'schedule' must be set with 'duration'",
    ),
    Case(
        "budget-unknown-reason",
        POOL,
        setting("spec.disruption.budgets", [{"nodes": "1", "reasons": ["Expired"]}]),
        "spec.disruption.budgets[0].reasons[0]",
        "Unsupported value",
    ),
    Case(
        "limits-not-a-quantity",
        POOL,
        setting("spec.limits", {"cpu": "lots"}),
        "spec.limits.cpu",
        "should match",
    ),
    Case(
        "limits-quantity-too-long",
        POOL,
        setting("spec.limits", {"cpu": "1" + "0" * 64}),
        "spec.limits.cpu",
        "may not be more than 64",
    ),
    Case(
        "ec2-kube-reserved-quantity-too-long",
        EC2,
        setting("spec.kubelet.kubeReserved", {"cpu": "0." + "0" * 70 + "1"}),
        "spec.kubelet.kubeReserved.cpu",
        "may not be more than 64",
    ),
    Case(
        "taint-unknown-effect",
        POOL,
        setting("spec.template.spec.taints", [{"key": "a", "effect": "Sometimes"}]),
        "spec.template.spec.taints[0].effect",
        "Unsupported value",
    ),
    Case(
        "nodeclassref-without-name",
        POOL,
        lambda d: delete_path(d, "spec.template.spec.nodeClassRef.name"),
        "spec.template.spec.nodeClassRef.name",
        "Required value",
    ),
    Case(
        "nodeclassref-group-with-version",
        POOL,
        setting("spec.template.spec.nodeClassRef.group", "karpenter.k8s.aws/v1"),
        "spec.template.spec.nodeClassRef.group",
        "should match",
    ),
    Case(
        "nodeclassref-empty-kind",
        POOL,
        setting("spec.template.spec.nodeClassRef.kind", ""),
        "spec.template.spec.nodeClassRef.kind",
        "kind may not be empty",
    ),
    # NodePool: requirements
    Case(
        "requirement-unknown-operator",
        POOL,
        requirement({"key": "a", "operator": "Contains", "values": ["x"]}),
        f"{REQ}[0].operator",
        "Unsupported value",
    ),
    Case(
        "requirement-in-without-values",
        POOL,
        requirement({"key": "a", "operator": "In"}),
        REQ,
        "requirements with operator 'In' must have a value defined",
    ),
    Case(
        "requirement-gt-two-values",
        POOL,
        requirement({"key": "a", "operator": "Gt", "values": ["1", "2"]}),
        REQ,
        "must have a single positive integer value",
    ),
    Case(
        "requirement-gte-two-values",
        POOL,
        requirement({"key": "a", "operator": "Gte", "values": ["1", "2"]}),
        REQ,
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer",
    ),
    Case(
        "nodeclaim-requirement-lte-two-values",
        CLAIM,
        requirement({"key": "a", "operator": "Lte", "values": ["1", "2"]}, where="spec"),
        "spec.requirements",
        "must have a single positive integer value",
    ),
    Case(
        "overlay-price-and-adjustment",
        OVERLAY,
        lambda doc: doc["spec"].update(price="1", priceAdjustment="-10%"),
        "spec",
        "cannot set both 'price' and 'priceAdjustment'",
    ),
    Case(
        "overlay-capacity-cpu",
        OVERLAY,
        setting("spec.capacity", {"cpu": "2"}),
        "spec.capacity",
        "invalid resource restricted",
    ),
    Case(
        "overlay-notin-without-values",
        OVERLAY,
        requirement({"key": "a", "operator": "NotIn"}, where="spec"),
        "spec.requirements",
        "requirements with operator 'NotIn' must have a value defined",
    ),
    Case(
        "overlay-hostname",
        OVERLAY,
        requirement({"key": "kubernetes.io/hostname", "operator": "Exists"}, where="spec"),
        "spec.requirements[0].key",
        'label "kubernetes.io/hostname" is restricted',
    ),
    Case(
        "overlay-weight-zero",
        OVERLAY,
        setting("spec.weight", 0),
        "spec.weight",
        "greater than or equal to 1",
    ),
    Case(
        "requirement-min-values-over-50",
        POOL,
        requirement({"key": "a", "operator": "In", "values": ["x"], "minValues": 51}),
        f"{REQ}[0].minValues",
        "less than or equal to 50",
    ),
    Case(
        "requirement-fewer-values-than-min-values",
        POOL,
        requirement({"key": "a", "operator": "In", "values": ["x"], "minValues": 2}),
        REQ,
        "must have at least that many values",
    ),
    Case(
        "requirement-karpenter-domain",
        POOL,
        requirement({"key": "karpenter.sh/custom", "operator": "Exists"}),
        f"{REQ}[0].key",
        'label domain "karpenter.sh" is restricted',
    ),
    Case(
        "requirement-nodepool-label",
        POOL,
        requirement({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}),
        f"{REQ}[0].key",
        'label "karpenter.sh/nodepool" is restricted',
    ),
    Case(
        "requirement-hostname",
        POOL,
        requirement({"key": "kubernetes.io/hostname", "operator": "Exists"}),
        f"{REQ}[0].key",
        'label "kubernetes.io/hostname" is restricted',
    ),
    Case(
        "requirement-aws-domain",
        POOL,
        requirement({"key": "karpenter.k8s.aws/custom", "operator": "Exists"}),
        f"{REQ}[0].key",
        'label domain "karpenter.k8s.aws" is restricted',
        crd_set="aws",
    ),
    Case(
        "requirement-bad-key",
        POOL,
        requirement({"key": "not a key", "operator": "Exists"}),
        f"{REQ}[0].key",
        "should match",
    ),
    # NodePool: template labels
    Case(
        "template-label-karpenter-domain",
        POOL,
        setting("spec.template.metadata.labels", {"karpenter.sh/custom": "x"}),
        "spec.template.metadata.labels",
        'label domain "karpenter.sh" is restricted',
    ),
    Case(
        "template-label-azure-domain",
        POOL,
        setting("spec.template.metadata.labels", {"kubernetes.azure.com/custom": "x"}),
        "spec.template.metadata.labels",
        'label domain "kubernetes.azure.com" is restricted',
        crd_set="azure",
    ),
    Case(
        "template-label-legacy-aks",
        POOL,
        setting("spec.template.metadata.labels", {"agentpool": "x"}),
        "spec.template.metadata.labels",
        'label "agentpool" is restricted',
        crd_set="azure",
    ),
    Case(
        "template-label-bad-value",
        POOL,
        setting("spec.template.metadata.labels", {"team": "not valid!"}),
        "spec.template.metadata.labels.team",
        "should match",
    ),
    # NodeClaim
    Case(
        "nodeclaim-hostname-requirement",
        CLAIM,
        requirement({"key": "kubernetes.io/hostname", "operator": "Exists"}, "spec"),
        "spec.requirements[0].key",
        'label "kubernetes.io/hostname" is restricted',
    ),
    Case(
        "nodeclaim-without-requirements",
        CLAIM,
        lambda d: delete_path(d, "spec.requirements"),
        "spec.requirements",
        "Required value",
    ),
    Case(
        "nodeclaim-requests-not-quantities",
        CLAIM,
        setting("spec.resources.requests", {"cpu": "a lot"}),
        "spec.resources.requests.cpu",
        "should match",
    ),
    # EC2NodeClass
    Case(
        "ec2-connection-tracking-empty",
        EC2,
        setting("spec.connectionTracking", {}),
        "spec.connectionTracking",
        "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
    ),
    Case(
        "ec2-connection-tracking-udp-timeout-above-60",
        EC2,
        setting("spec.connectionTracking", {"udpTimeout": 61}),
        "spec.connectionTracking.udpTimeout",
        "should be less than or equal to 60",
    ),
    Case(
        "ec2-connection-tracking-tcp-below-60",
        EC2,
        setting("spec.connectionTracking", {"tcpEstablishedTimeout": 59}),
        "spec.connectionTracking.tcpEstablishedTimeout",
        "should be greater than or equal to 60",
    ),
    Case(
        "ec2-cpu-options-nested-virtualization-enum",
        EC2,
        setting("spec.cpuOptions", {"nestedVirtualization": "on"}),
        "spec.cpuOptions.nestedVirtualization",
        'supported values: "enabled", "disabled"',
    ),
    Case(
        "ec2-role-and-instance-profile",
        EC2,
        setting("spec.instanceProfile", "my-profile"),
        "spec",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    Case(
        "ec2-neither-role-nor-instance-profile",
        EC2,
        lambda d: delete_path(d, "spec.role"),
        "spec",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    Case(
        "ec2-alias-with-other-terms",
        EC2,
        setting("spec.amiSelectorTerms", [{"alias": "al2023@latest"}, {"id": "ami-123"}]),
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive",
    ),
    Case(
        "ec2-alias-without-version",
        EC2,
        setting("spec.amiSelectorTerms", [{"alias": "al2023"}]),
        "spec.amiSelectorTerms[0].alias",
        "must match the format 'family@version'",
    ),
    Case(
        "ec2-alias-unknown-family",
        EC2,
        setting("spec.amiSelectorTerms", [{"alias": "ubuntu@latest"}]),
        "spec.amiSelectorTerms[0].alias",
        "family is not supported",
    ),
    Case(
        "ec2-windows-alias-pinned",
        EC2,
        setting("spec.amiSelectorTerms", [{"alias": "windows2022@v1"}]),
        "spec.amiSelectorTerms[0].alias",
        "windows families may only specify version 'latest'",
    ),
    Case(
        "ec2-ami-family-mismatching-alias",
        EC2,
        setting("spec.amiFamily", "AL2"),
        "spec",
        "amiFamily must be 'AL2023' or 'Custom'",
    ),
    Case(
        "ec2-no-alias-no-ami-family",
        EC2_CUSTOM,
        lambda d: delete_path(d, "spec.amiFamily"),
        "spec",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ),
    Case(
        "ec2-empty-subnet-selector",
        EC2,
        setting("spec.subnetSelectorTerms", []),
        "spec.subnetSelectorTerms",
        "subnetSelectorTerms cannot be empty",
    ),
    Case(
        "ec2-subnet-id-and-tags",
        EC2,
        setting("spec.subnetSelectorTerms", [{"id": "subnet-1", "tags": {"a": "b"}}]),
        "spec.subnetSelectorTerms",
        "'id' is mutually exclusive",
    ),
    Case(
        "ec2-hop-limit-too-high",
        EC2,
        setting("spec.metadataOptions.httpPutResponseHopLimit", 65),
        "spec.metadataOptions.httpPutResponseHopLimit",
        "less than or equal to 64",
    ),
    Case(
        "ec2-image-gc-thresholds-reversed",
        EC2,
        setting("spec.kubelet.imageGCLowThresholdPercent", 90),
        "spec.kubelet",
        "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
    ),
    Case(
        "ec2-eviction-hard-unknown-signal",
        EC2,
        setting("spec.kubelet.evictionHard", {"memory.free": "5%"}),
        "spec.kubelet.evictionHard",
        "valid keys for evictionHard",
    ),
    Case(
        "ec2-restricted-tag",
        EC2,
        setting("spec.tags", {"kubernetes.io/cluster/other": "owned"}),
        "spec.tags",
        "restricted tag matching kubernetes.io/cluster/",
    ),
    Case(
        "ec2-two-root-volumes",
        EC2,
        lambda d: set_path(d, "spec.blockDeviceMappings[1].rootVolume", True),
        "spec.blockDeviceMappings",
        "must have only one blockDeviceMappings with rootVolume",
    ),
    Case(
        "ec2-volume-size-without-unit",
        EC2,
        setting("spec.blockDeviceMappings[0].ebs.volumeSize", "100"),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "should match",
    ),
    # AKSNodeClass
    Case(
        "aks-os-disk-too-small",
        AKS,
        setting("spec.osDiskSizeGB", 10),
        "spec.osDiskSizeGB",
        "greater than or equal to 30",
    ),
    Case(
        "aks-unknown-image-family",
        AKS,
        setting("spec.imageFamily", "Windows"),
        "spec.imageFamily",
        "Unsupported value",
    ),
    Case(
        "aks-max-pods-too-high",
        AKS,
        setting("spec.maxPods", 300),
        "spec.maxPods",
        "less than or equal to 250",
    ),
    Case(
        "aks-fips-on-ubuntu2404",
        AKS,
        setting("spec.imageFamily", "Ubuntu2404"),
        "spec",
        "FIPS is not yet supported for Ubuntu2404",
    ),
    Case(
        "aks-bad-subnet-id",
        AKS,
        setting("spec.vnetSubnetID", "subnet-1"),
        "spec.vnetSubnetID",
        "should match",
    ),
    Case(
        "aks-sysctl-out-of-bounds",
        AKS,
        setting("spec.linuxOSConfig", {"sysctls": {"vmMaxMapCount": 100}}),
        "spec.linuxOSConfig.sysctls.vmMaxMapCount",
        "greater than or equal to 65530",
    ),
    Case(
        "aks-rmem-default-above-max",
        AKS,
        setting("spec.linuxOSConfig",
                {"sysctls": {"netCoreRmemDefault": 300000, "netCoreRmemMax": 250000}}),
        "spec.linuxOSConfig.sysctls",
        "netCoreRmemDefault must be <= netCoreRmemMax",
    ),
    Case(
        "aks-port-range-reversed",
        AKS,
        setting("spec.linuxOSConfig", {"sysctls": {"netIPv4IPLocalPortRange": "50000 40000"}}),
        "spec.linuxOSConfig.sysctls",
        "netIPv4IPLocalPortRange first port must be <= last port",
    ),
    Case(
        "aks-local-dns-without-root-zone",
        AKS,
        setting("spec.localDNS", {
            "mode": "Preferred",
            "vnetDNSOverrides": [_dns_zone("cluster.local", "ClusterCoreDNS")],
            "kubeDNSOverrides": [_dns_zone(".", "ClusterCoreDNS"),
                                 _dns_zone("cluster.local", "ClusterCoreDNS")],
        }),
        "spec.localDNS.vnetDNSOverrides",
        "must contain required zones '.' and 'cluster.local'",
    ),
    Case(
        "aks-local-dns-cluster-local-to-vnet",
        AKS,
        setting("spec.localDNS", {
            "mode": "Required",
            "vnetDNSOverrides": [_dns_zone(".", "VnetDNS"), _dns_zone("cluster.local", "VnetDNS")],
            "kubeDNSOverrides": [_dns_zone(".", "ClusterCoreDNS"),
                                 _dns_zone("cluster.local", "ClusterCoreDNS")],
        }),
        "spec.localDNS.vnetDNSOverrides[1]",
        "'cluster.local' cannot be forwarded to VnetDNS",
    ),
    Case(
        "aks-thp-bad-value",
        AKS,
        setting("spec.linuxOSConfig", {"transparentHugePageEnabled": "sometimes"}),
        "spec.linuxOSConfig.transparentHugePageEnabled",
        "Unsupported value",
    ),
]


def test_the_table_is_large_enough_and_its_ids_are_unique() -> None:
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.cluster
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_invalid_manifest_is_rejected_naming_the_field(case: Case, cluster: Any) -> None:
    doc = copy.deepcopy(load_example(case.example))
    doc["metadata"]["name"] = unique_name("invalid")
    case.change(doc)
    switch = (
        crdsets.serving(cluster, case.crd_set)
        if case.crd_set != crdsets.DEFAULT
        else contextlib.nullcontext()
    )
    with switch, pytest.raises(KubectlError) as err:
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc))
    assert case.field + ":" in err.value.stderr, err.value.stderr
    assert case.message in err.value.stderr, err.value.stderr


@pytest.mark.cluster
def test_a_valid_manifest_passes_the_same_dry_run(cluster: Any) -> None:
    """The cases above fail because of their change, not because dry-run fails anyway."""
    for name in {c.example for c in CASES}:
        doc = copy.deepcopy(load_example(name))
        doc["metadata"]["name"] = unique_name("valid")
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc))


@pytest.mark.cluster
def test_gte_and_lte_requirements_are_accepted(cluster: Any) -> None:
    """Karpenter v1.9's operators pass the NodePool, NodeClaim and NodeOverlay CRDs."""
    bounds = [{"key": "karpenter.kwok.sh/instance-cpu", "operator": "Gte", "values": ["0"]},
              {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lte", "values": ["8"]}]
    for name, where in ((POOL, "spec.template.spec"), (CLAIM, "spec"), (OVERLAY, "spec")):
        doc = copy.deepcopy(load_example(name))
        doc["metadata"]["name"] = unique_name("gte")
        node: Any = doc
        for part in where.split("."):
            node = node[part]
        node["requirements"] = copy.deepcopy(bounds)
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc))


@pytest.mark.cluster
def test_local_dns_and_linux_os_config_are_kept_not_pruned(cluster: Any) -> None:
    """The AKSNodeClass CRD models localDNS and linuxOSConfig: the API server keeps them."""
    doc = copy.deepcopy(load_example(AKS))
    doc["metadata"]["name"] = unique_name("valid")
    dns = {"mode": "Preferred",
           "vnetDNSOverrides": [_dns_zone(".", "VnetDNS"),
                                _dns_zone("cluster.local", "ClusterCoreDNS")],
           "kubeDNSOverrides": [_dns_zone(".", "ClusterCoreDNS"),
                                _dns_zone("cluster.local", "ClusterCoreDNS")]}
    os_config = {"swapFileSize": "1Gi", "transparentHugePageEnabled": "madvise",
                 "sysctls": {"vmMaxMapCount": 262144, "netIPv4TCPTwReuse": True}}
    doc["spec"]["localDNS"] = dns
    doc["spec"]["linuxOSConfig"] = os_config
    done = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                           input=json.dumps(doc))
    spec = json.loads(done)["spec"]
    assert spec["localDNS"] == dns
    assert spec["linuxOSConfig"] == os_config


@pytest.mark.cluster
def test_connection_tracking_and_cpu_options_are_kept_not_pruned(cluster: Any) -> None:
    """Karpenter AWS v1.13+'s EC2NodeClass fields reach the stored object (they are hashed:
    a pruned one would drift every node Karpenter launched with it)."""
    doc = copy.deepcopy(load_example(EC2))
    doc["metadata"]["name"] = unique_name("valid")
    tracking = {"tcpEstablishedTimeout": 432000, "udpStreamTimeout": 60, "udpTimeout": 30}
    doc["spec"]["connectionTracking"] = tracking
    doc["spec"]["cpuOptions"] = {"nestedVirtualization": "enabled"}
    done = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                           input=json.dumps(doc))
    spec = json.loads(done)["spec"]
    assert spec["connectionTracking"] == tracking
    assert spec["cpuOptions"] == {"nestedVirtualization": "enabled"}


def test_nodeclassref_group_and_kind_cannot_change(created: Created, cluster: Any) -> None:
    doc = load_example(POOL)
    created.create(doc)
    doc["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.azure.com"
    doc["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = "AKSNodeClass"
    with pytest.raises(KubectlError) as err:
        cluster.kubectl("replace", "-f", "-", input=json.dumps(doc))
    assert "spec.template.spec.nodeClassRef:" in err.value.stderr
    assert "nodeClassRef.group is immutable" in err.value.stderr
    assert "nodeClassRef.kind is immutable" in err.value.stderr


@pytest.mark.cluster
def test_a_nodepool_cannot_turn_static_or_dynamic(created: Created, cluster: Any) -> None:
    doc = load_example(STATIC)
    created.create(doc)
    del doc["spec"]["replicas"]
    with pytest.raises(KubectlError) as err:
        cluster.kubectl("replace", "-f", "-", input=json.dumps(doc))
    assert "Cannot transition NodePool between static (replicas set) and dynamic" in (
        err.value.stderr)


@pytest.mark.cluster
def test_a_capacity_buffer_names_one_chunk_shape(cluster: Any) -> None:
    doc = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
           "metadata": {"name": unique_name("invalid"), "namespace": "default"},
           "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": 1,
                    "scalableRef": {"kind": "Deployment", "name": "web"}}}
    with pytest.raises(KubectlError) as err:
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc))
    assert "You must define either PodTemplateRef or ScalableRef, but not both" in (
        err.value.stderr)
    del doc["spec"]["scalableRef"], doc["spec"]["replicas"]
    with pytest.raises(KubectlError) as err:
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc))
    assert "If podTemplateRef is set, replicas or limits must also be set" in err.value.stderr


@pytest.mark.cluster
def test_nodeclaim_spec_is_immutable(created: Created, cluster: Any) -> None:
    doc = load_example(CLAIM)
    created.create(doc)
    doc["spec"]["expireAfter"] = "1h"
    with pytest.raises(KubectlError) as err:
        cluster.kubectl("replace", "-f", "-", input=json.dumps(doc))
    assert "spec: Invalid value" in err.value.stderr
    assert "spec is immutable" in err.value.stderr
