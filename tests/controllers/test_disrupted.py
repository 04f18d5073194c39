"""The labels of a disrupted NodeClaim, as Karpenter v1.15 writes them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from karpy.controllers.disrupted import disrupted_labels, grace_period_of, termination_mode


@pytest.mark.parametrize(("grace_period", "mode"), [
    (None, "graceful"), (timedelta(seconds=1), "eventual"), (timedelta(0), "forceful"),
    (timedelta(seconds=-5), "forceful"),
])
def test_termination_mode_follows_karpenters_disruption_termination_mode(
    grace_period: timedelta | None, mode: str,
) -> None:
    assert termination_mode(grace_period) == mode


@pytest.mark.parametrize(("claim", "expected"), [
    ({"spec": {"terminationGracePeriod": "1h30m"}}, timedelta(minutes=90)),
    ({"spec": {"terminationGracePeriod": "0s"}}, timedelta(0)),
    ({"spec": {}}, None),
    ({}, None),
    (None, None),
    # A NodeClaim the API server would have refused (written to etcd by hand, or a
    # duration Go cannot hold) labels as one without a grace period rather than failing
    # the deletion it is counted for.
    ({"spec": {"terminationGracePeriod": "soon"}}, None),
    ({"spec": {"terminationGracePeriod": "99999999h"}}, None),
    ({"spec": {"terminationGracePeriod": 30}}, None),
])
def test_the_grace_period_of_a_raw_nodeclaim(claim: Any, expected: timedelta | None) -> None:
    assert grace_period_of(claim) == expected


def test_the_labels_name_the_pool_capacity_policy_and_mode() -> None:
    labels = {"karpenter.sh/nodepool": "web", "karpenter.sh/capacity-type": "spot",
              "other": "x"}
    assert disrupted_labels("underutilized", labels, timedelta(hours=1),
                            consolidation_policy="WhenEmptyOrUnderutilized") == {
        "reason": "underutilized", "nodepool": "web", "capacity_type": "spot",
        "consolidation_policy": "when_empty_or_underutilized",
        "termination_mode": "eventual",
    }
    assert disrupted_labels("expired", {}, None) == {
        "reason": "expired", "nodepool": "", "capacity_type": "",
        "consolidation_policy": "", "termination_mode": "graceful",
    }
