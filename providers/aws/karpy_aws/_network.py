"""The network interfaces of a launch template, as Karpenter AWS builds them
(pkg/providers/launchtemplate, ``generateNetworkInterfaces``).

A template always lists its interfaces, so the security groups travel on them (EC2
refuses a template with both top-level ``SecurityGroupIds`` and interfaces), and so do
``associatePublicIPAddress`` (``false`` keeps a public subnet from giving the node a
public address) and ``ipPrefixCount`` (``Ipv4PrefixCount``; in an IPv6 cluster
``Ipv6PrefixCount``, and each interface also asks for a primary IPv6 address,
``PrimaryIpv6`` with ``Ipv6AddressCount: 1``, as Karpenter does, so that pods get
addresses from the prefix and the node one of its own):

* the EC2NodeClass lists ``networkInterfaces``: exactly those, ``efa-only`` ones
  without prefixes or a public address (EC2 refuses both on them);
* else, when the NodeClaim requests ``vpc.amazonaws.com/efa``: one EFA interface per
  network card the type has EFA on (``efa_count``), the first at device index 0 and the
  others at 1, so one card stays the primary (the one that would take a public IP);
* else one primary interface at device index 0.

``connectionTracking`` becomes every interface's ``ConnectionTrackingSpecification``
except ``efa-only`` ones (Karpenter AWS v1.14.1 ``connectionTrackingSpec``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = ["network_interfaces"]


def _connection_tracking(node_class: EC2NodeClass) -> dict[str, int]:
    ct = node_class.spec.connection_tracking
    if ct is None:
        return {}
    fields = {
        "TcpEstablishedTimeout": ct.tcp_established_timeout,
        "UdpStreamTimeout": ct.udp_stream_timeout,
        "UdpTimeout": ct.udp_timeout,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _interface(
    node_class: EC2NodeClass, groups: Sequence[str], *, ipv6: bool, efa_only: bool = False
) -> dict[str, Any]:
    spec = node_class.spec
    interface: dict[str, Any] = {"Groups": list(groups)}
    if not efa_only:
        tracking = _connection_tracking(node_class)
        if tracking:
            interface["ConnectionTrackingSpecification"] = tracking
        if spec.associate_public_ip_address is not None:
            interface["AssociatePublicIpAddress"] = spec.associate_public_ip_address
        if spec.ip_prefix_count is not None:
            interface["Ipv6PrefixCount" if ipv6 else "Ipv4PrefixCount"] = spec.ip_prefix_count
        if ipv6:
            interface["PrimaryIpv6"] = True
            interface["Ipv6AddressCount"] = 1
    return interface


def network_interfaces(
    node_class: EC2NodeClass, *, efa_count: int = 0, ip_family: str = ""
) -> list[dict[str, Any]]:
    """``LaunchTemplateData.NetworkInterfaces`` for ``node_class``; ``efa_count`` is the
    number of EFA interfaces to attach (0 unless the NodeClaim requests EFA);
    ``ip_family`` is the cluster's (``ipv6`` or anything else for IPv4)."""
    ipv6 = ip_family == "ipv6"
    groups = [g.id for g in node_class.status.security_groups]
    if node_class.spec.network_interfaces:
        out = []
        for nic in node_class.spec.network_interfaces:
            efa_only = nic.interface_type == "efa-only"
            out.append(
                {
                    "NetworkCardIndex": nic.network_card_index,
                    "DeviceIndex": nic.device_index,
                    "InterfaceType": nic.interface_type,
                    **_interface(node_class, groups, ipv6=ipv6, efa_only=efa_only),
                }
            )
        return out
    if efa_count:
        return [
            {
                "NetworkCardIndex": card,
                "DeviceIndex": 0 if card == 0 else 1,
                "InterfaceType": "efa",
                **_interface(node_class, groups, ipv6=ipv6),
            }
            for card in range(efa_count)
        ]
    return [{"DeviceIndex": 0, **_interface(node_class, groups, ipv6=ipv6)}]
