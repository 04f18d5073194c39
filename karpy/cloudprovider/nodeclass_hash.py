"""``nodeclass.hash``: a provider's NodeClass hash annotation (and its version) on every
NodeClass, and the re-stamping of its NodeClaims when the hash version changes — the
controller Karpenter AWS and Karpenter Azure each run (aws/karpenter-provider-aws v1.14.1
pkg/controllers/nodeclass/hash/controller.go; Azure/karpenter-provider-azure v1.14.2
pkg/controllers/nodeclass/hash/controller.go), written once for both providers.

On each reconcile of a NodeClass:

* when the NodeClass's hash-version annotation is not the current version (absent, or
  written by another release), the hashes on its NodeClaims cannot be compared with the
  new one: every NodeClaim referring to it whose version differs gets the current version
  and — unless it already has a ``Drifted`` condition, whose verdict stays — the current
  hash, so it does not drift from the change of algorithm alone;
* the NodeClass gets the current hash and version (patched only when they differ).

Drift itself (the provider's ``is_drifted``) then compares the NodeClass's annotation with
the NodeClaim's: both present, same version, different hash means ``NodeClassDrift``.
Providers contribute it through ``register_controllers``; it uses karpy.runtime only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.cloudprovider._types import NODE_CLAIM
from karpy.runtime import Client, Kind, Request, Result, errors

__all__ = ["NodeClassHash", "NodeClassHashSpec", "stamped_hash_drifted"]

_DRIFTED = "Drifted"


@dataclass(frozen=True)
class NodeClassHashSpec:
    """What differs between providers: the NodeClass kind, the two annotation keys, the
    current hash version and how to hash a stored NodeClass (None: it cannot be parsed,
    nothing is stamped — its status controller reports why)."""

    kind: Kind
    hash_annotation: str
    version_annotation: str
    version: str
    hash_of: Callable[[Mapping[str, Any]], str | None]


def stamped_hash_drifted(nodeclaim: Mapping[str, str], nodeclass: Mapping[str, str], *,
                         hash_annotation: str, version_annotation: str) -> bool:
    """Static drift as both providers judge it (``areStaticFieldsDrifted``), from the
    NodeClaim's and the NodeClass's annotations: the hash this controller stamped on the
    NodeClass differs from the NodeClaim's, both present and of the same version. A missing
    annotation or another version is no drift: re-stamping settles the version first."""
    keys = (hash_annotation, version_annotation)
    if not all(k in nodeclaim and k in nodeclass for k in keys):
        return False
    if nodeclaim[version_annotation] != nodeclass[version_annotation]:
        return False
    return nodeclaim[hash_annotation] != nodeclass[hash_annotation]


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _refers_to(nodeclaim: Mapping[str, Any], kind: Kind, name: str) -> bool:
    # nodeclaimutils.ForNodeClass: the NodeClaim's nodeClassRef names this class.
    ref = (nodeclaim.get("spec") or {}).get("nodeClassRef") or {}
    return (ref.get("name") == name and ref.get("kind") == kind.kind
            and ref.get("group") == kind.group)


def _drifted(nodeclaim: Mapping[str, Any]) -> bool:
    conditions = (nodeclaim.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == _DRIFTED for c in conditions)


class NodeClassHash:
    """The ``nodeclass.hash`` reconciler (see the module docs)."""

    name = "nodeclass.hash"

    def __init__(self, spec: NodeClassHashSpec, client: Client) -> None:
        self._spec = spec
        self._client = client

    async def reconcile(self, request: Request) -> Result:
        """Stamp the hash on the NodeClass (and re-stamp its NodeClaims on a new version)."""
        spec = self._spec
        try:
            stored = await self._client.get(spec.kind, request.name)
        except errors.NotFound:
            return Result()
        digest = spec.hash_of(stored)
        if digest is None:
            return Result()
        annotations = _annotations(stored)
        if annotations.get(spec.version_annotation) != spec.version:
            await self._restamp_nodeclaims(request.name, digest)
        want = {spec.hash_annotation: digest, spec.version_annotation: spec.version}
        if any(annotations.get(k) != v for k, v in want.items()):
            try:
                await self._client.patch(spec.kind, request.name,
                                         {"metadata": {"annotations": want}})
            except errors.NotFound:
                return Result()
        return Result()

    async def _restamp_nodeclaims(self, name: str, digest: str) -> None:
        spec = self._spec
        for nodeclaim in await self._client.list(NODE_CLAIM):
            if not _refers_to(nodeclaim, spec.kind, name):
                continue
            if _annotations(nodeclaim).get(spec.version_annotation) == spec.version:
                continue
            want = {spec.version_annotation: spec.version}
            # A NodeClaim already judged drifted stays so: with another algorithm there is
            # no telling whether its verdict still holds (as Karpenter).
            if not _drifted(nodeclaim):
                want[spec.hash_annotation] = digest
            try:
                await self._client.patch(NODE_CLAIM, nodeclaim["metadata"]["name"],
                                         {"metadata": {"annotations": want}})
            except errors.NotFound:
                continue
