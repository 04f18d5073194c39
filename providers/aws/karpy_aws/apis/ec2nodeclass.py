"""The ``karpenter.k8s.aws/v1`` EC2NodeClass: how karpy launches EC2 instances (AMIs,
subnets, security groups, IAM, user data, kubelet, block devices, metadata options).

The schema follows Karpenter's AWS provider v1 (v1.12; ``connectionTracking`` and
``cpuOptions`` as of v1.14.1) field for field, with its defaults, bounds, patterns and CEL
rules, so existing manifests apply unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field

from karpy.apis.conditions import ConditionSet, utc_now
from karpy.apis.core import Condition, ConditionList, NodeSelectorRequirement, ObjectMeta, Resource
from karpy.apis.model import (
    CRDInfo,
    KubeModel,
    PrinterColumn,
    QuantityString,
    Rule,
    validations,
)
from karpy.apis.quantity import MAX_QUANTITY_LENGTH
from karpy_aws.apis.labels import AMI_FAMILY_BY_ALIAS, AMI_FAMILY_CUSTOM, GROUP

__all__ = [
    "AMI",
    "CONDITION_AMIS_READY",
    "CONDITION_CAPACITY_RESERVATIONS_READY",
    "CONDITION_INSTANCE_PROFILE_READY",
    "CONDITION_PLACEMENT_GROUP_READY",
    "CONDITION_SECURITY_GROUPS_READY",
    "CONDITION_SUBNETS_READY",
    "CONDITION_VALIDATION_SUCCEEDED",
    "READY_DEPENDENTS",
    "AMISelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "CPUOptions",
    "CapacityReservation",
    "CapacityReservationSelectorTerm",
    "ConnectionTracking",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "EC2NodeClassStatus",
    "KubeletConfiguration",
    "MetadataOptions",
    "NetworkInterface",
    "PlacementGroupSelector",
    "SecurityGroup",
    "SecurityGroupSelectorTerm",
    "Subnet",
    "SubnetSelectorTerm",
]

CONDITION_SUBNETS_READY: Final = "SubnetsReady"
CONDITION_SECURITY_GROUPS_READY: Final = "SecurityGroupsReady"
CONDITION_AMIS_READY: Final = "AMIsReady"
CONDITION_INSTANCE_PROFILE_READY: Final = "InstanceProfileReady"
CONDITION_CAPACITY_RESERVATIONS_READY: Final = "CapacityReservationsReady"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
CONDITION_PLACEMENT_GROUP_READY: Final = "PlacementGroupReady"
#: the conditions Ready summarises (others, such as CapacityReservationsReady, report
#: without stopping launches)
READY_DEPENDENTS: Final = (
    CONDITION_AMIS_READY,
    CONDITION_SUBNETS_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_VALIDATION_SUCCEEDED,
    CONDITION_PLACEMENT_GROUP_READY,
)

_SELECTOR_TAGS_RULE = Rule(
    "self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported"
)
SelectorTags = Annotated[
    dict[str, str], Field(max_length=20, json_schema_extra=validations(_SELECTOR_TAGS_RULE))
]
_TAGS_DESCRIPTION = "Tags the resource must carry; '*' as a value matches any value of the key."


class SubnetSelectorTerm(KubeModel):
    """Selects subnets by tags or by ID; the fields of one term are ANDed."""

    tags: SelectorTags = Field(default_factory=dict, description=_TAGS_DESCRIPTION)
    id: str | None = Field(None, pattern="subnet-[0-9a-z]+", description="The subnet ID.")


class SecurityGroupSelectorTerm(KubeModel):
    """Selects security groups by tags, ID or name; the fields of one term are ANDed."""

    tags: SelectorTags = Field(default_factory=dict, description=_TAGS_DESCRIPTION)
    id: str | None = Field(None, pattern="sg-[0-9a-z]+", description="The security group ID.")
    name: str | None = Field(
        None, description="The security group's name (its GroupName, not its Name tag)."
    )


class CapacityReservationSelectorTerm(KubeModel):
    """Selects capacity reservations by tags, ID, owner or match criteria."""

    tags: SelectorTags = Field(default_factory=dict, description=_TAGS_DESCRIPTION)
    id: str | None = Field(None, pattern="^cr-[0-9a-z]+$", description="The reservation ID.")
    owner_id: str | None = Field(
        None,
        alias="ownerID",
        pattern="^[0-9]{12}$",
        description="The AWS account ID that owns the reservation.",
    )
    instance_match_criteria: Literal["open", "targeted"] | None = Field(
        None, description="Which launches the reservation accepts: open or targeted."
    )


class PlacementGroupSelector(KubeModel):
    """Names the placement group instances launch into, by name or by ID."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"
            ),
            Rule("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
        )
    )

    name: str | None = Field(None, min_length=1, description="The placement group's name.")
    id: str | None = Field(None, pattern="^pg-[0-9a-z]+$", description="The placement group ID.")


_ALIAS_FAMILIES = "'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"


class AMISelectorTerm(KubeModel):
    """Selects AMIs: an EKS-optimized alias (family@version) alone, or by ID, name, owner,
    tags or SSM parameter."""

    alias: str | None = Field(
        None,
        max_length=30,
        description=(
            "An EKS-optimized AMI as family@version: al2, al2023, bottlerocket, windows2019, "
            "windows2022 or windows2025, at a pinned version (al2023@v20240625) or latest. "
            "Windows families only support latest."
        ),
        json_schema_extra=validations(
            Rule(
                "self.matches('^[a-zA-Z0-9]+@.+$')",
                "'alias' is improperly formatted, must match the format 'family@version'",
            ),
            Rule(
                "self.split('@')[0] in "
                "['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']",
                f"family is not supported, must be one of the following: {_ALIAS_FAMILIES}",
            ),
            Rule(
                "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? "
                "self.split('@')[1] == 'latest' : true",
                "windows families may only specify version 'latest'",
            ),
        ),
    )
    tags: SelectorTags = Field(default_factory=dict, description=_TAGS_DESCRIPTION)
    id: str | None = Field(None, pattern="ami-[0-9a-z]+", description="The AMI ID.")
    name: str | None = Field(None, description="The AMI's name (its Name field, not its Name tag).")
    owner: str | None = Field(
        None,
        description="The AMI owner: an account ID, self, amazon or aws-marketplace.",
    )
    ssm_parameter: str | None = Field(
        None, description="The name or ARN of an SSM parameter holding the AMI ID."
    )

    @property
    def alias_family(self) -> str | None:
        """The AMI family of the alias (AL2023 for "al2023@latest"), or None."""
        if not self.alias:
            return None
        return AMI_FAMILY_BY_ALIAS.get(self.alias.split("@", 1)[0].lower())

    @property
    def alias_version(self) -> str | None:
        """The version part of the alias ("latest", "v20240625"), or None."""
        if not self.alias or "@" not in self.alias:
            return None
        return self.alias.split("@", 1)[1]


_EVICTION_SIGNALS = (
    "'memory.available','nodefs.available','nodefs.inodesFree',"
    "'imagefs.available','imagefs.inodesFree','pid.available'"
)
_EVICTION_RULE_EXPR = f"self.all(x, x in [{_EVICTION_SIGNALS}])"
_EVICTION_THRESHOLD_PATTERN = (
    r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$"
)
_RESERVED_KEYS_EXPR = "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"


def _eviction_rules(name: str) -> dict[str, object]:
    return validations(
        Rule(_EVICTION_RULE_EXPR, f"valid keys for {name} are [{_EVICTION_SIGNALS}]")
    )


def _reserved_rules(name: str) -> dict[str, object]:
    return validations(
        Rule(
            _RESERVED_KEYS_EXPR,
            f"valid keys for {name} are ['cpu','memory','ephemeral-storage','pid']",
        ),
        Rule(
            "self.all(x, !self[x].startsWith('-'))",
            f"{name} value cannot be a negative resource quantity",
        ),
    )


EvictionThreshold = Annotated[
    str, Field(pattern=_EVICTION_THRESHOLD_PATTERN, max_length=MAX_QUANTITY_LENGTH)
]
ReservedQuantity = QuantityString
EvictionHard = Annotated[
    dict[str, EvictionThreshold], Field(json_schema_extra=_eviction_rules("evictionHard"))
]
EvictionSoft = Annotated[
    dict[str, EvictionThreshold], Field(json_schema_extra=_eviction_rules("evictionSoft"))
]
EvictionSoftGracePeriod = Annotated[
    dict[str, str], Field(json_schema_extra=_eviction_rules("evictionSoftGracePeriod"))
]
KubeReserved = Annotated[
    dict[str, ReservedQuantity], Field(json_schema_extra=_reserved_rules("kubeReserved"))
]
SystemReserved = Annotated[
    dict[str, ReservedQuantity], Field(json_schema_extra=_reserved_rules("systemReserved"))
]


class KubeletConfiguration(KubeModel):
    """Kubelet settings for the nodes; they also shape how much of a node pods can use."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  "
                "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            ),
            Rule(
                "has(self.evictionSoft) ? "
                "self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
            ),
            Rule(
                "has(self.evictionSoftGracePeriod) ? "
                "self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            ),
        )
    )

    cluster_dns: list[str] = Field(
        default_factory=list,
        alias="clusterDNS",
        description="IP addresses of the cluster DNS servers the kubelet hands to pods.",
    )
    max_pods: int | None = Field(
        None,
        ge=0,
        description="The most pods the node runs; default from the instance type's ENI limits.",
        json_schema_extra={"format": "int32"},
    )
    pods_per_core: int | None = Field(
        None,
        ge=0,
        description="Pods per vCPU; the smaller of this times vCPUs and maxPods applies.",
        json_schema_extra={"format": "int32"},
    )
    system_reserved: SystemReserved = Field(
        default_factory=dict,
        description="Resources held back for OS daemons (cpu, memory, ephemeral-storage, pid).",
    )
    kube_reserved: KubeReserved = Field(
        default_factory=dict,
        description="Resources held back for Kubernetes daemons (cpu, memory, ...).",
    )
    eviction_hard: EvictionHard = Field(
        default_factory=dict,
        description="Thresholds that evict pods at once (e.g. memory.available: 5%).",
    )
    eviction_soft: EvictionSoft = Field(
        default_factory=dict,
        description="Eviction thresholds that evict after their grace period.",
    )
    eviction_soft_grace_period: EvictionSoftGracePeriod = Field(
        default_factory=dict,
        description="How long each soft eviction threshold must hold before evicting.",
    )
    eviction_max_pod_grace_period: int | None = Field(
        None,
        description="The longest termination grace period (seconds) a soft eviction grants.",
        json_schema_extra={"format": "int32"},
    )
    image_gc_high_threshold_percent: int | None = Field(
        None,
        alias="imageGCHighThresholdPercent",
        ge=0,
        le=100,
        description="Disk usage percent above which image garbage collection always runs.",
        json_schema_extra={"format": "int32"},
    )
    image_gc_low_threshold_percent: int | None = Field(
        None,
        alias="imageGCLowThresholdPercent",
        ge=0,
        le=100,
        description="Disk usage percent image garbage collection frees down to.",
        json_schema_extra={"format": "int32"},
    )
    cpu_cfs_quota: bool | None = Field(
        None,
        alias="cpuCFSQuota",
        description="Enforce CPU limits with CFS quota.",
    )


class MetadataOptions(KubeModel):
    """Instance Metadata Service (IMDS) settings of the launched instances."""

    http_endpoint: Literal["enabled", "disabled"] = Field(
        "enabled", description="Whether the metadata endpoint is reachable at all."
    )
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(
        "disabled",
        alias="httpProtocolIPv6",
        description="Whether the IPv6 metadata endpoint is enabled.",
    )
    http_put_response_hop_limit: int = Field(
        1,
        ge=1,
        le=64,
        description="How many network hops the metadata token response may travel (1-64).",
        json_schema_extra={"format": "int64"},
    )
    http_tokens: Literal["required", "optional"] = Field(
        "required", description="Whether IMDSv2 session tokens are required."
    )


class CPUOptions(KubeModel):
    """CPU settings of the launched instances (Karpenter AWS v1.14.1 ``CPUOptions``)."""

    nested_virtualization: Literal["enabled", "disabled"] | None = Field(
        None,
        description=(
            "Enables or disables nested virtualization on the instance. When enabled, "
            "only instance types whose processor reports nested-virtualization are used."
        ),
    )


class ConnectionTracking(KubeModel):
    """Idle connection tracking timeouts (seconds) of the interfaces the launch template
    provisions (the primary, EFA and ``interface`` ones; not ``efa-only`` ones, nor the
    CNI's secondary interfaces). Needs Nitro instance types; Karpenter AWS v1.14.1."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) "
                "|| has(self.udpTimeout)",
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout "
                "must be set",
            )
        )
    )

    tcp_established_timeout: int | None = Field(
        None,
        ge=60,
        le=432000,
        description="Timeout for idle established TCP connections (60-432000; EC2's "
        "default 350 on Nitro v6 types, else 432000).",
        json_schema_extra={"format": "int32"},
    )
    udp_stream_timeout: int | None = Field(
        None,
        ge=60,
        le=180,
        description="Timeout for idle UDP flows that saw more than one request-response "
        "(60-180; EC2's default 180).",
        json_schema_extra={"format": "int32"},
    )
    udp_timeout: int | None = Field(
        None,
        ge=30,
        le=60,
        description="Timeout for idle one-direction or single request-response UDP flows "
        "(30-60; EC2's default 30).",
        json_schema_extra={"format": "int32"},
    )


_VOLUME_SIZE_PATTERN = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi"
    r"|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G"
    r"|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)


class BlockDevice(KubeModel):
    """An EBS volume attached at launch."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.snapshotID) || has(self.volumeSize)",
                "snapshotID or volumeSize must be defined",
            ),
            Rule(
                "!has(self.volumeInitializationRate) || "
                "(has(self.snapshotID) && self.snapshotID != '')",
                "snapshotID must be set when volumeInitializationRate is set",
            ),
        )
    )

    delete_on_termination: bool | None = Field(
        None, description="Delete the volume when the instance terminates."
    )
    encrypted: bool | None = Field(None, description="Encrypt the volume.")
    iops: int | None = Field(
        None,
        description="Provisioned IOPS (io1, io2, gp3).",
        json_schema_extra={"format": "int64"},
    )
    kms_key_id: str | None = Field(
        None, alias="kmsKeyID", description="The KMS key (ID, alias or ARN) to encrypt with."
    )
    snapshot_id: str | None = Field(
        None, alias="snapshotID", description="The EBS snapshot to create the volume from."
    )
    throughput: int | None = Field(
        None,
        description="Provisioned throughput in MiB/s (gp3, 125-1000).",
        json_schema_extra={"format": "int64"},
    )
    volume_initialization_rate: int | None = Field(
        None,
        ge=100,
        le=300,
        description="MiB/s at which the snapshot is loaded into the volume (needs snapshotID).",
        json_schema_extra={"format": "int32"},
    )
    volume_size: str | None = Field(
        None,
        pattern=_VOLUME_SIZE_PATTERN,
        description="The volume size in Gi, G, Ti or T (e.g. 100Gi).",
    )
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = Field(
        None, description="The EBS volume type."
    )


class BlockDeviceMapping(KubeModel):
    """A device of the instance and the volume behind it."""

    device_name: str | None = Field(None, description="The device name, e.g. /dev/xvda.")
    ebs: BlockDevice | None = Field(None, description="The EBS volume.")
    root_volume: bool | None = Field(
        None, description="Whether this device is the kubelet's root volume (at most one)."
    )


class NetworkInterface(KubeModel):
    """A network interface attached at launch."""

    network_card_index: int = Field(
        ge=0, description="The network card index.", json_schema_extra={"format": "int32"}
    )
    device_index: int = Field(
        ge=0, description="The device index.", json_schema_extra={"format": "int32"}
    )
    interface_type: Literal["interface", "efa-only"] = Field(
        description="interface (ENA) or efa-only."
    )


class EC2NodeClassSpec(KubeModel):
    """How to launch EC2 instances for the NodePools that reference this class."""

    subnet_selector_terms: Annotated[
        list[SubnetSelectorTerm],
        Field(
            max_length=30,
            json_schema_extra=validations(
                Rule("self.size() != 0", "subnetSelectorTerms cannot be empty"),
                Rule(
                    "self.all(x, has(x.tags) || has(x.id))",
                    "expected at least one, got none, ['tags', 'id']",
                ),
                Rule(
                    "!self.all(x, has(x.id) && has(x.tags))",
                    "'id' is mutually exclusive, cannot be set with a combination of other "
                    "fields in a subnet selector term",
                ),
            ),
        ),
    ] = Field(description="Subnets to launch into; the terms are ORed.")
    security_group_selector_terms: Annotated[
        list[SecurityGroupSelectorTerm],
        Field(
            max_length=30,
            json_schema_extra=validations(
                Rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
                Rule(
                    "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                    "expected at least one, got none, ['tags', 'id', 'name']",
                ),
                Rule(
                    "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
                    "'id' is mutually exclusive, cannot be set with a combination of other "
                    "fields in a security group selector term",
                ),
                Rule(
                    "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
                    "'name' is mutually exclusive, cannot be set with a combination of other "
                    "fields in a security group selector term",
                ),
            ),
        ),
    ] = Field(description="Security groups of the instances; the terms are ORed.")
    capacity_reservation_selector_terms: Annotated[
        list[CapacityReservationSelectorTerm],
        Field(
            max_length=30,
            json_schema_extra=validations(
                Rule(
                    "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                    "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
                ),
                Rule(
                    "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || "
                    "has(x.instanceMatchCriteria)))",
                    "'id' is mutually exclusive, cannot be set along with other fields in a "
                    "capacity reservation selector term",
                ),
            ),
        ),
    ] = Field(
        default_factory=list,
        description="Capacity reservations instances may launch into; the terms are ORed.",
    )
    placement_group_selector: PlacementGroupSelector | None = Field(
        None, description="The placement group to launch into."
    )
    associate_public_ip_address: bool | None = Field(
        None,
        alias="associatePublicIPAddress",
        description="Give instances a public IP address (default: the subnet's setting).",
    )
    ip_prefix_count: int | None = Field(
        None,
        alias="ipPrefixCount",
        ge=0,
        description="IPv4 prefixes to assign to the primary network interface.",
        json_schema_extra={"format": "int32"},
    )
    ami_selector_terms: Annotated[
        list[AMISelectorTerm],
        Field(
            min_length=1,
            max_length=30,
            json_schema_extra=validations(
                Rule(
                    "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || "
                    "has(x.ssmParameter))",
                    "expected at least one, got none, ['tags', 'id', 'name', 'alias', "
                    "'ssmParameter']",
                ),
                Rule(
                    "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || "
                    "has(x.name) || has(x.owner)))",
                    "'id' is mutually exclusive, cannot be set with a combination of other "
                    "fields in amiSelectorTerms",
                ),
                Rule(
                    "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || "
                    "has(x.name) || has(x.owner)))",
                    "'alias' is mutually exclusive, cannot be set with a combination of other "
                    "fields in amiSelectorTerms",
                ),
                Rule(
                    "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                    "'alias' is mutually exclusive, cannot be set with a combination of other "
                    "amiSelectorTerms",
                ),
            ),
        ),
    ] = Field(description="AMIs to launch; the terms are ORed.")
    ami_family: (
        Literal[
            "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"
        ]
        | None
    ) = Field(
        None,
        description=(
            "The user data format and default block devices. Inferred from an alias term; "
            "with an alias it may only be the alias' family or Custom; required otherwise."
        ),
    )
    user_data: str | None = Field(
        None,
        description="User data for the instances, merged with karpy's own bootstrap settings.",
    )
    role: str | None = Field(
        None,
        description="The IAM role of the nodes; karpy manages an instance profile for it. "
        "Exclusive with instanceProfile.",
        json_schema_extra=validations(Rule("self != ''", "role cannot be empty")),
    )
    instance_profile: str | None = Field(
        None,
        description="An existing IAM instance profile for the nodes. Exclusive with role.",
        json_schema_extra=validations(Rule("self != ''", "instanceProfile cannot be empty")),
    )
    tags: Annotated[
        dict[str, str],
        Field(
            json_schema_extra=validations(
                Rule("self.all(k, k != '')", "empty tag keys aren't supported"),
                Rule(
                    "self.all(k, k !='eks:eks-cluster-name')",
                    "tag contains a restricted tag matching eks:eks-cluster-name",
                ),
                Rule(
                    "self.all(k, !k.startsWith('kubernetes.io/cluster') )",
                    "tag contains a restricted tag matching kubernetes.io/cluster/",
                ),
                Rule(
                    "self.all(k, k != 'karpenter.sh/nodepool')",
                    "tag contains a restricted tag matching karpenter.sh/nodepool",
                ),
                Rule(
                    "self.all(k, k !='karpenter.sh/nodeclaim')",
                    "tag contains a restricted tag matching karpenter.sh/nodeclaim",
                ),
                Rule(
                    "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')",
                    "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",
                ),
            )
        ),
    ] = Field(
        default_factory=dict, description="Tags for the instances, volumes and launch templates."
    )
    kubelet: KubeletConfiguration | None = Field(None, description="Kubelet settings of the nodes.")
    block_device_mappings: Annotated[
        list[BlockDeviceMapping],
        Field(
            max_length=50,
            json_schema_extra=validations(
                Rule(
                    "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
                    "must have only one blockDeviceMappings with rootVolume",
                )
            ),
        ),
    ] = Field(
        default_factory=list,
        description="Volumes of the instances (default: the AMI family's root volume).",
    )
    instance_store_policy: Literal["RAID0"] | None = Field(
        None,
        description="RAID0: stripe the instance-store NVMe disks and use them for "
        "the kubelet and container storage.",
    )
    network_interfaces: Annotated[
        list[NetworkInterface],
        Field(
            max_length=150,
            json_schema_extra=validations(
                Rule(
                    "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && "
                    "x.networkCardIndex == 0 && x.interfaceType == 'interface')",
                    "networkInterfaces must include a primary interface with "
                    "interfaceType='interface'",
                ),
                Rule(
                    "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && "
                    "x.deviceIndex == y.deviceIndex).size() == 1 && "
                    "(x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == "
                    "y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                    "networkInterfaces must not have duplicate networkCardIndex and deviceIndex "
                    "pairs, and can have at most one efa device per network card",
                ),
            ),
        ),
    ] = Field(default_factory=list, description="Network interfaces of the instances.")
    detailed_monitoring: bool | None = Field(
        None, description="Enable detailed (1-minute) CloudWatch monitoring."
    )
    metadata_options: MetadataOptions = Field(
        default_factory=MetadataOptions,
        description=(
            "Instance Metadata Service settings. Default: endpoint enabled, IPv6 disabled, "
            "hop limit 1, tokens required."
        ),
        json_schema_extra={
            "default": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            }
        },
    )
    connection_tracking: ConnectionTracking | None = Field(
        None,
        description="Idle connection tracking timeouts of the interfaces the launch "
        "template provisions (Nitro instance types only).",
    )
    context: str | None = Field(None, description="The EC2 Fleet context (reserved).")
    cpu_options: CPUOptions | None = Field(
        None, description="CPU options of the instances."
    )

    def ami_family_resolved(self) -> str:
        """The AMI family in effect: amiFamily, else the alias' family, else Custom."""
        if self.ami_family is not None:
            return self.ami_family
        for term in self.ami_selector_terms:
            if term.alias_family is not None:
                return term.alias_family
        return AMI_FAMILY_CUSTOM


class Subnet(KubeModel):
    """A subnet the selector terms resolved to."""

    id: str = Field(description="The subnet ID.")
    zone: str = Field(description="Its availability zone.")
    zone_id: str | None = Field(None, alias="zoneID", description="Its availability zone ID.")


class SecurityGroup(KubeModel):
    """A security group the selector terms resolved to."""

    id: str = Field(description="The security group ID.")
    name: str | None = Field(None, description="Its name.")


class AMI(KubeModel):
    """An AMI the selector terms resolved to, with the instance types it suits."""

    id: str = Field(description="The AMI ID.")
    deprecated: bool | None = Field(None, description="Whether the AMI is deprecated.")
    name: str | None = Field(None, description="The AMI's name.")
    requirements: list[NodeSelectorRequirement] = Field(
        description="Requirements an instance type must meet to use this AMI (e.g. arch)."
    )


class CapacityReservation(KubeModel):
    """A capacity reservation the selector terms resolved to."""

    availability_zone: str = Field(description="The zone it is in.")
    end_time: datetime | None = Field(None, description="When it expires.")
    id: str = Field(pattern="^cr-[0-9a-z]+$", description="The reservation ID.")
    instance_match_criteria: Literal["open", "targeted"] = Field(
        description="Which launches it accepts."
    )
    instance_type: str = Field(description="The instance type it reserves.")
    owner_id: str = Field(alias="ownerID", pattern="^[0-9]{12}$", description="Its owner account.")
    reservation_type: Literal["default", "capacity-block"] = Field(
        "default", description="default or capacity-block."
    )
    interruptible: bool | None = Field(None, description="Whether it is interruptible.")
    state: Literal["active", "expiring"] = Field(
        "active", description="active, or expiring (capacity blocks about to end)."
    )


class EC2NodeClassStatus(KubeModel):
    """What the selectors resolved to, and readiness."""

    subnets: list[Subnet] = Field(default_factory=list, description="The subnets in use.")
    security_groups: list[SecurityGroup] = Field(
        default_factory=list, description="The security groups in use."
    )
    capacity_reservations: list[CapacityReservation] = Field(
        default_factory=list, description="The capacity reservations available."
    )
    amis: list[AMI] = Field(default_factory=list, description="The AMIs in use.")
    instance_profile: str | None = Field(None, description="The instance profile in use.")
    conditions: ConditionList = Field(
        default_factory=list,
        description="Ready, AMIsReady, SubnetsReady, SecurityGroupsReady, "
        "InstanceProfileReady, ValidationSucceeded (and CapacityReservationsReady).",
    )


class EC2NodeClass(Resource):
    """AWS-specific settings for launching nodes (karpenter.k8s.aws/v1)."""

    crd = CRDInfo(
        group=GROUP,
        version="v1",
        kind="EC2NodeClass",
        plural="ec2nodeclasses",
        singular="ec2nodeclass",
        categories=("karpenter",),
        short_names=("ec2nc", "ec2ncs"),
        printer_columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
            PrinterColumn("Role", ".spec.role", priority=1),
        ),
    )

    api_version: Literal["karpenter.k8s.aws/v1"] = Field("karpenter.k8s.aws/v1", alias="apiVersion")
    kind: Literal["EC2NodeClass"] = "EC2NodeClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: EC2NodeClassSpec = Field(
        description="How to launch the instances.",
        json_schema_extra=validations(
            Rule(
                "(has(self.role) && !has(self.instanceProfile)) || "
                "(!has(self.role) && has(self.instanceProfile))",
                "must specify exactly one of ['role', 'instanceProfile']",
            ),
            *(
                Rule(
                    "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && "
                    f"x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || "
                    f"self.amiFamily == '{family}') : true)",
                    f"if set, amiFamily must be '{family}' or 'Custom' when using "
                    f"{'an' if family.startswith('AL') else 'a'} {family} alias",
                )
                for alias, family in AMI_FAMILY_BY_ALIAS.items()
            ),
            Rule(
                "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
                "must specify amiFamily if amiSelectorTerms does not contain an alias",
            ),
        ),
    )
    status: EC2NodeClassStatus = Field(default_factory=EC2NodeClassStatus)

    def status_conditions(
        self, *, now: Callable[[], datetime] = utc_now
    ) -> ConditionSet[Condition]:
        """Ready summarises AMIs, subnets, security groups, instance profile, validation
        and the placement group."""
        return ConditionSet.of(
            self.metadata,
            self.status.conditions,
            Condition,
            dependents=READY_DEPENDENTS,
            now=now,
        )
