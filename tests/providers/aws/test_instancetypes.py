"""Instance-type sizing and labels, checked against Karpenter AWS's formulas with
EC2's own descriptions (moto ships DescribeInstanceTypes data taken from EC2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from karpy_aws._instancetypes import (
    EBS_CSI_DRIVER,
    NodeClassShape,
    SubnetZone,
    build_instance_type,
    ebs_attachment_limit,
    eni_limited_pods,
    eviction_threshold,
    kube_reserved,
    memory_capacity,
)
from karpy_aws._staticdata import static_data
from karpy_aws.apis import EC2NodeClass
from karpy_aws.apis import labels as aws
from moto.ec2.models.instance_types import INSTANCE_TYPES

from karpy.apis import labels as wk
from karpy.cloudprovider import OfferingKey
from karpy.scheduling import resources as res

MIB = 2**20
GIB = 2**30
ZONES = (SubnetZone("us-east-1a", "use1-az6"), SubnetZone("us-east-1b", "use1-az1"))


def ec2_info(name: str) -> dict[str, Any]:
    """EC2's description of ``name`` as moto serves it (moto's copy of EC2's data)."""
    return copy.deepcopy(dict(INSTANCE_TYPES[name]))


def build(name: str, shape: NodeClassShape | None = None, **kwargs: Any) -> Any:
    defaults: dict[str, Any] = {
        "region": "us-east-1",
        "offered_zones": ("us-east-1a", "us-east-1b"),
        "shape": shape or NodeClassShape(zones=ZONES),
        "price": lambda it, zone, ct: 0.096 if ct == "on-demand" else 0.03,
        "unavailable": lambda key: False,
        "bandwidth_mbps": static_data().network_bandwidth_mbps.get(name),
        "branch_enis": static_data().vpc_limits.get(name, (0, 0))[0],
    }
    defaults.update(kwargs)
    return build_instance_type(ec2_info(name), **defaults)


def test_m5_large_matches_karpenter_aws() -> None:
    it = build("m5.large")
    # 3 ENIs x (10 IPv4 - 1) + 2: the EKS AMI's eni-max-pods for m5.large
    assert it.capacity[res.PODS] == 29
    # 8192 MiB less ceil(7.5%) = 615 MiB of VM overhead
    assert it.capacity[res.MEMORY] == (8192 - 615) * MIB
    assert it.capacity[res.CPU] == 2000
    assert it.overhead.kube_reserved[res.CPU] == 70  # 6% of core 1 + 1% of core 2
    assert it.overhead.kube_reserved[res.MEMORY] == (11 * 29 + 255) * MIB
    assert it.overhead.eviction_threshold[res.MEMORY] == 100 * MIB
    assert it.overhead.eviction_threshold[res.EPHEMERAL_STORAGE] == 2 * GIB  # 10% of 20Gi
    assert it.allocatable[res.MEMORY] == (8192 - 615 - 574 - 100) * MIB
    labels = it.requirements.labels()
    assert labels[aws.LABEL_INSTANCE_FAMILY] == "m5"
    assert labels[aws.LABEL_INSTANCE_SIZE] == "large"
    assert labels[aws.LABEL_INSTANCE_CATEGORY] == "m"
    assert labels[aws.LABEL_INSTANCE_GENERATION] == "5"
    assert labels[aws.LABEL_INSTANCE_CPU] == "2"
    assert labels[aws.LABEL_INSTANCE_MEMORY] == "8192"
    assert labels[aws.LABEL_INSTANCE_HYPERVISOR] == "nitro"
    assert labels[aws.LABEL_INSTANCE_CPU_MANUFACTURER] == "intel"
    assert labels[aws.LABEL_INSTANCE_NETWORK_BANDWIDTH] == "750"
    assert it.capacity[aws.RESOURCE_AWS_POD_ENI] == 9  # m5.large: 9 branch ENIs
    assert labels[wk.LABEL_ARCH] == "amd64"
    assert labels[wk.LABEL_REGION] == "us-east-1"
    assert it.requirements[aws.LABEL_TOPOLOGY_ZONE_ID].sorted_values() == ["use1-az1", "use1-az6"]
    assert it.requirements[aws.LABEL_INSTANCE_GPU_COUNT].operator == "DoesNotExist"


def test_graviton_loses_64_mib_and_is_arm64() -> None:
    it = build("m6g.large")
    assert it.requirements.labels()[wk.LABEL_ARCH] == "arm64"
    mib = 8192 - 64
    assert it.capacity[res.MEMORY] == (mib - -(-mib * 75 // 1000)) * MIB


def test_kubelet_max_pods_and_pods_per_core_win_over_the_eni_limit() -> None:
    assert build("m5.large", NodeClassShape(zones=ZONES, max_pods=110)).capacity[res.PODS] == 110
    capped = build("m5.large", NodeClassShape(zones=ZONES, pods_per_core=4))
    assert capped.capacity[res.PODS] == 8  # 4 x 2 vCPU < 29
    # kube-reserved memory still follows the ENI limit on AL2023
    assert capped.overhead.kube_reserved[res.MEMORY] == (11 * 29 + 255) * MIB


def test_bottlerocket_sizes_kube_reserved_from_its_pods_and_ignores_pods_per_core() -> None:
    shape = NodeClassShape(zones=ZONES, ami_family="Bottlerocket", max_pods=50, pods_per_core=1)
    it = build("m5.large", shape)
    assert it.capacity[res.PODS] == 50
    assert it.overhead.kube_reserved[res.MEMORY] == (11 * 50 + 255) * MIB


def test_reserved_enis_reduce_max_pods() -> None:
    assert build("m5.large", reserved_enis=1).capacity[res.PODS] == 2 * 9 + 2


def test_kubelet_reservations_and_eviction_overrides() -> None:
    shape = NodeClassShape(
        zones=ZONES,
        kube_reserved=(("cpu", "200m"),),
        system_reserved=(("memory", "300Mi"),),
        eviction_hard=(("memory.available", "5%"), ("nodefs.available", "100%")),
        root_volume_bytes=100 * GIB,
    )
    it = build("m5.large", shape)
    assert it.overhead.kube_reserved[res.CPU] == 200
    assert it.overhead.system_reserved[res.MEMORY] == 300 * MIB
    assert it.overhead.eviction_threshold[res.MEMORY] == -(-it.capacity[res.MEMORY] * 5 // 100)
    assert it.overhead.eviction_threshold[res.EPHEMERAL_STORAGE] == 0  # 100% disables it
    assert it.capacity[res.EPHEMERAL_STORAGE] == 100 * GIB


def test_shape_reads_the_node_class() -> None:
    node_class = EC2NodeClass.model_validate(
        {
            "metadata": {"name": "x"},
            "spec": {
                "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                "role": "r",
                "kubelet": {"maxPods": 42, "kubeReserved": {"cpu": "1"}},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}},
                ],
            },
            "status": {"subnets": [{"id": "subnet-1", "zone": "z1", "zoneID": "z1-id"}]},
        }
    )
    shape = NodeClassShape.of(node_class)
    assert shape.ami_family == "Bottlerocket"
    assert shape.max_pods == 42
    assert shape.kube_reserved == (("cpu", "1"),)
    assert shape.root_volume_bytes == 80 * GIB  # Bottlerocket's data volume is /dev/xvdb
    assert shape.zones == (SubnetZone("z1", "z1-id"),)


def test_offerings_are_unavailable_where_not_offered_unpriced_or_marked() -> None:
    marked = OfferingKey("m5.large", "us-east-1b", "spot")
    it = build(
        "m5.large",
        offered_zones=("us-east-1a", "us-east-1b"),
        unavailable=lambda key: key == marked,
        price=lambda name, zone, ct: None if (zone, ct) == ("us-east-1a", "spot") else 0.1,
    )
    available = {(o.zone, o.capacity_type): o.available for o in it.offerings}
    assert available == {
        ("us-east-1a", "on-demand"): True,
        ("us-east-1a", "spot"): False,
        ("us-east-1b", "on-demand"): True,
        ("us-east-1b", "spot"): False,
    }
    assert it.requirements[wk.LABEL_CAPACITY_TYPE].sorted_values() == ["on-demand"]
    only_a = build("m5.large", offered_zones=("us-east-1a",))
    assert only_a.requirements[wk.LABEL_ZONE].sorted_values() == ["us-east-1a"]
    assert only_a.requirements[aws.LABEL_TOPOLOGY_ZONE_ID].sorted_values() == ["use1-az6"]


def test_windows_skips_arm64_types() -> None:
    assert build("m6g.large", NodeClassShape(zones=ZONES, ami_family="Windows2022")) is None
    win = build("m5.large", NodeClassShape(zones=ZONES, ami_family="Windows2022"))
    assert win.capacity[res.PODS] == 110
    assert win.requirements.labels()[wk.LABEL_OS] == "windows"


def test_gpu_labels_and_resources() -> None:
    it = build("g4dn.xlarge")
    labels = it.requirements.labels()
    assert labels[aws.LABEL_INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert labels[aws.LABEL_INSTANCE_GPU_COUNT] == "1"
    assert it.capacity[aws.RESOURCE_NVIDIA_GPU] == 1


@pytest.mark.parametrize(
    ("cpu", "expected"), [(1000, 60), (2000, 70), (4000, 80), (8000, 90), (96000, 310)]
)
def test_kube_reserved_cpu_steps(cpu: int, expected: int) -> None:
    assert kube_reserved(cpu, 10)[res.CPU] == expected


@given(
    enis=st.integers(min_value=1, max_value=16),
    ips=st.integers(min_value=1, max_value=50),
    reserved=st.integers(min_value=0, max_value=20),
)
def test_eni_limited_pods_is_never_negative_and_shrinks_with_reserved_enis(
    enis: int, ips: int, reserved: int
) -> None:
    info = {
        "NetworkInfo": {
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": enis}],
            "Ipv4AddressesPerInterface": ips,
        }
    }
    pods = eni_limited_pods(info, reserved_enis=reserved)
    assert pods >= 0
    assert pods <= eni_limited_pods(info, reserved_enis=0)
    if reserved < enis:
        assert pods == (enis - reserved) * (ips - 1) + 2


@given(
    mib=st.integers(min_value=512, max_value=24 * 1024 * 1024),
    overhead=st.floats(min_value=0, max_value=0.5),
)
def test_memory_capacity_takes_at_least_the_overhead(mib: int, overhead: float) -> None:
    info = {
        "MemoryInfo": {"SizeInMiB": mib},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    }
    got = memory_capacity(info, overhead)
    assert got <= mib * MIB * (1 - overhead) + 1
    assert got >= mib * MIB * (1 - overhead) - MIB


def test_eviction_threshold_defaults() -> None:
    assert eviction_threshold(8 * GIB, 20 * GIB) == {
        res.MEMORY: 100 * MIB,
        res.EPHEMERAL_STORAGE: 2 * GIB,
    }


# -- EBS attachment limits (issue 41 item 3: from EC2's data, not only CSINode) -----------


@pytest.mark.parametrize(("name", "pods", "limit"), [
    # shared Nitro slots: 27 with one interface; 29 pods need 3 interfaces; root takes 1
    ("m5.large", 29, 24),
    # one NVMe instance store too (EC2 counts it in the 26)
    ("m5d.large", 29, 23),
    # a dedicated EBS limit does not move with the interfaces
    ("m7i.large", 29, 31),
    # Xen: 40, whatever the interfaces
    ("t2.micro", 4, 39),
    # 110 pods on 15 interfaces of 50 IPs: 3 interfaces
    ("c5.24xlarge", 110, 24),
])
def test_the_ebs_limit_follows_ec2s_attachment_rules(name: str, pods: int, limit: int) -> None:
    assert ebs_attachment_limit(ec2_info(name), pods=pods, reserved_enis=0) == limit


def test_every_instance_type_declares_its_ebs_limit_for_the_planner() -> None:
    it = build("m5.large")
    assert it.volume_attachment_limits == {EBS_CSI_DRIVER: 24}
    # interfaces reserved for other uses take slots from a shared limit
    info = ec2_info("c5.24xlarge")
    assert ebs_attachment_limit(info, pods=110, reserved_enis=2) == 22


def test_an_older_description_without_the_field_falls_back_to_the_slot_rules() -> None:
    info = ec2_info("m5d.large")
    del info["EbsInfo"]["MaximumEbsAttachments"]
    # 28 shared slots - 1 interface - 1 instance store, then 3 interfaces and the root
    assert ebs_attachment_limit(info, pods=29, reserved_enis=0) == 23
    xen = ec2_info("t2.micro")
    del xen["EbsInfo"]["MaximumEbsAttachments"]
    assert ebs_attachment_limit(xen, pods=4, reserved_enis=0) == 38
