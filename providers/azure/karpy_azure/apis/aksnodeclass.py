"""The ``karpenter.azure.com/v1beta1`` AKSNodeClass: how karpy launches AKS nodes (subnet,
OS disk, image family, FIPS, kubelet, security, tags, max pods).

The schema follows Karpenter's Azure provider (v1.14) with its defaults, bounds,
patterns and CEL rules. Not modelled yet: linuxOSConfig and localDNS (the API server
prunes them, so such manifests apply but lose those fields).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field

from karpy.apis.conditions import ConditionSet, utc_now
from karpy.apis.core import Condition, ConditionList, NodeSelectorRequirement, ObjectMeta, Resource
from karpy.apis.model import CRDInfo, KubeModel, PrinterColumn, Rule, validations
from karpy_azure.apis.labels import GROUP

__all__ = [
    "CONDITION_IMAGES_READY",
    "CONDITION_KUBERNETES_VERSION_READY",
    "CONDITION_SUBNETS_READY",
    "CONDITION_VALIDATION_SUCCEEDED",
    "GPU",
    "AKSNodeClass",
    "AKSNodeClassSpec",
    "AKSNodeClassStatus",
    "ArtifactStreaming",
    "KubeletConfiguration",
    "NodeImage",
    "Security",
    "TrustedLaunch",
]

CONDITION_IMAGES_READY: Final = "ImagesReady"
CONDITION_KUBERNETES_VERSION_READY: Final = "KubernetesVersionReady"
CONDITION_SUBNETS_READY: Final = "SubnetsReady"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"

ImageFamily = Literal["Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux"]
_SIZE_PATTERN = r"^\d+(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$"


class KubeletConfiguration(KubeModel):
    """Kubelet settings of the nodes (a subset of the upstream KubeletConfiguration)."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            Rule(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  "
                "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            )
        )
    )

    cpu_manager_policy: Literal["none", "static"] = Field(
        "none", description="The CPU manager policy: none or static."
    )
    cpu_cfs_quota: bool = Field(
        True, alias="cpuCFSQuota", description="Enforce CPU limits with CFS quota."
    )
    cpu_cfs_quota_period: str = Field(
        "100ms", alias="cpuCFSQuotaPeriod", description="The CFS quota period."
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
    topology_manager_policy: Literal["restricted", "best-effort", "none", "single-numa-node"] = (
        Field("none", description="The topology manager policy.")
    )
    allowed_unsafe_sysctls: list[str] = Field(
        default_factory=list, description="Unsafe sysctls (or patterns) pods may set."
    )
    container_log_max_size: str = Field(
        "50Mi",
        pattern=_SIZE_PATTERN,
        description="The largest a container log file grows before rotation.",
    )
    container_log_max_files: int = Field(
        5,
        ge=2,
        description="How many rotated log files to keep per container.",
        json_schema_extra={"format": "int32"},
    )
    pod_pids_limit: int | None = Field(
        None, description="The most processes a pod may run.", json_schema_extra={"format": "int64"}
    )
    fail_swap_on: bool | None = Field(
        None, description="Refuse to start the kubelet when swap is enabled."
    )


class TrustedLaunch(KubeModel):
    """Trusted launch (secure boot and vTPM) of the VMs."""

    secure_boot: bool | None = Field(None, description="Enable secure boot.")
    vtpm: bool | None = Field(None, description="Enable the virtual TPM.")


class Security(KubeModel):
    """Security settings of the VMs."""

    encryption_at_host: bool | None = Field(
        None, description="Encrypt temporary disks and caches at the host."
    )
    trusted_launch: TrustedLaunch | None = Field(None, description="Trusted launch settings.")


class ArtifactStreaming(KubeModel):
    """Artifact streaming (lazy image pulls) on the nodes."""

    enabled: bool | None = Field(None, description="Enable artifact streaming.")


class GPU(KubeModel):
    """GPU driver handling on GPU nodes."""

    mode: Literal["Driver", "None"] = Field(
        "Driver", description="Driver: install the GPU driver; None: bring your own."
    )


class AKSNodeClassSpec(KubeModel):
    """How to launch AKS nodes for the NodePools that reference this class."""

    vnet_subnet_id: str | None = Field(
        None,
        alias="vnetSubnetID",
        pattern=(
            r"(?i)^\/subscriptions\/[^\/]+\/resourceGroups\/[a-zA-Z0-9_\-().]{0,89}"
            r"[a-zA-Z0-9_\-()]\/providers\/Microsoft\.Network\/virtualNetworks\/[^\/]+"
            r"\/subnets\/[^\/]+$"
        ),
        description="The subnet's resource ID (default: the cluster's subnet).",
    )
    os_disk_size_gb: int = Field(
        128,
        alias="osDiskSizeGB",
        ge=30,
        le=2048,
        description="The OS disk size in GB (30-2048).",
        json_schema_extra={"format": "int32"},
    )
    image_family: ImageFamily = Field(
        "Ubuntu", description="The node image: Ubuntu, Ubuntu2204, Ubuntu2404 or AzureLinux."
    )
    fips_mode: Literal["FIPS", "Disabled"] | None = Field(
        None, description="FIPS: use a FIPS-compliant image."
    )
    tags: Annotated[
        dict[str, str],
        Field(
            json_schema_extra=validations(
                Rule("self.all(k, size(k) <= 512)", "tags keys must be less than 512 characters"),
                Rule(
                    "self.all(k, !k.matches('[<>%&?]'))",
                    "tags keys must not contain '<', '>', '%', '&', or '?'",
                ),
                Rule("self.all(k, !k.contains('\\\\'))", "tags keys must not contain '\\'"),
                Rule(
                    "self.all(k, size(self[k]) <= 256)",
                    "tags values must be less than 256 characters",
                ),
            )
        ),
    ] = Field(default_factory=dict, description="Azure tags for the VMs and their resources.")
    kubelet: KubeletConfiguration | None = Field(None, description="Kubelet settings.")
    max_pods: int | None = Field(
        None,
        ge=10,
        le=250,
        description="The most pods a node runs (10-250).",
        json_schema_extra={"format": "int32"},
    )
    security: Security | None = Field(None, description="Security settings.")
    artifact_streaming: ArtifactStreaming | None = Field(
        None, description="Artifact streaming settings."
    )
    gpu: GPU | None = Field(None, description="GPU settings.")


class NodeImage(KubeModel):
    """A node image the class resolved to, with the instance types it suits."""

    id: str = Field(description="The image ID.")
    requirements: list[NodeSelectorRequirement] = Field(
        description="Requirements an instance type must meet to use this image."
    )


class AKSNodeClassStatus(KubeModel):
    """What the class resolved to, and readiness."""

    images: list[NodeImage] = Field(default_factory=list, description="The images in use.")
    kubernetes_version: str | None = Field(
        None, description="The Kubernetes version the nodes run."
    )
    conditions: ConditionList = Field(
        default_factory=list,
        description="Ready, ImagesReady, KubernetesVersionReady, SubnetsReady, "
        "ValidationSucceeded.",
    )


_FIPS = "has(self.fipsMode) && self.fipsMode == 'FIPS'"
_TRUSTED_LAUNCH_ON = (
    "has(self.security) && has(self.security.trustedLaunch) && "
    "((has(self.security.trustedLaunch.vtpm) && self.security.trustedLaunch.vtpm) || "
    "(has(self.security.trustedLaunch.secureBoot) && self.security.trustedLaunch.secureBoot))"
)


class AKSNodeClass(Resource):
    """Azure-specific settings for launching AKS nodes (karpenter.azure.com/v1beta1)."""

    crd = CRDInfo(
        group=GROUP,
        version="v1beta1",
        kind="AKSNodeClass",
        plural="aksnodeclasses",
        singular="aksnodeclass",
        categories=("karpenter", "nap"),
        short_names=("aksnc", "aksncs"),
        # Azure's published examples still use v1alpha2; it is served, v1beta1 stored
        served_versions=("v1alpha2",),
        printer_columns=(
            PrinterColumn("Ready", ".status.conditions[?(@.type=='Ready')].status"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
            PrinterColumn("ImageFamily", ".spec.imageFamily", priority=1),
        ),
    )

    api_version: Literal["karpenter.azure.com/v1beta1"] = Field(
        "karpenter.azure.com/v1beta1", alias="apiVersion"
    )
    kind: Literal["AKSNodeClass"] = "AKSNodeClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: AKSNodeClassSpec = Field(
        default_factory=AKSNodeClassSpec,
        description="How to launch the nodes.",
        json_schema_extra=validations(
            Rule(
                f"{_FIPS} ? (has(self.imageFamily) && self.imageFamily != 'Ubuntu2404') : true",
                "FIPS is not yet supported for Ubuntu2404",
            ),
            Rule(
                f"{_FIPS} ? (has(self.imageFamily) && (self.imageFamily != 'Ubuntu2204' || "
                f"({_TRUSTED_LAUNCH_ON}))) : true",
                "TrustedLaunch is required for FIPS support with Ubuntu2204",
            ),
            Rule(
                f"{_FIPS} && {_TRUSTED_LAUNCH_ON} ? (!has(self.imageFamily) || "
                "self.imageFamily == 'Ubuntu' || self.imageFamily == 'Ubuntu2204') : true",
                "TrustedLaunch with FIPSMode FIPS is only supported for Ubuntu and Ubuntu2204",
            ),
        ),
    )
    status: AKSNodeClassStatus = Field(default_factory=AKSNodeClassStatus)

    @property
    def secure_boot_enabled(self) -> bool:
        """``spec.security.trustedLaunch.secureBoot`` (default false)."""
        security = self.spec.security
        return bool(security and security.trusted_launch and security.trusted_launch.secure_boot)

    @property
    def vtpm_enabled(self) -> bool:
        """``spec.security.trustedLaunch.vtpm`` (default false)."""
        security = self.spec.security
        return bool(security and security.trusted_launch and security.trusted_launch.vtpm)

    @property
    def trusted_launch_enabled(self) -> bool:
        """True when secure boot or the vTPM is on: the VMs are Trusted Launch VMs, booted
        from a trusted-launch image."""
        return self.secure_boot_enabled or self.vtpm_enabled

    def status_conditions(
        self, *, now: Callable[[], datetime] = utc_now
    ) -> ConditionSet[Condition]:
        """Ready summarises images, Kubernetes version, subnets and validation."""
        return ConditionSet.of(
            self.metadata,
            self.status.conditions,
            Condition,
            dependents=(
                CONDITION_IMAGES_READY,
                CONDITION_KUBERNETES_VERSION_READY,
                CONDITION_SUBNETS_READY,
                CONDITION_VALIDATION_SUCCEEDED,
            ),
            now=now,
        )
