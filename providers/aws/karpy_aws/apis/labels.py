"""The AWS provider's well-known labels, annotations, tags and values
(``karpenter.k8s.aws/instance-*`` and friends), exactly as Karpenter's AWS provider names them."""

from __future__ import annotations

from typing import Final

from karpy.apis.labels import LABEL_NODEPOOL, LABEL_WINDOWS_BUILD

GROUP: Final = "karpenter.k8s.aws"
COMPATIBILITY_GROUP: Final = "compatibility." + GROUP

LABEL_CAPACITY_RESERVATION_ID: Final = GROUP + "/capacity-reservation-id"
LABEL_CAPACITY_RESERVATION_TYPE: Final = GROUP + "/capacity-reservation-type"
LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: Final = GROUP + "/capacity-reservation-interruptible"
LABEL_INSTANCE_HYPERVISOR: Final = GROUP + "/instance-hypervisor"
LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: Final = (
    GROUP + "/instance-encryption-in-transit-supported"
)
LABEL_INSTANCE_CATEGORY: Final = GROUP + "/instance-category"
LABEL_INSTANCE_CAPABILITY_FLEX: Final = GROUP + "/instance-capability-flex"
LABEL_INSTANCE_FAMILY: Final = GROUP + "/instance-family"
LABEL_INSTANCE_GENERATION: Final = GROUP + "/instance-generation"
LABEL_INSTANCE_LOCAL_NVME: Final = GROUP + "/instance-local-nvme"
LABEL_INSTANCE_SIZE: Final = GROUP + "/instance-size"
LABEL_INSTANCE_CPU: Final = GROUP + "/instance-cpu"
LABEL_INSTANCE_CPU_MANUFACTURER: Final = GROUP + "/instance-cpu-manufacturer"
LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: Final = (
    GROUP + "/instance-cpu-sustained-clock-speed-mhz"
)
LABEL_INSTANCE_MEMORY: Final = GROUP + "/instance-memory"
LABEL_INSTANCE_EBS_BANDWIDTH: Final = GROUP + "/instance-ebs-bandwidth"
LABEL_INSTANCE_NETWORK_BANDWIDTH: Final = GROUP + "/instance-network-bandwidth"
LABEL_INSTANCE_GPU_NAME: Final = GROUP + "/instance-gpu-name"
LABEL_INSTANCE_GPU_MANUFACTURER: Final = GROUP + "/instance-gpu-manufacturer"
LABEL_INSTANCE_GPU_COUNT: Final = GROUP + "/instance-gpu-count"
LABEL_INSTANCE_GPU_MEMORY: Final = GROUP + "/instance-gpu-memory"
LABEL_INSTANCE_ACCELERATOR_NAME: Final = GROUP + "/instance-accelerator-name"
LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: Final = GROUP + "/instance-accelerator-manufacturer"
LABEL_INSTANCE_ACCELERATOR_COUNT: Final = GROUP + "/instance-accelerator-count"
LABEL_INSTANCE_TENANCY: Final = GROUP + "/instance-tenancy"
LABEL_PLACEMENT_GROUP_ID: Final = GROUP + "/placement-group-id"
LABEL_PLACEMENT_GROUP_PARTITION: Final = GROUP + "/placement-group-partition"
#: The name of the node's EC2NodeClass.
LABEL_NODECLASS: Final = GROUP + "/ec2nodeclass"
LABEL_TOPOLOGY_ZONE_ID: Final = "topology.k8s.aws/zone-id"

#: Labels the AWS provider sets and that NodePools may use despite the reserved domain.
WELL_KNOWN_LABELS: Final = (
    LABEL_INSTANCE_TENANCY,
    LABEL_CAPACITY_RESERVATION_TYPE,
    LABEL_CAPACITY_RESERVATION_ID,
    LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    LABEL_NODECLASS,
    LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_HYPERVISOR,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_LOCAL_NVME,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_CPU_MANUFACTURER,
    LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_EBS_BANDWIDTH,
    LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_ACCELERATOR_NAME,
    LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
    LABEL_INSTANCE_ACCELERATOR_COUNT,
    LABEL_INSTANCE_CAPABILITY_FLEX,
    LABEL_PLACEMENT_GROUP_ID,
    LABEL_PLACEMENT_GROUP_PARTITION,
)
#: Everything the scheduler may see on an AWS node besides the core well-known labels.
SCHEDULING_LABELS: Final = (*WELL_KNOWN_LABELS, LABEL_TOPOLOGY_ZONE_ID, LABEL_WINDOWS_BUILD)

ANNOTATION_EC2NODECLASS_HASH: Final = GROUP + "/ec2nodeclass-hash"
ANNOTATION_EC2NODECLASS_HASH_VERSION: Final = GROUP + "/ec2nodeclass-hash-version"
ANNOTATION_INSTANCE_TAGGED: Final = GROUP + "/tagged"
ANNOTATION_INSTANCE_PROFILE: Final = GROUP + "/instance-profile-name"
ANNOTATION_CLUSTER_NAME_TAGGED: Final = COMPATIBILITY_GROUP + "/cluster-name-tagged"

TERMINATION_FINALIZER: Final = GROUP + "/termination"

# EC2 tags karpy writes and users may not override.
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NODEPOOL: Final = LABEL_NODEPOOL
TAG_NODECLASS: Final = LABEL_NODECLASS
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_NAME: Final = "Name"

AMI_FAMILY_AL2: Final = "AL2"
AMI_FAMILY_AL2023: Final = "AL2023"
AMI_FAMILY_BOTTLEROCKET: Final = "Bottlerocket"
AMI_FAMILY_WINDOWS2019: Final = "Windows2019"
AMI_FAMILY_WINDOWS2022: Final = "Windows2022"
AMI_FAMILY_WINDOWS2025: Final = "Windows2025"
AMI_FAMILY_CUSTOM: Final = "Custom"
#: The v1beta1 family that v1 no longer supports.
AMI_FAMILY_UBUNTU: Final = "Ubuntu"
#: AMI families by the family part of an alias ("al2023@latest" -> AL2023).
AMI_FAMILY_BY_ALIAS: Final = {
    "al2": AMI_FAMILY_AL2,
    "al2023": AMI_FAMILY_AL2023,
    "bottlerocket": AMI_FAMILY_BOTTLEROCKET,
    "windows2019": AMI_FAMILY_WINDOWS2019,
    "windows2022": AMI_FAMILY_WINDOWS2022,
    "windows2025": AMI_FAMILY_WINDOWS2025,
}

RESOURCE_NVIDIA_GPU: Final = "nvidia.com/gpu"
RESOURCE_AMD_GPU: Final = "amd.com/gpu"
RESOURCE_AWS_NEURON: Final = "aws.amazon.com/neuron"
RESOURCE_AWS_NEURON_CORE: Final = "aws.amazon.com/neuroncore"
RESOURCE_HABANA_GAUDI: Final = "habana.ai/gaudi"
RESOURCE_AWS_POD_ENI: Final = "vpc.amazonaws.com/pod-eni"
RESOURCE_PRIVATE_IPV4_ADDRESS: Final = "vpc.amazonaws.com/PrivateIPv4Address"
RESOURCE_EFA: Final = "vpc.amazonaws.com/efa"

#: Values of the capacity type and tenancy labels on AWS.
TENANCY_DEFAULT: Final = "default"
TENANCY_DEDICATED: Final = "dedicated"
