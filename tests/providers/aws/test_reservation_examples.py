"""Karpenter AWS's own capacity-reservation manifests apply and resolve. Its examples/v1
has none, so these are the manifests of its docs, as karpy's fixtures:
website/content/en/docs/concepts/nodeclasses.md (the spec.capacityReservationSelectorTerms
examples and the full EC2NodeClass's terms) and website/content/en/docs/tasks/odcrs.md
(the selector and the NodePool's capacity-type requirement), from
github.com/aws/karpenter-provider-aws at commit
1d927085dd81a9df9301e613f371dac5b4d16bfe. Each is parsed by karpy's models and resolved
against moto holding reservations the terms should, and should not, select."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from conftest import node_class_manifest, resolved
from karpy_aws._clients import AWSClients
from moto_harness import Account, FleetFaults

from karpy.apis import NodePool

OTHER_ACCOUNT = "012345678901"

#: example name -> its capacityReservationSelectorTerms (``${CLUSTER_NAME}``: karpy-test)
DOCS_TERMS: dict[str, list[dict[str, Any]]] = {
    "nodeclasses.md: full EC2NodeClass": [
        {"tags": {"karpenter.sh/discovery": "karpy-test"}},
        {"id": "cr-123"},
        {"instanceMatchCriteria": "open"},
    ],
    "nodeclasses.md: by IDs": [{"id": "cr-123"}, {"id": "cr-456"}],
    "nodeclasses.md: by tags": [
        {"tags": {"key1": "foo", "key2": "bar"}},
        {"tags": {"key3": "foobar"}},
    ],
    "nodeclasses.md: by tags and owner ID": [{"tags": {"key": "foo"}, "ownerID": OTHER_ACCOUNT}],
    "nodeclasses.md: by instance match criteria": [{"instanceMatchCriteria": "open"}],
    "nodeclasses.md: by instance match criteria and tags": [
        {"instanceMatchCriteria": "targeted", "tags": {"key": "foo"}}
    ],
    "odcrs.md: tags and an ID": [
        {"tags": {"application": "foobar"}},
        {"id": "cr-56fac701cc1951b03"},
    ],
}

#: the NodePool requirement odcrs.md gives to prefer ODCRs and fall back to on-demand
ODCRS_NODEPOOL_REQUIREMENTS = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}
]


_SEEDED: dict[str, str] = {}


def _seed(faults: FleetFaults, zone: str) -> dict[str, str]:
    """Reservations for the examples, by a name saying what they are (added once: moto's
    account is the session's)."""
    if _SEEDED:
        return _SEEDED
    add = faults.add_capacity_reservation
    _SEEDED.update(
        {
            "discovery": add("m5.large", zone, tags={"karpenter.sh/discovery": "karpy-test"}),
            "cr-123": add("m5.large", zone, rid="cr-123"),
            "cr-456": add("m5.large", zone, rid="cr-456"),
            "key1+key2": add("m5.large", zone, tags={"key1": "foo", "key2": "bar"}),
            "key1 only": add("m5.large", zone, tags={"key1": "foo"}),
            "key3": add("m5.large", zone, tags={"key3": "foobar"}),
            "key, other owner": add("m5.large", zone, tags={"key": "foo"}, owner=OTHER_ACCOUNT),
            "key, open": add("m5.large", zone, tags={"key": "foo"}, match="open"),
            "open": add("c5.large", zone, match="open"),
            "application": add("m5.large", zone, tags={"application": "foobar"}),
            "cr-56fac701cc1951b03": add(
                "p5.48xlarge",
                zone,
                rid="cr-56fac701cc1951b03",
                reservation_type="capacity-block",
                end=datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2),
            ),
        }
    )
    return _SEEDED


def _open(faults: FleetFaults) -> set[str]:
    """Every open reservation in the account (other tests' included: moto's account is
    the session's), not ended."""
    now = datetime.datetime.now(datetime.UTC)
    return {
        rid
        for rid, r in faults.capacity_reservations.items()
        if r["InstanceMatchCriteria"] == "open" and (r.get("EndDate") is None or r["EndDate"] > now)
    }


@pytest.mark.parametrize("example", sorted(DOCS_TERMS))
async def test_karpenter_docs_reservation_terms_resolve(
    example: str, aws_account: Account, aws_clients: AWSClients
) -> None:
    faults = aws_account.faults
    seeded = _seed(faults, sorted(aws_account.subnets.values())[0])
    expected = {
        "nodeclasses.md: full EC2NodeClass": {seeded["discovery"], "cr-123"} | _open(faults),
        "nodeclasses.md: by IDs": {"cr-123", "cr-456"},
        "nodeclasses.md: by tags": {seeded["key1+key2"], seeded["key3"]},
        "nodeclasses.md: by tags and owner ID": {seeded["key, other owner"]},
        "nodeclasses.md: by instance match criteria": _open(faults),
        # the open reservation tagged key=foo is not targeted; with no ownerID, any owner
        "nodeclasses.md: by instance match criteria and tags": {seeded["key, other owner"]},
        "odcrs.md: tags and an ID": {seeded["application"], "cr-56fac701cc1951b03"},
    }[example]
    node_class = await resolved(
        aws_clients,
        node_class_manifest("docs-example", capacityReservationSelectorTerms=DOCS_TERMS[example]),
    )
    assert {r.id for r in node_class.status.capacity_reservations} == expected
    assert node_class.status_conditions().is_true("CapacityReservationsReady")
    assert node_class.status_conditions().is_true("Ready")
    if "cr-56fac701cc1951b03" in expected:
        (block,) = [
            r for r in node_class.status.capacity_reservations if r.id == "cr-56fac701cc1951b03"
        ]
        assert (block.reservation_type, block.state) == ("capacity-block", "active")


def test_the_odcrs_nodepool_requirement_parses() -> None:
    pool = NodePool.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "odcrs"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": ODCRS_NODEPOOL_REQUIREMENTS,
                    }
                }
            },
        }
    )
    (requirement,) = pool.spec.template.spec.requirements
    assert requirement.values == ["reserved", "on-demand"]
