"""Cluster discovery: what a node must be told to join the cluster, found as Karpenter
AWS finds it (pkg/operator/operator.go, pkg/providers/launchtemplate).

=================  =================================  ==========================================
fact               setting (overrides discovery)      discovered from
=================  =================================  ==========================================
API endpoint       ``clusterEndpoint``                EKS DescribeCluster ``endpoint``
CA bundle          ``clusterCABundle``                the CA karpy's own Kubernetes client
                                                      trusts, else DescribeCluster
                                                      ``certificateAuthority.data``
service CIDR       ``clusterCIDR``                    DescribeCluster ``kubernetesNetworkConfig``
                                                      (``serviceIpv4Cidr``/``serviceIpv6Cidr``
                                                      by ``ipFamily``)
IP family          (from the CIDR)                    DescribeCluster ``ipFamily``
cluster DNS        (EC2NodeClass ``kubelet.clusterDNS``)  the ``kube-system/kube-dns`` Service
=================  =================================  ==========================================

Discovery is lazy and cached: the first EC2NodeClass reconcile asks, and only what was
found is kept, so a cluster that is not EKS (DescribeCluster fails) works once the
settings give what is missing, and a transient failure is asked again on the next
reconcile. What is still missing is reported on the EC2NodeClass's status (see
:meth:`ClusterFacts.missing_for`), never discovered at launch time.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from karpy_aws._clients import AWSClients
from karpy_aws._settings import AWSSettings
from karpy_aws.apis import labels as aws

__all__ = ["ClusterDiscovery", "ClusterFacts", "kube_client_ca_bundle"]

log = logging.getLogger("karpy.aws.cluster")

KubeDNSLookup = Callable[[], Awaitable[str | None]]
"""``lookup()`` -> the ClusterIP of ``kube-system/kube-dns``, or None if there is none."""


@dataclass(frozen=True, kw_only=True)
class ClusterFacts:
    """What the user data of a node tells it about the cluster ("" when unknown)."""

    name: str
    endpoint: str = ""
    ca_bundle: str = ""
    service_cidr: str = ""
    ip_family: str = ""
    dns_ip: str = ""

    def missing_for(self, family: str) -> list[str]:
        """The facts ``family``'s user data needs that are unknown, each with the
        setting that gives it (empty when the node can join).

        AL2023's nodeadm refuses a NodeConfig without endpoint, CA or service CIDR;
        Bottlerocket needs the endpoint and CA. Custom user data is the user's own."""
        needed: list[tuple[str, str, str]] = []
        if family in (aws.AMI_FAMILY_AL2023, aws.AMI_FAMILY_BOTTLEROCKET):
            needed += [
                (self.endpoint, "the API server endpoint", "clusterEndpoint"),
                (self.ca_bundle, "the cluster CA bundle", "clusterCABundle"),
            ]
        if family == aws.AMI_FAMILY_AL2023:
            needed.append((self.service_cidr, "the service CIDR", "clusterCIDR"))
        return [
            f"{what} (set the aws provider setting {setting})"
            for value, what, setting in needed
            if not value
        ]


def kube_client_ca_bundle(api_client: Any) -> str:
    """The CA karpy's own Kubernetes client trusts, base64-encoded ("" if none), as
    Karpenter reads it from its rest config: kubernetes-asyncio keeps it in a file
    (``configuration.ssl_ca_cert``) whether it came from a kubeconfig or the pod's
    service account."""
    path = getattr(getattr(api_client, "configuration", None), "ssl_ca_cert", None)
    if not path:
        return ""
    try:
        return base64.b64encode(Path(str(path)).read_bytes()).decode()
    except OSError:
        log.warning("cannot read the Kubernetes client's CA file", extra={"path": str(path)})
        return ""


def _cidr_family(cidr: str) -> str:
    return "ipv6" if ipaddress.ip_network(cidr, strict=False).version == 6 else "ipv4"


class ClusterDiscovery:
    """Resolves :class:`ClusterFacts` from settings, EKS and the cluster (see the module
    docstring), caching what it found."""

    def __init__(
        self,
        clients: AWSClients | None,
        settings: AWSSettings,
        *,
        kube_ca_bundle: str = "",
        kube_dns: KubeDNSLookup | None = None,
    ) -> None:
        self._clients = clients
        self._facts = ClusterFacts(
            name=settings.cluster_name,
            endpoint=settings.cluster_endpoint,
            ca_bundle=settings.cluster_ca_bundle or kube_ca_bundle,
            service_cidr=settings.cluster_cidr,
            ip_family=_cidr_family(settings.cluster_cidr) if settings.cluster_cidr else "",
        )
        # What Karpenter AWS hashes EC2NodeClasses with (operator.GetCABundle, read once at
        # start): the clusterCABundle setting, else the CA of its own Kubernetes client —
        # never DescribeCluster's, so it is fixed from the start.
        self.hash_ca_bundle = settings.cluster_ca_bundle or kube_ca_bundle
        self._kube_dns = kube_dns
        self._dns_asked = False
        self._warned = False
        # a burst of launches all find the facts incomplete at once: one of them asks
        self._resolving = asyncio.Lock()

    @property
    def facts(self) -> ClusterFacts:
        """What is known now (no call)."""
        return self._facts

    def _complete(self) -> bool:
        f = self._facts
        return bool(f.endpoint and f.ca_bundle and f.service_cidr)

    async def resolve(self) -> ClusterFacts:
        """Fill in what is still unknown (DescribeCluster, the kube-dns Service), keep
        it, and return the facts. Failures are logged and leave the fact unknown.
        Concurrent callers wait for one lookup instead of each making their own."""
        if self._complete() and (self._dns_asked or self._kube_dns is None):
            return self._facts
        async with self._resolving:
            await self._resolve_once()
        return self._facts

    async def _resolve_once(self) -> None:
        if not self._complete() and self._clients is not None and self._clients.eks is not None:
            await self._describe_cluster()
        if not self._dns_asked and self._kube_dns is not None:
            try:
                dns = await self._kube_dns()
            except Exception as exc:  # custom DNS setups have no kube-dns: not fatal
                log.info("kube-dns service not found", extra={"error": str(exc)})
                dns = None
            self._dns_asked = True
            if dns:
                self._facts = replace(self._facts, dns_ip=dns)
                log.debug("discovered kube dns", extra={"kube-dns-ip": dns})

    async def _describe_cluster(self) -> None:
        assert self._clients is not None
        try:
            answer = await self._clients.eks.describe_cluster(name=self._facts.name)
        except Exception as exc:
            # asked again on every reconcile; said loudly once
            (log.debug if self._warned else log.warning)(
                "EKS DescribeCluster failed; set clusterEndpoint, clusterCABundle and "
                "clusterCIDR for a cluster that is not EKS",
                extra={"cluster": self._facts.name, "error": str(exc)},
            )
            self._warned = True
            return
        cluster = answer.get("cluster", {})
        network = cluster.get("kubernetesNetworkConfig") or {}
        ip_family = str(network.get("ipFamily") or "")
        v4, v6 = network.get("serviceIpv4Cidr"), network.get("serviceIpv6Cidr")
        # the CIDR of the cluster's IP family (what nodeadm itself picks); without a
        # family, Karpenter's order: IPv4 first
        cidr = (v6 or v4) if ip_family == "ipv6" else (v4 or v6)
        f = self._facts
        self._facts = replace(
            f,
            endpoint=f.endpoint or str(cluster.get("endpoint") or ""),
            ca_bundle=f.ca_bundle
            or str((cluster.get("certificateAuthority") or {}).get("data") or ""),
            service_cidr=f.service_cidr or str(cidr or ""),
            ip_family=f.ip_family or ip_family or (_cidr_family(cidr) if cidr else ""),
        )
        if self._facts.service_cidr and not f.service_cidr:
            log.debug("discovered cluster CIDR", extra={"cluster-cidr": self._facts.service_cidr})
