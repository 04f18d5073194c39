"""User data that joins an instance to the cluster: AL2023's nodeadm NodeConfig in a
MIME multi-part archive, and Bottlerocket's TOML settings (as Karpenter AWS writes
them, pkg/providers/amifamily/bootstrap). The user's ``spec.userData`` is merged: for
AL2023 its parts come first in the archive, for Bottlerocket its TOML is the base that
karpy's cluster settings override.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

import yaml

from karpy_aws.apis import labels as aws

__all__ = ["BootstrapOptions", "bottlerocket_user_data", "nodeadm_user_data", "user_data"]

_BOUNDARY = "//"


@dataclass(frozen=True, kw_only=True)
class BootstrapOptions:
    """What the node needs to join: cluster coordinates, kubelet settings, and the
    labels and taints it registers with."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str = ""
    kubelet: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    custom_user_data: str | None = None


def _kubelet_config(options: BootstrapOptions) -> dict[str, Any]:
    config = {k: v for k, v in options.kubelet.items() if v not in (None, [], {})}
    config["registerWithTaints"] = [dict(t) for t in options.taints]
    return config


def nodeadm_user_data(options: BootstrapOptions) -> str:
    """AL2023: a MIME archive ending in karpy's NodeConfig."""
    node_config: dict[str, Any] = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": options.cluster_name,
                "apiServerEndpoint": options.cluster_endpoint,
                **({"certificateAuthority": options.ca_bundle} if options.ca_bundle else {}),
            },
            "kubelet": {"config": _kubelet_config(options)},
        },
    }
    if options.labels:
        node_config["spec"]["kubelet"]["flags"] = [
            "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(options.labels.items()))
        ]
    archive = MIMEMultipart("mixed", boundary=_BOUNDARY)
    custom = (options.custom_user_data or "").strip()
    if custom:
        content_type = (
            "application/node.eks.aws" if _is_yaml_mapping(custom) else "text/x-shellscript"
        )
        custom_part = MIMEText(custom)
        custom_part.replace_header("Content-Type", f'{content_type}; charset="us-ascii"')
        archive.attach(custom_part)
    part = MIMEText(
        "# Karpenter Generated NodeConfig\n" + yaml.safe_dump(node_config, sort_keys=True)
    )
    part.replace_header("Content-Type", 'application/node.eks.aws; charset="us-ascii"')
    archive.attach(part)
    return archive.as_string()


def _is_yaml_mapping(text: str) -> bool:
    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


def bottlerocket_user_data(options: BootstrapOptions) -> str:
    """Bottlerocket: TOML with ``[settings.kubernetes]`` set for the cluster."""
    kubernetes: dict[str, Any] = {}
    base = (options.custom_user_data or "").strip()
    kubernetes["cluster-name"] = options.cluster_name
    kubernetes["api-server"] = options.cluster_endpoint
    if options.ca_bundle:
        kubernetes["cluster-certificate"] = options.ca_bundle
    if "maxPods" in options.kubelet and options.kubelet["maxPods"] is not None:
        kubernetes["max-pods"] = int(options.kubelet["maxPods"])
    lines = [base, ""] if base else []
    lines.append("[settings.kubernetes]")
    lines.extend(f"{k} = {_toml_value(v)}" for k, v in kubernetes.items())
    if options.labels:
        lines.append("")
        lines.append("[settings.kubernetes.node-labels]")
        lines.extend(
            f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sorted(options.labels.items())
        )
    if options.taints:
        lines.append("")
        lines.append("[settings.kubernetes.node-taints]")
        grouped: dict[str, list[str]] = {}
        for taint in options.taints:
            grouped.setdefault(taint["key"], []).append(
                f"{taint.get('value', '')}:{taint['effect']}"
            )
        lines.extend(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sorted(grouped.items()))
    return "\n".join(lines) + "\n"


def user_data(family: str, options: BootstrapOptions) -> str:
    """Base64 user data for ``family``; Custom passes ``spec.userData`` through."""
    if family == aws.AMI_FAMILY_BOTTLEROCKET:
        text = bottlerocket_user_data(options)
    elif family in (aws.AMI_FAMILY_AL2023,):
        text = nodeadm_user_data(options)
    else:
        text = options.custom_user_data or ""
    return base64.b64encode(text.encode()).decode()
