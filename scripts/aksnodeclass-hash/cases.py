"""The AKSNodeClasses whose Karpenter Azure hash karpy's tests pin: named edge cases (every
hashed field, zero values, nil versus empty, list order) plus seeded random ones. Prints
them as the JSON list ``main.go`` reads::

    python3 scripts/aksnodeclass-hash/cases.py \\
      | (cd scripts/aksnodeclass-hash && go run .) \\
      > tests/providers/azure/data/aksnodeclass_hash_golden.json

Every AKSNodeClass is written as the API server stores it: the CRD's defaults
(``osDiskSizeGB: 128``, ``imageFamily: Ubuntu``, the kubelet's and the GPU's) filled in.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

KUBELET_DEFAULTS = {"cpuManagerPolicy": "none", "cpuCFSQuota": True,
                    "cpuCFSQuotaPeriod": "100ms", "topologyManagerPolicy": "none",
                    "containerLogMaxSize": "50Mi", "containerLogMaxFiles": 5}
SUBNET = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/"
          "Microsoft.Network/virtualNetworks/vnet/subnets/nodes")
OVERRIDE = {"zone": ".", "queryLogging": "Error", "protocol": "PreferUDP",
            "forwardDestination": "VnetDNS", "forwardPolicy": "Sequential",
            "maxConcurrent": 1000, "cacheDuration": "1h", "serveStaleDuration": "1h",
            "serveStale": "Verify"}
CLUSTER_OVERRIDE = {**OVERRIDE, "zone": "cluster.local", "forwardDestination": "ClusterCoreDNS",
                    "cacheDuration": "30m", "serveStale": "Immediate"}


def case(name: str, **spec_extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"osDiskSizeGB": 128, "imageFamily": "Ubuntu"}
    spec.update(copy.deepcopy(spec_extra))
    if isinstance(spec.get("kubelet"), dict):
        spec["kubelet"] = {**KUBELET_DEFAULTS, **spec["kubelet"]}
    if isinstance(spec.get("gpu"), dict):
        spec["gpu"] = {"mode": "Driver", **spec["gpu"]}
    return {
        "name": name,
        "aksnodeclass": {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
                         "metadata": {"name": name}, "spec": spec},
    }


def named() -> list[dict[str, Any]]:
    sysctls_full = {
        "fsAioMaxNr": 65536, "fsFileMax": 12000500, "fsInotifyMaxUserWatches": 1048576,
        "fsNrOpen": 1048576, "kernelThreadsMax": 100000, "netCoreNetdevMaxBacklog": 1000,
        "netCoreOptmemMax": 20480, "netCoreRmemDefault": 212992, "netCoreRmemMax": 212992,
        "netCoreSomaxconn": 16384, "netCoreWmemDefault": 212992, "netCoreWmemMax": 212992,
        "netIPv4IPLocalPortRange": "32768 60999", "netIPv4NeighDefaultGcThresh1": 4096,
        "netIPv4NeighDefaultGcThresh2": 8192, "netIPv4NeighDefaultGcThresh3": 16384,
        "netIPv4TCPFinTimeout": 60, "netIPv4TCPKeepaliveProbes": 9,
        "netIPv4TCPKeepaliveTime": 7200, "netIPv4TCPMaxSynBacklog": 16384,
        "netIPv4TCPMaxTwBuckets": 32768, "netIPv4TCPTwReuse": True,
        "netIPv4TCPKeepaliveIntvl": 75, "netNetfilterNfConntrackBuckets": 65536,
        "netNetfilterNfConntrackMax": 131072, "vmMaxMapCount": 65530, "vmSwappiness": 60,
        "vmVfsCachePressure": 100,
    }
    return [
        case("minimal"),
        case("tags", tags={"team": "a"}),  # tags: hash:"ignore"
        case("tags-empty", tags={}),
        case("subnet", vnetSubnetID=SUBNET),
        case("os-disk-256", osDiskSizeGB=256),
        case("image-azure-linux", imageFamily="AzureLinux"),
        case("image-ubuntu2204", imageFamily="Ubuntu2204"),
        case("fips", fipsMode="FIPS"),
        case("fips-disabled", fipsMode="Disabled"),
        case("max-pods", maxPods=110),
        case("max-pods-other", maxPods=30),
        case("kubelet-defaults", kubelet={}),
        case("kubelet-static-cpu", kubelet={"cpuManagerPolicy": "static"}),
        case("kubelet-cfs-quota-false", kubelet={"cpuCFSQuota": False}),
        case("kubelet-cfs-period-200ms", kubelet={"cpuCFSQuotaPeriod": "200ms"}),
        case("kubelet-cfs-period-0.2s", kubelet={"cpuCFSQuotaPeriod": "0.2s"}),
        case("kubelet-image-gc", kubelet={"imageGCHighThresholdPercent": 85,
                                          "imageGCLowThresholdPercent": 80}),
        case("kubelet-topology", kubelet={"topologyManagerPolicy": "best-effort"}),
        case("kubelet-sysctls", kubelet={"allowedUnsafeSysctls": ["kernel.msg*", "net.ipv4.*"]}),
        case("kubelet-sysctls-reordered",
             kubelet={"allowedUnsafeSysctls": ["net.ipv4.*", "kernel.msg*"]}),
        case("kubelet-sysctls-empty", kubelet={"allowedUnsafeSysctls": []}),
        case("kubelet-log-size", kubelet={"containerLogMaxSize": "100Mi"}),
        case("kubelet-log-files", kubelet={"containerLogMaxFiles": 10}),
        case("kubelet-pids", kubelet={"podPidsLimit": 4096}),
        case("kubelet-fail-swap-on-false", kubelet={"failSwapOn": False}),
        case("security-empty", security={}),
        case("security-encryption", security={"encryptionAtHost": True}),
        case("security-encryption-false", security={"encryptionAtHost": False}),
        case("gpu-driver", gpu={}),
        case("gpu-none", gpu={"mode": "None"}),
        case("artifact-streaming", artifactStreaming={"enabled": True}),
        case("artifact-streaming-false", artifactStreaming={"enabled": False}),
        case("artifact-streaming-empty", artifactStreaming={}),
        case("local-dns", localDNS={"mode": "Preferred", "vnetDNSOverrides": [OVERRIDE],
                                    "kubeDNSOverrides": [CLUSTER_OVERRIDE]}),
        case("local-dns-swapped", localDNS={"mode": "Preferred",
                                            "vnetDNSOverrides": [CLUSTER_OVERRIDE],
                                            "kubeDNSOverrides": [OVERRIDE]}),
        case("local-dns-two-reordered", localDNS={
            "mode": "Preferred", "vnetDNSOverrides": [CLUSTER_OVERRIDE, OVERRIDE],
            "kubeDNSOverrides": []}),
        case("local-dns-two", localDNS={
            "mode": "Preferred", "vnetDNSOverrides": [OVERRIDE, CLUSTER_OVERRIDE],
            "kubeDNSOverrides": []}),
        case("local-dns-cache-60m", localDNS={
            "mode": "Preferred", "vnetDNSOverrides": [{**OVERRIDE, "cacheDuration": "60m"}],
            "kubeDNSOverrides": []}),
        case("local-dns-cache-1h", localDNS={
            "mode": "Preferred", "vnetDNSOverrides": [OVERRIDE], "kubeDNSOverrides": []}),
        case("local-dns-disabled", localDNS={"mode": "Disabled", "vnetDNSOverrides": [],
                                             "kubeDNSOverrides": []}),
        # A swap file needs failSwapOn: false (the CRD's rule, which the model reads too).
        case("linux-os-swap", kubelet={"failSwapOn": False},
             linuxOSConfig={"swapFileSize": "1500Mi"}),
        case("linux-os-thp", linuxOSConfig={"transparentHugePageDefrag": "madvise",
                                            "transparentHugePageEnabled": "never"}),
        case("linux-os-empty", linuxOSConfig={}),
        case("linux-os-sysctls-empty", linuxOSConfig={"sysctls": {}}),
        case("linux-os-sysctls-full", linuxOSConfig={"sysctls": sysctls_full}),
        case("linux-os-tw-reuse-false", linuxOSConfig={"sysctls": {"netIPv4TCPTwReuse": False}}),
        case("everything", vnetSubnetID=SUBNET, osDiskSizeGB=64, imageFamily="AzureLinux",
             fipsMode="FIPS", tags={"team": "a"}, maxPods=50,
             kubelet={"cpuManagerPolicy": "static", "podPidsLimit": 100, "failSwapOn": False},
             security={"encryptionAtHost": True}, gpu={"mode": "None"},
             artifactStreaming={"enabled": True},
             localDNS={"mode": "Required", "vnetDNSOverrides": [OVERRIDE],
                       "kubeDNSOverrides": [CLUSTER_OVERRIDE]},
             linuxOSConfig={"swapFileSize": "2Gi", "sysctls": {"vmSwappiness": 10}}),
    ]


def randomized(count: int, seed: int = 34) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        extra: dict[str, Any] = {}
        if rng.random() < 0.5:
            extra["osDiskSizeGB"] = rng.choice([30, 64, 128, 512, 2048])
        if rng.random() < 0.5:
            extra["imageFamily"] = rng.choice(["Ubuntu", "Ubuntu2204", "Ubuntu2404",
                                               "AzureLinux"])
        if rng.random() < 0.4:
            extra["maxPods"] = rng.randint(10, 250)
        if rng.random() < 0.5:
            kubelet: dict[str, Any] = {}
            if rng.random() < 0.5:
                kubelet["containerLogMaxFiles"] = rng.randint(2, 20)
            if rng.random() < 0.5:
                kubelet["podPidsLimit"] = rng.randint(100, 100000)
            if rng.random() < 0.3:
                kubelet["cpuCFSQuota"] = rng.random() < 0.5
            extra["kubelet"] = kubelet
        if rng.random() < 0.3:
            extra["security"] = {"encryptionAtHost": rng.random() < 0.5}
        if rng.random() < 0.3:
            extra["linuxOSConfig"] = {"sysctls": {"vmSwappiness": rng.randint(0, 100),
                                                  "netCoreSomaxconn": rng.randint(4096, 9999)}}
        if rng.random() < 0.3:
            extra["tags"] = {f"k{j}": "v" for j in range(rng.randint(0, 3))}
        out.append(case(f"random-{i}", **extra))
    return out


if __name__ == "__main__":
    print(json.dumps(named() + randomized(30), indent=1))
