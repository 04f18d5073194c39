"""A NodeClaim whose minValues were relaxed (MIN_VALUES_POLICY=BestEffort) launches
without the EC2NodeClass's fleet ``Context``, as Karpenter AWS launches it."""

from __future__ import annotations

from karpy_aws._clients import AWSClients
from karpy_aws._settings import AWSSettings
from test_launch_network import ON_DEMAND, Launcher, launcher_for, launchers, only

from karpy.cloudprovider.testing import make_nodeclaim

__all__ = ["launchers"]  # the fixture, shared with test_launch_network


async def test_a_relaxed_nodeclaim_launches_without_the_fleet_context(
    aws_settings: AWSSettings, aws_clients: AWSClients, launchers: list[Launcher]
) -> None:
    launcher = await launcher_for(aws_settings, aws_clients, "relaxed", context="ctx-karpy")
    launchers.append(launcher)
    for relaxed in ("false", "true"):
        asked = make_nodeclaim(launcher.pool, requirements=[ON_DEMAND, only("m5.large")])
        asked.metadata.annotations["karpenter.sh/nodeclaim-min-values-relaxed"] = relaxed
        launched = await launcher.provider.create(asked)
        await launcher.provider.delete(launched)
    kept, relaxed_request = launcher.requests
    assert kept["Context"] == "ctx-karpy"
    assert "Context" not in relaxed_request
