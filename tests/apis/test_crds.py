"""The checked-in CRDs are what the generator writes today, one set per provider, and
they are structural schemas the API server will accept (checked here without a server;
the cluster tests install them for real)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.apis import crdgen
from karpy.apis.extension import load_extensions

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"


def load(name: str, provider: str = "kwok") -> dict[str, Any]:
    """A generated CRD, by file name (``aws/...`` for another set than kwok's)."""
    if "/" in name:
        provider, name = name.split("/", 1)
    text = crdgen.generate(provider=provider)[name]
    doc: dict[str, Any] = yaml.safe_load(text.split("---\n", 1)[1])
    return doc


def schema_of(name: str) -> dict[str, Any]:
    node: dict[str, Any] = load(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return node


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_checked_in_crds_are_up_to_date() -> None:
    stale = crdgen.stale(CRDS)
    assert not stale, f"crds/ is stale ({', '.join(stale)}): run `karpy crds`"
    on_disk = {p.relative_to(CRDS).as_posix() for p in CRDS.rglob("*.yaml")}
    assert on_disk == set(crdgen.generate())


def test_each_provider_set_holds_the_core_kinds_and_only_its_own_nodeclass() -> None:
    assert {"aws", "azure", "kwok"} <= set(crdgen.providers())
    nodeclasses = {}
    for provider in crdgen.providers():
        names = set(crdgen.generate(provider=provider))
        # Karpenter's core kinds, Cluster Autoscaler's CapacityBuffer it serves (v1.14)
        # and karpy's own ClusterLimit
        core = {
            "karpenter.sh_nodepools.yaml",
            "karpenter.sh_nodeclaims.yaml",
            "karpenter.sh_nodeoverlays.yaml",
            "autoscaling.x-k8s.io_capacitybuffers.yaml",
            "karpy.dev_clusterlimits.yaml",
        }
        assert core <= names
        (nodeclasses[provider],) = names - core
    assert nodeclasses["aws"] == "karpenter.k8s.aws_ec2nodeclasses.yaml"
    assert nodeclasses["azure"] == "karpenter.azure.com_aksnodeclasses.yaml"
    assert nodeclasses["kwok"] == "karpenter.kwok.sh_kwoknodeclasses.yaml"
    kinds = {cls.crd.kind for ext in load_extensions() for cls in ext.resources}
    assert {"NodePool", "NodeClaim", "NodeOverlay", "CapacityBuffer", "ClusterLimit"} <= kinds


def label_messages(provider: str) -> list[str]:
    spec = at(schema_of(f"{provider}/karpenter.sh_nodepools.yaml"), "spec")
    rules = at(spec, "template.metadata.labels")["x-kubernetes-validations"]
    return [r["message"] for r in rules]


CORE_MESSAGES = [
    'label domain "kubernetes.io" is restricted',
    'label domain "k8s.io" is restricted',
    'label domain "karpenter.sh" is restricted',
    'label "karpenter.sh/nodepool" is restricted',
    'label "kubernetes.io/hostname" is restricted',
]


def test_a_provider_set_carries_the_core_rules_and_only_that_providers() -> None:
    # Karpenter-AWS's and Karpenter-Azure's NodePool CRDs, message for message.
    assert label_messages("aws") == [
        *CORE_MESSAGES,
        'label domain "karpenter.k8s.aws" is restricted',
    ]
    assert label_messages("azure") == [
        *CORE_MESSAGES,
        'label domain "karpenter.azure.com" is restricted',
        'label domain "kubernetes.azure.com" is restricted',
        'label "agentpool" is restricted',
        'label "storageprofile" is restricted',
        'label "storagetier" is restricted',
        'label "accelerator" is restricted',
    ]
    assert label_messages("kwok") == [
        *CORE_MESSAGES,
        'label domain "karpenter.kwok.sh" is restricted',
    ]


def test_karpy_crds_provider_writes_one_set_or_names_the_installed_ones(tmp_path: Path) -> None:
    def karpy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True, check=False
        )

    done = karpy("crds", "--provider", "aws", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(crdgen.generate(provider="aws"))
    assert 'label "accelerator"' not in (tmp_path / "karpenter.sh_nodepools.yaml").read_text()
    stream = karpy("crds", "--provider", "azure", "--output", "-")
    assert stream.returncode == 0, stream.stderr
    docs = [d for d in yaml.safe_load_all(stream.stdout) if d]
    assert sorted(d["spec"]["names"]["kind"] for d in docs) == [
        "AKSNodeClass", "CapacityBuffer", "ClusterLimit", "NodeClaim", "NodeOverlay",
        "NodePool",
    ]  # fmt: skip
    bad = karpy("crds", "--provider", "gce")
    assert bad.returncode == 2
    assert "--provider" in bad.stderr and "'gce'" in bad.stderr and "aws" in bad.stderr
    assert karpy("crds", "--output", "-").returncode == 2


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        out.append((path, node))
        for key, child in node.get("properties", {}).items():
            out.extend(walk(child, f"{path}.{key}"))
        if "items" in node:
            out.extend(walk(node["items"], f"{path}[]"))
        if isinstance(node.get("additionalProperties"), dict):
            out.extend(walk(node["additionalProperties"], f"{path}{{}}"))
    return out


@pytest.mark.parametrize("name", sorted(crdgen.generate()))
def test_schemas_are_structural(name: str) -> None:  # name: <provider>/<file>
    schema = schema_of(name)
    for path, node in walk(schema):
        where = f"{name}{path}"
        assert "$ref" not in node, where
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], where
            continue
        if node.get("x-kubernetes-preserve-unknown-fields"):
            continue
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, (
            where
        )
        if "properties" in node or "additionalProperties" in node:
            assert node["type"] == "object", where
        for required in node.get("required", []):
            assert required in node["properties"], f"{where} requires unknown {required}"
        if "enum" in node:
            assert all(isinstance(v, str) for v in node["enum"]), where
        if "pattern" in node:
            re.compile(node["pattern"])
        for rule in node.get("x-kubernetes-validations", []):
            assert set(rule) == {"rule", "message"} and rule["message"], where


def test_defaults_are_karpenters() -> None:
    spec = at(schema_of("karpenter.sh_nodepools.yaml"), "spec")
    assert at(spec, "disruption")["default"] == {"consolidateAfter": "0s"}
    assert at(spec, "disruption.consolidationPolicy")["default"] == "WhenEmptyOrUnderutilized"
    assert at(spec, "disruption.budgets")["default"] == [{"nodes": "10%"}]
    assert at(spec, "template.spec.expireAfter")["default"] == "720h"
    assert at(spec, "weight")["minimum"] == 1 and at(spec, "weight")["maximum"] == 100
    req = at(spec, "template.spec.requirements.[]")
    assert req["properties"]["minValues"]["minimum"] == 1
    assert req["properties"]["minValues"]["maximum"] == 50
    claim = at(schema_of("karpenter.sh_nodeclaims.yaml"), "spec")
    assert at(claim, "expireAfter")["default"] == "720h"
    assert claim["x-kubernetes-validations"] == [
        {"message": "spec is immutable", "rule": "self == oldSelf"}
    ]


def test_printer_columns_match_kubectl_get_of_karpenter() -> None:
    def columns(name: str, wide: bool) -> list[str]:
        cols = load(name)["spec"]["versions"][0]["additionalPrinterColumns"]
        return [c["name"].upper() for c in cols if bool(c.get("priority", 0)) == wide]

    assert columns("karpenter.sh_nodeclaims.yaml", False) == [
        "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE",
    ]  # fmt: skip
    assert columns("karpenter.sh_nodeclaims.yaml", True) == [
        "IMAGEID", "ID", "NODEPOOL", "NODECLASS", "DRIFTED",
    ]  # fmt: skip
    assert columns("karpenter.sh_nodepools.yaml", False) == ["NODECLASS", "NODES", "READY", "AGE"]


def test_nodepool_label_rules_cover_core_and_provider_domains() -> None:
    spec = at(schema_of("aws/karpenter.sh_nodepools.yaml"), "spec")
    key_rules = at(spec, "template.spec.requirements.[].key")["x-kubernetes-validations"]
    messages = [r["message"] for r in key_rules]
    assert messages[:5] == CORE_MESSAGES
    label_rules = at(spec, "template.metadata.labels")["x-kubernetes-validations"]
    assert [r["message"] for r in label_rules] == messages
    assert all(r["rule"].startswith("self.all(x, ") for r in label_rules)
    assert messages[5:] == ['label domain "karpenter.k8s.aws" is restricted']
    claim_rules = at(schema_of("aws/karpenter.sh_nodeclaims.yaml"), "spec.requirements.[].key")[
        "x-kubernetes-validations"
    ]
    assert 'label "karpenter.sh/nodepool" is restricted' not in [r["message"] for r in claim_rules]


def test_status_subresource_is_enabled() -> None:
    for name in crdgen.generate():
        assert load(name)["spec"]["versions"][0]["subresources"]["status"] == {}


def test_karpy_crds_command_writes_and_checks(tmp_path: Path) -> None:
    def karpy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True, check=False
        )

    check = karpy("crds", "--check", "--output", str(tmp_path))
    assert check.returncode == 1 and "out of date" in check.stderr
    done = karpy("crds", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert {Path(p).relative_to(tmp_path).as_posix() for p in done.stdout.split()} == set(
        crdgen.generate()
    )
    assert karpy("crds", "--check", "--output", str(tmp_path)).returncode == 0


def test_api_reference_is_up_to_date_and_lists_every_field() -> None:
    text = crdgen.api_reference()
    on_disk = (REPO / "docs" / "api.md").read_text()
    assert on_disk == text, "docs/api.md is stale: run `karpy crds --docs docs/api.md`"
    for name in crdgen.generate():
        crd = load(name)
        kind = crd["spec"]["names"]["kind"]
        assert f"## {kind} (" in text
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, _node in walk(schema["properties"]["spec"], "spec"):
            if path.endswith(("[]", "{}")):
                continue  # a list item or map value is described by its container's row
            assert f"`{path}`" in text, f"{kind} field {path} is missing from docs/api.md"


def test_karpy_crds_check_covers_the_docs(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    docs = tmp_path / "api.md"
    args = ("crds", "--output", str(crds), "--docs", str(docs))
    run = subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    docs.write_text(docs.read_text() + "edited\n")
    check = subprocess.run(
        [sys.executable, "-m", "karpy.cli", *args, "--check"], capture_output=True, text=True
    )
    assert check.returncode == 1 and str(docs) in check.stderr


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("karpenter.sh_nodepools.yaml", "spec.template.spec.requirements"),
        ("karpenter.sh_nodeclaims.yaml", "spec.requirements"),
        ("karpenter.sh_nodeoverlays.yaml", "spec.requirements"),
    ],
)
def test_requirements_accept_gte_and_lte_with_karpenters_rule(name: str, path: str) -> None:
    requirements = at(schema_of(name), path)
    assert at(requirements, "[].operator")["enum"][-2:] == ["Gte", "Lte"]
    rules = [r["rule"] for r in requirements["x-kubernetes-validations"]]
    assert any("x.operator == 'Gte' || x.operator == 'Lte'" in r for r in rules)
