"""docs/runtime.md's example is real code: it imports, and its reconciler works."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any

from karpy.runtime import KubeClient, Manager, kinds

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def _example(index: int = 0) -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) > index, "docs/runtime.md lost an example"
    namespace: dict[str, Any] = {"__name__": "docs_runtime_example"}  # not __main__: no run
    exec(compile(blocks[index], str(DOC), "exec"), namespace)
    return namespace


async def test_the_unit_test_example_runs_against_the_fake_client() -> None:
    """The second example (FakeClient) is a working test of the first's reconciler."""
    namespace = _example(1)
    namespace["Labeler"] = _example(0)["Labeler"]
    await namespace["test_labeler_counts_keys"]()


def test_the_example_fits_in_a_page_and_defines_a_controller() -> None:
    example = _example()
    block = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None and len(block.group(1).splitlines()) <= 60
    assert callable(example["main"]) and hasattr(example["Labeler"], "reconcile")
    assert example["NODE_POOL"].api_version == "karpenter.sh/v1"


async def test_the_example_reconciler_labels_configmaps(
    rt_client: KubeClient, namespace: str
) -> None:
    labeler_cls = _example()["Labeler"]
    await rt_client.create(
        kinds.CONFIG_MAP,
        {"metadata": {"name": "doc", "namespace": namespace}, "data": {"a": "1", "b": "2"}},
    )
    manager = Manager(
        rt_client, namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0"
    )
    manager.controller("labeler").for_(kinds.CONFIG_MAP).complete(labeler_cls(manager.client))
    task = asyncio.create_task(manager.run())
    try:
        for _ in range(200):
            cm = await rt_client.get(kinds.CONFIG_MAP, "doc", namespace=namespace)
            if (cm["metadata"].get("labels") or {}).get("keys") == "2":
                break
            await asyncio.sleep(0.1)
        assert cm["metadata"]["labels"]["keys"] == "2"
    finally:
        manager.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
