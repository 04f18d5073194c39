"""User data that joins an instance to the cluster, per AMI family, as Karpenter AWS
writes it (pkg/providers/amifamily/bootstrap):

* **AL2023**: a MIME multi-part archive for nodeadm. The user's ``spec.userData`` comes
  first, part by part (a MIME archive keeps its parts; a lone NodeConfig or shell script
  becomes one part), then karpy's NodeConfig: cluster name, endpoint, CA, service CIDR,
  the kubelet config (maxPods, clusterDNS, reserved resources, eviction, image GC,
  cpuCFSQuota, registerWithTaints), the node labels flag and, for
  ``instanceStorePolicy: RAID0``, ``localStorage.strategy: RAID0``. nodeadm merges the
  NodeConfig parts in order, so karpy's settings win.
* **Bottlerocket**: the user's TOML, parsed, with karpy's ``settings.kubernetes`` merged
  in (cluster, kubelet settings, labels merged, taints replaced) and, for RAID0, a
  bootstrap command that puts the kubelet and containerd on the instance stores.
* **Custom**: ``spec.userData`` unchanged.
* **AL2 and Windows**: not rendered; :func:`unsupported_family_message` says so, and
  the EC2NodeClass is not Ready, so no instance that cannot join is launched.
"""

from __future__ import annotations

import base64
import email
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from typing import Any, Final

import tomli_w
import yaml

from karpy_aws.apis import labels as aws

__all__ = [
    "BootstrapOptions",
    "UserDataError",
    "bottlerocket_user_data",
    "check_user_data",
    "nodeadm_user_data",
    "unsupported_family_message",
    "user_data",
]

_BOUNDARY: Final = "//"
_NODE_CONFIG_TYPE: Final = "application/node.eks.aws"
_SHELL_TYPE: Final = 'text/x-shellscript; charset="us-ascii"'
_UNRENDERED: Final = frozenset(
    {
        aws.AMI_FAMILY_AL2,
        aws.AMI_FAMILY_WINDOWS2019,
        aws.AMI_FAMILY_WINDOWS2022,
        aws.AMI_FAMILY_WINDOWS2025,
    }
)


class UserDataError(ValueError):
    """``spec.userData`` cannot be merged (malformed MIME or TOML), or the family's user
    data is not rendered; the message names the field and the fix."""


@dataclass(frozen=True, kw_only=True)
class BootstrapOptions:
    """What the node needs to join: cluster coordinates, kubelet settings (the
    EC2NodeClass's ``kubelet`` as camelCase keys, with maxPods and clusterDNS filled
    in), the labels and taints it registers with, and the user's ``spec.userData``."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str = ""
    cluster_cidr: str = ""
    kubelet: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    custom_user_data: str | None = None
    instance_store_policy: str | None = None


def unsupported_family_message(family: str) -> str | None:
    """Why karpy cannot launch nodes of ``family`` (None when it can)."""
    if family not in _UNRENDERED:
        return None
    how = (
        "EKS bootstrap.sh user data"
        if family == aws.AMI_FAMILY_AL2
        else "Windows (Start-EKSBootstrap) user data"
    )
    return (
        f"amiFamily {family}: karpy does not render {how}, so its nodes could not join "
        "the cluster; use an al2023 or bottlerocket alias, or amiFamily Custom with "
        "spec.userData that joins the node"
    )


def _kubelet_config(options: BootstrapOptions) -> dict[str, Any]:
    config = {k: v for k, v in options.kubelet.items() if v not in (None, [], {})}
    config["registerWithTaints"] = [dict(t) for t in options.taints]
    return config


def _node_config(options: BootstrapOptions) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "name": options.cluster_name,
        "apiServerEndpoint": options.cluster_endpoint,
        "cidr": options.cluster_cidr,
    }
    if options.ca_bundle:
        cluster["certificateAuthority"] = options.ca_bundle
    spec: dict[str, Any] = {
        "cluster": cluster,
        "kubelet": {"config": _kubelet_config(options)},
    }
    if options.instance_store_policy == "RAID0":
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if options.labels:
        spec["kubelet"]["flags"] = [
            "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(options.labels.items()))
        ]
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def _part(content_type: str, payload: str, encoding: str | None = None) -> Message:
    """A MIME part holding ``payload`` as is (no transfer encoding added: nodeadm's Go
    reader decodes none but quoted-printable)."""
    part = Message()
    part["Content-Type"] = content_type
    if encoding:
        part["Content-Transfer-Encoding"] = encoding
    part.set_payload(payload)
    return part


def _user_parts(custom: str) -> list[Message]:
    """The user's ``spec.userData`` as MIME parts (Karpenter's parseUserData)."""
    text = custom.strip()
    if not text:
        return []
    if text.startswith(("MIME-Version:", "Content-Type:")):
        archive = email.message_from_string(text)
        if not archive.is_multipart():
            raise UserDataError(
                "spec.userData starts with MIME headers but is not a multipart archive: "
                'give a "Content-Type: multipart/mixed; boundary=..." archive, or plain '
                "NodeConfig YAML or a shell script"
            )
        parts = []
        for sub in archive.get_payload():
            assert isinstance(sub, Message)
            payload = sub.get_payload()
            if sub.get("Content-Type") is None and not str(payload).strip():
                # an archive left open after its last boundary: Python reads an empty
                # part there, Go's (nodeadm's, cloud-init's) readers see the end
                continue
            if not isinstance(payload, str):
                raise UserDataError("spec.userData: nested multipart archives are not supported")
            parts.append(
                _part(
                    sub.get("Content-Type", "text/plain"),
                    payload,
                    sub.get("Content-Transfer-Encoding"),
                )
            )
        return parts
    try:
        is_yaml = isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        is_yaml = False
    return [_part(_NODE_CONFIG_TYPE if is_yaml else _SHELL_TYPE, custom)]


def nodeadm_user_data(options: BootstrapOptions) -> str:
    """AL2023: a MIME archive of the user's parts followed by karpy's NodeConfig."""
    archive = Message()
    archive["MIME-Version"] = "1.0"
    archive["Content-Type"] = f'multipart/mixed; boundary="{_BOUNDARY}"'
    parts = _user_parts(options.custom_user_data or "")
    parts.append(
        _part(
            _NODE_CONFIG_TYPE,
            "# Karpenter Generated NodeConfig\n"
            + yaml.safe_dump(_node_config(options), sort_keys=True),
        )
    )
    archive.set_payload(parts)  # type: ignore[arg-type]  # a list of parts is a multipart body
    archive.set_boundary(_BOUNDARY)
    return archive.as_string()


def _bottlerocket_kubelet(kubelet: Mapping[str, Any]) -> dict[str, Any]:
    """The EC2NodeClass kubelet settings under Bottlerocket's names
    (Karpenter's bottlerocket.go; image GC thresholds are strings there)."""
    out: dict[str, Any] = {}
    if kubelet.get("maxPods") is not None:
        out["max-pods"] = int(kubelet["maxPods"])
    if kubelet.get("clusterDNS"):
        out["cluster-dns-ip"] = str(kubelet["clusterDNS"][0])
    for key, name in (
        ("systemReserved", "system-reserved"),
        ("kubeReserved", "kube-reserved"),
        ("evictionHard", "eviction-hard"),
        ("evictionSoft", "eviction-soft"),
        ("evictionSoftGracePeriod", "eviction-soft-grace-period"),
    ):
        if kubelet.get(key):
            out[name] = {str(k): str(v) for k, v in kubelet[key].items()}
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        out["eviction-max-pod-grace-period"] = int(kubelet["evictionMaxPodGracePeriod"])
    for key, name in (
        ("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
        ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent"),
    ):
        if kubelet.get(key) is not None:
            out[name] = str(int(kubelet[key]))
    if kubelet.get("cpuCFSQuota") is not None:
        out["cpu-cfs-quota"] = bool(kubelet["cpuCFSQuota"])
    return out


def bottlerocket_user_data(options: BootstrapOptions) -> str:
    """Bottlerocket: the user's TOML with karpy's ``settings.kubernetes`` merged in."""
    try:
        document = tomllib.loads(options.custom_user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(
            f"spec.userData is not valid TOML for Bottlerocket ({exc}); fix the TOML"
        ) from exc
    settings = document.setdefault("settings", {})
    kubernetes = settings.setdefault("kubernetes", {})
    if not isinstance(settings, dict) or not isinstance(kubernetes, dict):
        raise UserDataError("spec.userData: settings.kubernetes must be a TOML table")
    kubernetes["cluster-name"] = options.cluster_name
    kubernetes["api-server"] = options.cluster_endpoint
    if options.ca_bundle:
        kubernetes["cluster-certificate"] = options.ca_bundle
    kubernetes.update(_bottlerocket_kubelet(options.kubelet))
    # labels merge over the user's; taints are the NodeClaim's only (as Karpenter)
    kubernetes["node-labels"] = {**kubernetes.get("node-labels", {}), **options.labels}
    if not kubernetes["node-labels"]:
        del kubernetes["node-labels"]
    taints: dict[str, list[str]] = {}
    for taint in options.taints:
        taints.setdefault(taint["key"], []).append(f"{taint.get('value', '')}:{taint['effect']}")
    kubernetes.pop("node-taints", None)
    if taints:
        kubernetes["node-taints"] = taints
    if options.instance_store_policy == "RAID0":
        commands = settings.setdefault("bootstrap-commands", {})
        commands["000-mount-instance-storage"] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                [
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods",
                ],
            ],
            "mode": "always",
            "essential": True,
        }
    return tomli_w.dumps(document)


def check_user_data(family: str, custom_user_data: str | None) -> str | None:
    """Why ``spec.userData`` cannot be merged into ``family``'s user data (None when it
    can): the status controller reports it before any launch."""
    try:
        if family == aws.AMI_FAMILY_BOTTLEROCKET:
            bottlerocket_user_data(
                BootstrapOptions(
                    cluster_name="", cluster_endpoint="", custom_user_data=custom_user_data
                )
            )
        elif family == aws.AMI_FAMILY_AL2023:
            _user_parts(custom_user_data or "")
    except UserDataError as exc:
        return str(exc)
    return None


def user_data(family: str, options: BootstrapOptions) -> str:
    """Base64 user data for ``family``; Custom passes ``spec.userData`` through.

    Raises UserDataError for AL2 and Windows (see :func:`unsupported_family_message`)
    and for user data that cannot be merged."""
    unsupported = unsupported_family_message(family)
    if unsupported is not None:
        raise UserDataError(unsupported)
    if family == aws.AMI_FAMILY_BOTTLEROCKET:
        text = bottlerocket_user_data(options)
    elif family == aws.AMI_FAMILY_AL2023:
        text = nodeadm_user_data(options)
    else:
        text = options.custom_user_data or ""
    return base64.b64encode(text.encode()).decode()
