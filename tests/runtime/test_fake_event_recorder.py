"""karpy.runtime.testing.FakeEventRecorder keeps every Event a controller records, in
order, about which object, and writes none."""

from __future__ import annotations

import ast
from pathlib import Path

from karpy.runtime import EventRecorder
from karpy.runtime.testing import FakeEventRecorder, RecordedEvent

POD = {"kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop"}}
NODE = {"kind": "Node", "metadata": {"name": "node-a"}}


async def test_it_keeps_every_event_in_order_and_writes_none() -> None:
    recorder = FakeEventRecorder()
    assert isinstance(recorder, EventRecorder)  # accepted wherever a recorder is
    recorder.normal(POD, "Evicted", "Evicted pod")
    recorder.warning(NODE, "FailedDraining", "Failed to drain node")
    recorder.normal(POD, "Evicted", "Evicted pod")  # repeats are kept, not counted
    await recorder.flush()
    assert recorder.events == [
        RecordedEvent("Pod", "shop", "web-1", "Normal", "Evicted", "Evicted pod"),
        RecordedEvent("Node", "", "node-a", "Warning", "FailedDraining", "Failed to drain node"),
        RecordedEvent("Pod", "shop", "web-1", "Normal", "Evicted", "Evicted pod"),
    ]
    assert recorder.reasons() == ["Evicted", "FailedDraining", "Evicted"]
    assert recorder.reasons("node-a") == ["FailedDraining"]
    assert [e.name for e in recorder.with_reason("Evicted")] == ["web-1", "web-1"]
    assert len(recorder.about("Pod", "web-1", "shop")) == 2
    assert recorder.about("Pod", "web-1") == []
    assert recorder.dropped == 0


def test_it_is_the_only_recording_recorder() -> None:
    """Tests and tools record Events through FakeEventRecorder, not a recorder of their
    own: no class outside the runtime implements ``normal`` and ``warning`` (protocols
    naming what a controller needs of a recorder are fine)."""
    root = Path(__file__).resolve().parents[2]
    own = []
    for top in ("karpy", "providers", "tests", "examples"):
        for path in sorted((root / top).rglob("*.py")):
            if path.is_relative_to(root / "karpy" / "runtime"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                if any(ast.unparse(base).endswith("Protocol") for base in node.bases):
                    continue
                methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
                if {"normal", "warning"} <= methods:
                    own.append(f"{path.relative_to(root)}:{node.name}")
    assert own == []
