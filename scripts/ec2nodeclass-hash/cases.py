"""The EC2NodeClasses whose Karpenter AWS hash karpy's tests pin: named edge cases (every
hashed field, zero values, nil versus empty, list order, maps) plus seeded random ones.
Prints them as the JSON list ``main.go`` reads::

    python3 scripts/ec2nodeclass-hash/cases.py \\
      | (cd scripts/ec2nodeclass-hash && go run .) \\
      > tests/providers/aws/data/ec2nodeclass_hash_golden.json

Every EC2NodeClass is written as the API server stores it: ``metadataOptions`` carries
the CRD's defaults unless a case sets it.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

CA = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUN5RENDQWJDZ0F3SUJBZ0lCQURBTkJna3Foa2lH"
    "OXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
)
METADATA = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1, "httpTokens": "required"}
BASE: dict[str, Any] = {
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "role": "KarpenterNodeRole-demo",
    "metadataOptions": METADATA,
}
SIZES = ["8Gi", "20Gi", "1Ti", "500G", "1024Gi", "64000G"]
BDM_ROOT = {"deviceName": "/dev/xvda", "rootVolume": True,
            "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True,
                    "deleteOnTermination": True, "iops": 3000, "throughput": 125}}
BDM_DATA = {"deviceName": "/dev/xvdb",
            "ebs": {"volumeSize": "200Gi", "volumeType": "gp3", "kmsKeyID": "arn:aws:kms:k",
                    "snapshotID": "snap-0123456789abcdef0", "volumeInitializationRate": 200}}


def case(name: str, ca: str | None = None, drop: tuple[str, ...] = (),
         **spec_extra: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for key in drop:
        spec.pop(key)
    spec.update(copy.deepcopy(spec_extra))
    entry: dict[str, Any] = {
        "name": name,
        "ec2nodeclass": {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                         "metadata": {"name": name}, "spec": spec},
    }
    if ca is not None:
        entry["caBundle"] = ca
    return entry


def named() -> list[dict[str, Any]]:
    kubelet_full = {
        "clusterDNS": ["10.0.0.10", "10.0.0.11"], "maxPods": 110, "podsPerCore": 10,
        "systemReserved": {"cpu": "100m", "memory": "100Mi"},
        "kubeReserved": {"cpu": "200m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
        "evictionHard": {"memory.available": "5%"},
        "evictionSoft": {"memory.available": "10%"},
        "evictionSoftGracePeriod": {"memory.available": "1m"},
        "evictionMaxPodGracePeriod": 60, "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80, "cpuCFSQuota": True,
    }
    soft = {"evictionSoft": {"memory.available": "10%"}}
    return [
        case("minimal"),
        case("minimal-with-ca", ca=CA),
        case("minimal-with-empty-ca", ca=""),
        # Ignored fields: selectors, ipPrefixCount, and the literal amiFamily field.
        case("other-selectors",
             subnetSelectorTerms=[{"id": "subnet-0123"}],
             securityGroupSelectorTerms=[{"name": "sg-name"}, {"id": "sg-0123"}],
             capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}],
             amiSelectorTerms=[{"alias": "al2023@v20240807"}]),
        case("ip-prefix-count", ipPrefixCount=2),
        case("ami-family-al2023-with-ids", amiFamily="AL2023",
             amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}]),
        case("ami-family-bottlerocket", amiSelectorTerms=[{"alias": "bottlerocket@latest"}]),
        case("ami-family-custom", amiFamily="Custom",
             amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}], userData="#!/bin/bash\n"),
        case("user-data", userData="[settings.kubernetes]\nmax-pods = 10\n"),
        case("user-data-empty", userData=""),
        case("instance-profile", drop=("role",), instanceProfile="KarpenterNodeProfile"),
        case("other-role", role="OtherRole"),
        case("tags", tags={"team": "a", "env": "prod"}),
        case("tags-reordered", tags={"env": "prod", "team": "a"}),
        case("tags-empty", tags={}),
        case("tags-one-empty-value", tags={"team": ""}),
        case("kubelet-empty", kubelet={}),
        case("kubelet-full", kubelet=kubelet_full),
        case("kubelet-max-pods", kubelet={"maxPods": 110}),
        case("kubelet-max-pods-other", kubelet={"maxPods": 111}),
        case("kubelet-cluster-dns-reordered", kubelet={"clusterDNS": ["10.0.0.11", "10.0.0.10"]}),
        case("kubelet-cluster-dns", kubelet={"clusterDNS": ["10.0.0.10", "10.0.0.11"]}),
        case("kubelet-cluster-dns-empty", kubelet={"clusterDNS": []}),
        case("kubelet-reserved-empty", kubelet={"systemReserved": {}}),
        case("kubelet-grace-1m", kubelet={**soft, "evictionSoftGracePeriod":
                                          {"memory.available": "1m"}}),
        case("kubelet-grace-60s", kubelet={**soft, "evictionSoftGracePeriod":
                                           {"memory.available": "60s"}}),
        case("kubelet-grace-0s", kubelet={**soft, "evictionSoftGracePeriod":
                                          {"memory.available": "0s"}}),
        case("kubelet-cfs-quota-false", kubelet={"cpuCFSQuota": False}),
        case("kubelet-pods-per-core-zero", kubelet={"podsPerCore": 0}),
        case("bdm-root", blockDeviceMappings=[BDM_ROOT]),
        case("bdm-two", blockDeviceMappings=[BDM_ROOT, BDM_DATA]),
        case("bdm-two-reordered", blockDeviceMappings=[BDM_DATA, BDM_ROOT]),
        case("bdm-empty-list", blockDeviceMappings=[]),
        case("bdm-size-1024Gi", blockDeviceMappings=[
            {**BDM_ROOT, "ebs": {**BDM_ROOT["ebs"], "volumeSize": "1024Gi"}}]),
        case("bdm-size-1Ti", blockDeviceMappings=[
            {**BDM_ROOT, "ebs": {**BDM_ROOT["ebs"], "volumeSize": "1Ti"}}]),
        case("bdm-size-1000G", blockDeviceMappings=[
            {**BDM_ROOT, "ebs": {**BDM_ROOT["ebs"], "volumeSize": "1000G"}}]),
        case("bdm-size-1T", blockDeviceMappings=[
            {**BDM_ROOT, "ebs": {**BDM_ROOT["ebs"], "volumeSize": "1T"}}]),
        case("bdm-size-100G", blockDeviceMappings=[
            {**BDM_ROOT, "ebs": {**BDM_ROOT["ebs"], "volumeSize": "100G"}}]),
        case("bdm-size-20Gi", blockDeviceMappings=[
            {**BDM_ROOT, "ebs": {**BDM_ROOT["ebs"], "volumeSize": "20Gi"}}]),
        case("bdm-not-root", blockDeviceMappings=[{**BDM_ROOT, "rootVolume": False}]),
        case("bdm-no-ebs", blockDeviceMappings=[{"deviceName": "/dev/xvdc"}]),
        case("bdm-ebs-empty", blockDeviceMappings=[{"deviceName": "/dev/xvdc", "ebs": {}}]),
        case("bdm-encrypted-false", blockDeviceMappings=[
            {"deviceName": "/dev/xvdc", "ebs": {"encrypted": False}}]),
        case("instance-store-raid0", instanceStorePolicy="RAID0"),
        case("network-interfaces", networkInterfaces=[
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"}]),
        case("network-interfaces-reordered", networkInterfaces=[
            {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"},
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]),
        case("detailed-monitoring-true", detailedMonitoring=True),
        case("detailed-monitoring-false", detailedMonitoring=False),
        case("public-ip-true", associatePublicIPAddress=True),
        case("public-ip-false", associatePublicIPAddress=False),
        case("metadata-tokens-optional", metadataOptions={**METADATA, "httpTokens": "optional"}),
        case("metadata-hop-limit-2", metadataOptions={**METADATA, "httpPutResponseHopLimit": 2}),
        case("metadata-ipv6", metadataOptions={**METADATA, "httpProtocolIPv6": "enabled"}),
        case("context", context="cfr-0123"),
        case("placement-group-name", placementGroupSelector={"name": "pg-a"}),
        case("placement-group-id", placementGroupSelector={"id": "pg-0123456789abcdef0"}),
        case("connection-tracking-tcp", connectionTracking={"tcpEstablishedTimeout": 300}),
        case("connection-tracking-tcp-60", connectionTracking={"tcpEstablishedTimeout": 60}),
        case("connection-tracking-udp", connectionTracking={"udpStreamTimeout": 120,
                                                            "udpTimeout": 45}),
        case("connection-tracking-all", connectionTracking={
            "tcpEstablishedTimeout": 432000, "udpStreamTimeout": 180, "udpTimeout": 30}),
        case("cpu-options-nested-enabled", cpuOptions={"nestedVirtualization": "enabled"}),
        case("cpu-options-nested-disabled", cpuOptions={"nestedVirtualization": "disabled"}),
        # an empty object is a non-nil pointer to a zero struct, not nil
        case("cpu-options-empty", cpuOptions={}),
        case("everything", ca=CA, userData="#!/bin/bash\necho hi\n", tags={"team": "a"},
             kubelet=kubelet_full, blockDeviceMappings=[BDM_ROOT, BDM_DATA],
             instanceStorePolicy="RAID0", detailedMonitoring=True,
             associatePublicIPAddress=False, context="cfr-0123",
             placementGroupSelector={"name": "pg-a"},
             metadataOptions={**METADATA, "httpTokens": "optional"},
             connectionTracking={"tcpEstablishedTimeout": 350, "udpTimeout": 60},
             cpuOptions={"nestedVirtualization": "enabled"}),
    ]


def randomized(count: int, seed: int = 34) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        extra: dict[str, Any] = {}
        if rng.random() < 0.5:
            extra["tags"] = {f"k{j}": rng.choice(["", "a", "b", "long value"])
                             for j in range(rng.randint(0, 4))}
        if rng.random() < 0.5:
            extra["userData"] = rng.choice(["", "x", "#!/bin/sh\ntrue\n"])
        if rng.random() < 0.5:
            kubelet: dict[str, Any] = {}
            if rng.random() < 0.5:
                kubelet["maxPods"] = rng.randint(0, 250)
            if rng.random() < 0.5:
                kubelet["kubeReserved"] = {"cpu": f"{rng.randint(1, 999)}m"}
            if rng.random() < 0.3:
                kubelet["cpuCFSQuota"] = rng.random() < 0.5
            extra["kubelet"] = kubelet
        if rng.random() < 0.5:
            extra["blockDeviceMappings"] = [
                {"deviceName": f"/dev/xvd{chr(97 + j)}", "rootVolume": j == 0,
                 "ebs": {"volumeSize": rng.choice(SIZES),
                         "iops": rng.choice([3000, 16000]),
                         "encrypted": rng.random() < 0.5}}
                for j in range(rng.randint(0, 3))]
        if rng.random() < 0.3:
            extra["detailedMonitoring"] = rng.random() < 0.5
        if rng.random() < 0.3:
            hops = rng.randint(1, 64)
            extra["metadataOptions"] = {**METADATA, "httpPutResponseHopLimit": hops}
        out.append(case(f"random-{i}", ca=rng.choice([None, CA]), **extra))
    return out


if __name__ == "__main__":
    print(json.dumps(named() + randomized(40), indent=1))
