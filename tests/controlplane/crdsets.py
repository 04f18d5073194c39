"""Which of karpy's per-provider CRD sets (crds/<provider>/) the test cluster serves.

karpy's CRDs come in one set per provider: Karpenter's NodePool and NodeClaim with
Karpenter's label rules plus that provider's, and the provider's NodeClass. A cluster
serves one NodePool CRD at a time, so the test cluster starts with the kwok set (karpy's
local provider) plus every other provider's NodeClass CRD, so that AWS and Azure
manifests apply too. A test that needs another provider's NodePool rules switches with
``serving(cluster, "aws")``, which waits until the API server enforces them and puts the
kwok set back afterwards (tests in a session run one at a time, and each pytest-xdist
worker's session has a cluster of its own, so this is safe).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from karpy.apis.crdgen import provider_extensions, providers

if TYPE_CHECKING:
    from controlplane.fixtures import Cluster

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"
#: The set the test cluster serves between switches.
DEFAULT = "kwok"
_CORE_PREFIX = "karpenter.sh_"


def set_dir(provider: str) -> Path:
    """crds/<provider>: the manifests of one provider's set."""
    return CRDS / provider


def default_manifests() -> list[Path]:
    """What the test cluster installs: the default set plus every other NodeClass CRD."""
    if not CRDS.is_dir():
        return []
    own = sorted(set_dir(DEFAULT).glob("*.yaml"))
    # Kinds every set shares (NodePool, NodeClaim, CapacityBuffer) come from the default.
    shared = {p.name for p in own}
    nodeclasses = sorted(
        p
        for p in CRDS.glob("*/*.yaml")
        if p.parent.name != DEFAULT and not p.name.startswith(_CORE_PREFIX)
        and p.name not in shared
    )
    return own + nodeclasses


def _probe(provider: str, label_owner: str) -> str:
    """A NodePool labelling nodes in ``label_owner``'s reserved domain."""
    domain = next(iter(provider_extensions(label_owner)[1].restricted_label_domains))
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": f"crd-set-probe-{provider}"},
        "spec": {
            "template": {
                "metadata": {"labels": {f"{domain}/crd-set-probe": "x"}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "probe",
                    },
                    "requirements": [],
                },
            }
        },
    }
    return json.dumps(pool)


def _served(cluster: Cluster, provider: str) -> bool:
    """True when the API server rejects exactly ``provider``'s reserved domain."""
    from controlplane.fixtures import KubectlError

    for owner in providers():
        try:
            cluster.kubectl("create", "--dry-run=server", "-f", "-", input=_probe(provider, owner))
            rejected = False
        except KubectlError as err:
            if "is restricted" not in err.stderr:
                raise
            rejected = True
        if rejected != (owner == provider):
            return False
    return True


def install(cluster: Cluster, provider: str, *, timeout: float = 30.0) -> None:
    """Serve ``provider``'s NodePool/NodeClaim CRDs; return once they are enforced."""
    core = sorted(set_dir(provider).glob(f"{_CORE_PREFIX}*.yaml"))
    if not core:
        raise FileNotFoundError(f"{set_dir(provider)} has no {_CORE_PREFIX}*.yaml")
    for manifest in core:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    # The API server swaps a CRD's validation asynchronously after the update.
    deadline = time.monotonic() + timeout
    while not _served(cluster, provider):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {provider} CRD set was not enforced within {timeout}s")
        time.sleep(0.2)


@contextmanager
def serving(cluster: Cluster, provider: str) -> Iterator[None]:
    """Serve ``provider``'s set for the duration of the block, then the default again."""
    install(cluster, provider)
    try:
        yield
    finally:
        install(cluster, DEFAULT)
