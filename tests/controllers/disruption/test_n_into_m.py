"""N into M (karpy beyond Karpenter, docs/disruption.md "N into M"): multi-node
consolidation replaces N nodes by M < N cheaper ones when no single node is large
enough to take them all, where Karpenter's answer is "nothing"."""

from __future__ import annotations

import asyncio
from typing import cast

from disruption_support import Scene, SceneController, decide, instance_type

from karpy.controllers.disruption import Command, FailureKind, ValidationFailure
from karpy.controllers.disruption._multinode import MultiNodeConsolidation
from karpy.controllers.settings import Settings
from karpy.runtime.testing import FakeClock
from karpy.scheduling import resources as res


def fragmented() -> Scene:
    """Three 6-vCPU nodes ($0.30/h each), each holding two 2.4-vCPU pods. The NodePool's
    types stop at 8 vCPU ($0.05 per vCPU-hour, linear). No node can go: its pods do not
    fit in the others' 1.2 free vCPU; no node has a cheaper replacement (6 vCPU is the
    smallest type for 4.8); no two nodes fit on one (9.6 > 8). Three pods fit on an
    8-vCPU node, so the six fit on two: $0.80/h instead of $0.90/h."""
    scene = Scene(types=[
        instance_type(f"m-{cpu}x", cpu, 4 * cpu, price=0.05 * cpu) for cpu in (2, 4, 6, 8)
    ])
    scene.pool(budgets=[{"nodes": "100%"}])
    for n in range(3):
        scene.machine(f"n{n}", "m-6x")
        for p in range(2):
            scene.pod(f"p{n}{p}", f"n{n}", cpu="2400m")
    return scene


async def test_three_nodes_become_two_cheaper_ones() -> None:
    [command] = await decide(fragmented())
    assert command.consolidation_type == "multi"
    assert sorted(c.name for c in command.candidates) == ["n0", "n1", "n2"]
    assert len(command.replacements) == 2
    for plan in command.replacements:
        # Every type a replacement may launch holds three pods and keeps the sum cheaper.
        assert plan.instance_type_names == ["m-8x"]
        assert len(plan.pods) == 3
    assert abs(command.estimated_savings - 0.10) < 1e-9


async def test_karpenter_and_the_switch_off_find_nothing() -> None:
    # Karpenter's answer (and karpy's with multi_node_split_consolidation=False): no
    # single deletion or replacement, and no two or three nodes into one.
    controller = SceneController(fragmented(), Settings(multi_node_split_consolidation=False))
    for method in controller.methods:
        assert await controller.run(method) == []


async def test_n_into_m_only_when_strictly_cheaper() -> None:
    # With the 8-vCPU type at $0.46/h, two of them ($0.92/h) cost more than the three
    # nodes ($0.90/h): nothing happens.
    scene = fragmented()
    dear = instance_type("m-8x", 8, 32, price=0.46)
    scene.types[-1] = dear
    assert dear.capacity[res.CPU] == 8000
    controller = SceneController(scene)
    commands: list[Command] = await controller.run(MultiNodeConsolidation())
    assert commands == []


async def test_validation_keeps_an_n_into_m_command_and_refuses_it_when_switched_off() -> None:
    # The controller's re-simulation after the validation delay decides N into M again
    # (the same two replacements), and refuses it if the switch went off meanwhile.
    scene = fragmented()
    controller = SceneController(scene)
    [command] = await controller.run(MultiNodeConsolidation())
    validated = await validate(controller, command)
    assert isinstance(validated, Command) and len(validated.replacements) == 2
    off = SceneController(scene, Settings(multi_node_split_consolidation=False))
    refused = await validate(off, command)
    assert isinstance(refused, ValidationFailure) and refused.kind is FailureKind.SCHEDULING


async def validate(controller: SceneController, command: Command) -> Command | ValidationFailure:
    """The controller's validation, its delay stepped through on the fake clock."""
    task = asyncio.create_task(controller.validator.validate(command, MultiNodeConsolidation()))
    clock = cast(FakeClock, controller._clock)
    while not task.done():
        await clock.step(controller._settings.disruption_validation_delay)
    return await task
