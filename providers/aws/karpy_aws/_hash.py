"""Karpenter AWS's EC2NodeClass hash (``karpenter.k8s.aws/ec2nodeclass-hash``, hash version
``v5``), exactly: the same decimal string Karpenter AWS v1.14.1 writes for the same stored
EC2NodeClass, so NodeClaims it launched do not drift after a move to karpy.

Upstream (github.com/aws/karpenter-provider-aws v1.14.1, pkg/apis/v1/ec2nodeclass.go)::

    hashstructure.Hash([]any{in.Spec, in.AMIFamily(), lo.FromPtr(caBundle)}, FormatV2,
        &HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})

:mod:`karpy.apis.hashstructure` walks the Go value; this module describes it. The spec's
Go fields in declaration order (order matters), those tagged ``hash:"ignore"`` left out
(subnet, security group, capacity reservation and AMI selector terms, ``ipPrefixCount``,
``amiFamily`` — the family enters resolved, as the second element, so ``amiFamily: AL2023``
and the alias ``al2023@latest`` hash alike)::

    EC2NodeClassSpec{PlacementGroupSelector *{Name, ID *string}, AssociatePublicIPAddress
      *bool, UserData *string, Role string, InstanceProfile *string, Tags map,
      Kubelet *KubeletConfiguration, BlockDeviceMappings []*BlockDeviceMapping,
      InstanceStorePolicy *string, NetworkInterfaces []*NetworkInterface,
      DetailedMonitoring *bool, MetadataOptions *MetadataOptions,
      ConnectionTracking *ConnectionTracking, Context *string, CPUOptions *CPUOptions}

Integers keep their Go size (``maxPods`` is an ``int32``, ``iops`` an ``int64``), an EBS
``volumeSize`` is hashed as its canonical quantity string (tag ``hash:"string"``: ``100Gi``
and ``102400Mi`` alike), ``evictionSoftGracePeriod`` values as ``metav1.Duration``. A map or
list the stored object carries empty is a non-nil Go value and hashes differently from an
absent one; the parsed model remembers which fields its source carried.

``connectionTracking`` (``*ConnectionTracking{TCPEstablishedTimeout, UDPStreamTimeout,
UDPTimeout *int32}``) and ``cpuOptions`` (``*CPUOptions{NestedVirtualization *string}``)
are hashed like any other pointer to a struct: nil when absent, their fields by value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from karpy.apis.hashstructure import (
    GoBool,
    GoInt32,
    GoMap,
    GoPointer,
    GoSlice,
    GoString,
    GoStruct,
    GoValue,
    StructField,
    hash_v2,
    ptr_bool,
    ptr_int32,
    ptr_int64,
    ptr_string,
)
from karpy.apis.quantity import canonical_quantity
from karpy.apis.v1.nodepool_hash import go_metav1_duration
from karpy.cloudprovider.nodeclass_hash import stamped_hash_drifted
from karpy_aws.apis import labels as aws

if TYPE_CHECKING:
    from pydantic import BaseModel

    from karpy.apis import NodeClaim
    from karpy_aws.apis.ec2nodeclass import (
        BlockDevice,
        BlockDeviceMapping,
        ConnectionTracking,
        CPUOptions,
        EC2NodeClass,
        KubeletConfiguration,
        MetadataOptions,
        NetworkInterface,
        PlacementGroupSelector,
    )

__all__ = ["HASH_VERSION", "hash_drifted", "node_class_hash", "spec_go_value"]

HASH_VERSION: Final = "v5"
"""Karpenter AWS v1.14.1's ``EC2NodeClassHashVersion`` (v1.15.2 moves to ``v6``)."""






def _present(model: BaseModel, name: str) -> bool:
    return name in model.model_fields_set


def _map(model: BaseModel, name: str, value: Mapping[str, str]) -> GoMap:
    # Absent: nil. Present, even empty: a non-nil map (Go's JSON decoding).
    return GoMap(dict(value) if value or _present(model, name) else None)


def _slice(model: BaseModel, name: str, items: list[GoValue]) -> GoSlice:
    return GoSlice(items if items or _present(model, name) else None)


def _placement(selector: PlacementGroupSelector | None) -> GoPointer:
    if selector is None:
        return GoPointer(None)
    return GoPointer(GoStruct("PlacementGroupSelector", (
        StructField("Name", ptr_string(selector.name)),
        StructField("ID", ptr_string(selector.id)),
    )))


def _kubelet(kubelet: KubeletConfiguration | None) -> GoPointer:
    if kubelet is None:
        return GoPointer(None)
    k = kubelet
    grace = k.eviction_soft_grace_period
    grace_present = bool(grace) or _present(k, "eviction_soft_grace_period")
    return GoPointer(GoStruct("KubeletConfiguration", (
        StructField("ClusterDNS", _slice(k, "cluster_dns", [GoString(d) for d in k.cluster_dns])),
        StructField("MaxPods", ptr_int32(k.max_pods)),
        StructField("PodsPerCore", ptr_int32(k.pods_per_core)),
        StructField("SystemReserved", _map(k, "system_reserved", k.system_reserved)),
        StructField("KubeReserved", _map(k, "kube_reserved", k.kube_reserved)),
        StructField("EvictionHard", _map(k, "eviction_hard", k.eviction_hard)),
        StructField("EvictionSoft", _map(k, "eviction_soft", k.eviction_soft)),
        StructField("EvictionSoftGracePeriod", GoMap(
            {key: go_metav1_duration(v) for key, v in grace.items()} if grace_present else None
        )),
        StructField("EvictionMaxPodGracePeriod", ptr_int32(k.eviction_max_pod_grace_period)),
        StructField("ImageGCHighThresholdPercent", ptr_int32(k.image_gc_high_threshold_percent)),
        StructField("ImageGCLowThresholdPercent", ptr_int32(k.image_gc_low_threshold_percent)),
        StructField("CPUCFSQuota", ptr_bool(k.cpu_cfs_quota)),
    )))


def _block_device(ebs: BlockDevice | None) -> GoPointer:
    if ebs is None:
        return GoPointer(None)
    size = None if ebs.volume_size is None else canonical_quantity(ebs.volume_size)
    return GoPointer(GoStruct("BlockDevice", (
        StructField("DeleteOnTermination", ptr_bool(ebs.delete_on_termination)),
        StructField("Encrypted", ptr_bool(ebs.encrypted)),
        StructField("IOPS", ptr_int64(ebs.iops)),
        StructField("KMSKeyID", ptr_string(ebs.kms_key_id)),
        StructField("SnapshotID", ptr_string(ebs.snapshot_id)),
        StructField("Throughput", ptr_int64(ebs.throughput)),
        StructField("VolumeInitializationRate", ptr_int32(ebs.volume_initialization_rate)),
        # hash:"string": hashed as Quantity.String(), the canonical form.
        StructField("VolumeSize", ptr_string(size)),
        StructField("VolumeType", ptr_string(ebs.volume_type)),
    )))


def _mapping(bdm: BlockDeviceMapping) -> GoPointer:
    return GoPointer(GoStruct("BlockDeviceMapping", (
        StructField("DeviceName", ptr_string(bdm.device_name)),
        StructField("EBS", _block_device(bdm.ebs)),
        StructField("RootVolume", GoBool(bool(bdm.root_volume))),
    )))


def _interface(ni: NetworkInterface) -> GoPointer:
    return GoPointer(GoStruct("NetworkInterface", (
        StructField("NetworkCardIndex", GoInt32(ni.network_card_index)),
        StructField("DeviceIndex", GoInt32(ni.device_index)),
        StructField("InterfaceType", GoString(ni.interface_type or "")),
    )))


def _metadata_options(spec_has_it: bool, options: MetadataOptions) -> GoPointer:
    if not spec_has_it:
        return GoPointer(None)
    o = options
    return GoPointer(GoStruct("MetadataOptions", (
        StructField("HTTPEndpoint", ptr_string(o.http_endpoint)),
        StructField("HTTPProtocolIPv6", ptr_string(o.http_protocol_ipv6)),
        StructField("HTTPPutResponseHopLimit", ptr_int64(o.http_put_response_hop_limit)),
        StructField("HTTPTokens", ptr_string(o.http_tokens)),
    )))


def _connection_tracking(ct: ConnectionTracking | None) -> GoPointer:
    if ct is None:
        return GoPointer(None)
    return GoPointer(GoStruct("ConnectionTracking", (
        StructField("TCPEstablishedTimeout", ptr_int32(ct.tcp_established_timeout)),
        StructField("UDPStreamTimeout", ptr_int32(ct.udp_stream_timeout)),
        StructField("UDPTimeout", ptr_int32(ct.udp_timeout)),
    )))


def _cpu_options(options: CPUOptions | None) -> GoPointer:
    if options is None:
        return GoPointer(None)
    return GoPointer(GoStruct("CPUOptions", (
        StructField("NestedVirtualization", ptr_string(options.nested_virtualization)),
    )))


def spec_go_value(node_class: EC2NodeClass) -> GoStruct:
    """The EC2NodeClassSpec as the Go value Karpenter AWS hashes (see the module docs)."""
    s = node_class.spec
    return GoStruct("EC2NodeClassSpec", (
        StructField("PlacementGroupSelector", _placement(s.placement_group_selector)),
        StructField("AssociatePublicIPAddress", ptr_bool(s.associate_public_ip_address)),
        StructField("UserData", ptr_string(s.user_data)),
        StructField("Role", GoString(s.role or "")),
        StructField("InstanceProfile", ptr_string(s.instance_profile)),
        StructField("Tags", _map(s, "tags", s.tags)),
        StructField("Kubelet", _kubelet(s.kubelet)),
        StructField("BlockDeviceMappings", _slice(
            s, "block_device_mappings", [_mapping(b) for b in s.block_device_mappings])),
        StructField("InstanceStorePolicy", ptr_string(s.instance_store_policy)),
        StructField("NetworkInterfaces", _slice(
            s, "network_interfaces", [_interface(n) for n in s.network_interfaces])),
        StructField("DetailedMonitoring", ptr_bool(s.detailed_monitoring)),
        # The CRD defaults metadataOptions, so a stored object always carries it; the
        # model's default stands for that.
        StructField("MetadataOptions", _metadata_options(True, s.metadata_options)),
        StructField("ConnectionTracking", _connection_tracking(s.connection_tracking)),
        StructField("Context", ptr_string(s.context)),
        StructField("CPUOptions", _cpu_options(s.cpu_options)),
    ))


def node_class_hash(node_class: EC2NodeClass, ca_bundle: str | None = None) -> str:
    """Karpenter AWS's ``EC2NodeClass.Hash(caBundle)`` (decimal): the spec, the resolved
    AMI family and the cluster CA bundle (base64, "" when unknown) karpy's nodes trust."""
    return str(hash_v2(GoSlice([
        spec_go_value(node_class),
        GoString(node_class.spec.ami_family_resolved()),
        GoString(ca_bundle or ""),
    ])))


def hash_drifted(nodeclaim: NodeClaim, node_class: EC2NodeClass) -> bool:
    """Karpenter AWS's static drift (``areStaticFieldsDrifted``): the hash the nodeclass.hash
    controller stamped on the EC2NodeClass differs from the NodeClaim's, both present and of
    the same hash version. A missing annotation or another version is no drift: the
    controller re-stamps NodeClaims when the version changes."""
    return stamped_hash_drifted(
        nodeclaim.metadata.annotations, node_class.metadata.annotations,
        hash_annotation=aws.ANNOTATION_EC2NODECLASS_HASH,
        version_annotation=aws.ANNOTATION_EC2NODECLASS_HASH_VERSION)
