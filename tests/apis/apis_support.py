"""Helpers for the API tests: the example manifests, the model of each kind, and a tracker
of objects created in the cluster (deleted by the ``created`` fixture of conftest.py)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import yaml

from karpy.apis.extension import load_extensions
from karpy.apis.model import Resource

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "manifests"

#: Every kind karpy defines (core and installed providers), by kind name.
MODELS: dict[str, type[Resource]] = {
    cls.crd.kind: cls for ext in load_extensions() for cls in ext.resources
}


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


def load_example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return doc


def unique_name(name: str) -> str:
    """``name`` with a random suffix, still a valid object name."""
    return f"{name[:40]}-{secrets.token_hex(3)}"


def plural(kind: str) -> str:
    return f"{MODELS[kind].crd.plural}.{MODELS[kind].crd.group}"


class Created:
    """Objects a test created; deleted (and waited for) when the test ends."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.objects: list[tuple[str, str]] = []

    def create(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Create ``doc`` under a unique name (other tests share the cluster) and return it
        as the API server stored it; ``doc``'s name is updated to the one used."""
        doc["metadata"]["name"] = unique_name(doc["metadata"]["name"])
        out = self.cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(doc))
        self.objects.append((plural(doc["kind"]), doc["metadata"]["name"]))
        stored: dict[str, Any] = json.loads(out)
        return stored

    def get(self, kind: str, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self.cluster.kubectl_json("get", plural(kind), name)
        return doc
