"""Runs the configmap-labeler example against the local control plane."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from labeler import LABEL, build

from karpy.runtime import Client, KubeClient, kinds


async def _label_of(client: Client, namespace: str, name: str) -> str | None:
    cm = await client.get(kinds.CONFIG_MAP, name, namespace=namespace)
    labels: dict[str, str] = cm["metadata"].get("labels") or {}
    return labels.get(LABEL)


async def _until(client: Client, namespace: str, name: str, want: str) -> None:
    for _ in range(300):
        if await _label_of(client, namespace, name) == want:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never got {LABEL}={want}")


async def test_labeler_labels_configmaps_and_follows_changes(cluster: Any, namespace: str) -> None:
    async with await KubeClient.from_kubeconfig(cluster.kubeconfig) as client:
        await client.create(
            kinds.CONFIG_MAP,
            {"metadata": {"name": "before", "namespace": namespace}, "data": {"a": "1", "b": "2"}},
        )
        manager = build(
            client, namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0"
        )
        task = asyncio.create_task(manager.run(), name="labeler")
        try:
            await _until(client, namespace, "before", "2")  # existing objects are labeled
            await client.create(
                kinds.CONFIG_MAP,
                {"metadata": {"name": "after", "namespace": namespace}, "data": {"x": "1"}},
            )
            await _until(client, namespace, "after", "1")  # new ones too
            await client.patch(
                kinds.CONFIG_MAP, "before", {"data": {"c": "3"}}, namespace=namespace
            )
            await _until(client, namespace, "before", "3")  # and the label follows the data
            labeled: set[str] = set()
            for _ in range(100):  # events are written in the background
                events = await client.list(
                    kinds.EVENT, namespace=namespace, field_selector="reason=Labeled"
                )
                labeled = {e["involvedObject"]["name"] for e in events}
                if labeled >= {"before", "after"}:
                    break
                await asyncio.sleep(0.1)
            assert labeled >= {"before", "after"}
        finally:
            manager.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 30)
