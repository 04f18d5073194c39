"""One composition root: the operator's ``build_deps`` + ``wire`` build every controller,
the scheduling inputs are built once and shared, and the tools' view is wired by the
same functions rather than a copy of them."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from karpy.apis import NodePool
from karpy.cloudprovider import InstanceType
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.settings import Settings
from karpy.operator import build_deps, wire
from karpy.runtime import Client, Manager, freeze
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.testing import nodepool

KARPY = Path(__file__).resolve().parents[1] / "karpy"


class CountingProvider(FakeCloudProvider):
    """The fake provider, counting how often its catalogue is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.catalogue_calls = 0

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        self.catalogue_calls += 1
        return await super().get_instance_types(nodepool)


def test_the_cost_metrics_price_from_the_provisioners_catalogue() -> None:
    """karpy_nodepool_cost_per_hour is priced from the same cached instance types the
    provisioner schedules with: one catalogue fetch serves both (before, the metrics kept
    a second cache and asked the cloud again)."""
    clock = FakeClock()
    manager = Manager(cast(Client, FakeClient(clock=clock)), metrics_bind_address="0",
                      health_probe_bind_address="0", clock=clock)
    singletons: dict[str, Any] = {}
    register = manager.singleton

    def capture(name: str, reconciler: Any, **options: Any) -> Any:
        singletons[name] = reconciler
        return register(name, reconciler, **options)

    manager.singleton = capture  # type: ignore[method-assign]
    provider = CountingProvider()
    deps = build_deps(manager=manager, provider=provider, clock=clock, settings=Settings())
    controllers = wire(deps)
    deps.cluster.update_nodepool(freeze(nodepool("default")))

    async def round_of_each() -> None:
        assert await controllers.provisioner.inputs.templates()
        await singletons["metrics.cost"].reconcile()

    asyncio.run(round_of_each())
    assert provider.catalogue_calls == 1
    # the metrics round did price the catalogue (the offering price estimates)
    assert "karpenter_cloudprovider_instance_type_offering_price_estimate{" in (
        manager.metrics.render().decode())
    assert controllers.disruption is singletons["disruption"]


def _constructed(pattern: str) -> set[str]:
    """The modules of karpy/ that call ``pattern(`` (a constructor; a class statement
    naming it is not a call), relative paths."""
    found = set()
    for path in KARPY.rglob("*.py"):
        if re.search(rf"(?<![\w.])(?<!class )(?:{pattern})\(", path.read_text()):
            found.add(str(path.relative_to(KARPY)))
    return found


def test_each_shared_dependency_and_controller_is_built_in_one_place() -> None:
    """The scheduling inputs (and their instance-type cache) have one builder, the
    ``Deps`` one, and the provisioner and disruption controller are built only by their
    packages' ``register`` -- which the operator and the tools' view both reach through
    ``karpy.operator.wire``. ``karpy top`` builds no Deps and keeps a bare catalogue."""
    assert _constructed("Deps") == {"operator.py"}
    assert _constructed("SchedulingInputs") == {"operator.py"}
    assert _constructed("InstanceTypeCache") == {
        "controllers/inputs/scheduling.py", "cli/top.py"
    }
    assert _constructed("Provisioner") == {"controllers/provisioning/__init__.py"}
    assert _constructed("OrchestrationQueue") == {"controllers/disruption/__init__.py"}
    assert _constructed("DisruptionController") == {"controllers/disruption/__init__.py"}
    # Validation is injected, not subclassed: the controller builds Karpenter's
    # fresh-state validator unless told otherwise, and only the tools' view says otherwise.
    assert _constructed("FreshStateValidator") == {"controllers/disruption/_controller.py"}
    assert not re.search(r"class \w+\(DisruptionController\)",
                         "".join(p.read_text() for p in KARPY.rglob("*.py")))


def test_the_view_and_the_operator_share_the_disruption_controller_with_its_own_validator(
) -> None:
    """The operator's disruption controller validates with Karpenter's fresh-state
    validator; the tools' view wires the same controller class with ACCEPT."""
    from karpy.controllers.disruption import ACCEPT, FreshStateValidator

    clock = FakeClock()

    def wired(**options: Any) -> Any:
        manager = Manager(cast(Client, FakeClient(clock=clock)), metrics_bind_address="0",
                          health_probe_bind_address="0", clock=clock)
        deps = build_deps(manager=manager, provider=FakeCloudProvider(), clock=clock,
                          settings=Settings())
        return wire(deps, **options).disruption

    assert isinstance(wired().validator, FreshStateValidator)
    assert wired(read_only=True, disruption_validator=ACCEPT).validator is ACCEPT
    view = (KARPY / "tools" / "view" / "_view.py").read_text()
    assert "disruption_validator=ACCEPT" in view
