"""Every manifest in examples/manifests parses with karpy's models and applies to the
real API server, which fills the same defaults the models do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from apis_support import MODELS, Created, example_files, load_example

KINDS_COVERED = {"NodePool", "NodeClaim", "EC2NodeClass", "AKSNodeClass"}
#: Fields that controllers set, not users.
CONTROLLER_SET = {"time_added"}


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_examples_cover_every_kind() -> None:
    kinds = {d["kind"] for p in example_files() for d in docs(p)}
    assert kinds >= KINDS_COVERED


def fields_set(model: Any, prefix: str = "") -> set[str]:
    """The dotted names of every field explicitly set in a parsed model tree."""
    from pydantic import BaseModel

    out: set[str] = set()
    for name in model.model_fields_set:
        out.add(prefix + name)
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, BaseModel):
                out |= fields_set(item, f"{prefix}{name}.")
    return out


def all_fields(cls: Any, prefix: str = "") -> set[str]:
    """The dotted names of every field of a model class, through nested models."""
    import typing

    from pydantic import BaseModel

    out: set[str] = set()
    for name, info in cls.model_fields.items():
        out.add(prefix + name)
        for arg in [info.annotation, *typing.get_args(info.annotation)]:
            for inner in [arg, *typing.get_args(arg)]:
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    out |= all_fields(inner, f"{prefix}{name}.")
    return out


@pytest.mark.parametrize("kind", sorted(KINDS_COVERED))
def test_examples_set_every_spec_field(kind: str) -> None:
    cls: Any = MODELS[kind]
    spec_cls = cls.model_fields["spec"].annotation
    wanted = {f for f in all_fields(spec_cls) if f.rsplit(".", 1)[-1] not in CONTROLLER_SET}
    seen: set[str] = set()
    for path in example_files():
        for doc in docs(path):
            if doc["kind"] == kind:
                seen |= fields_set(cls.model_validate(doc).spec)
    assert wanted - seen == set(), f"no example of {kind} sets {sorted(wanted - seen)}"


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_parses_and_round_trips_through_the_model(path: Path) -> None:
    for doc in docs(path):
        model = MODELS[doc["kind"]].model_validate(doc)
        assert MODELS[doc["kind"]].model_validate(model.to_dict()) == model


@pytest.mark.cluster
@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_applies_and_reads_back_with_defaults(path: Path, created: Created) -> None:
    for doc in docs(path):
        stored = created.create(doc)
        read = created.get(doc["kind"], doc["metadata"]["name"])
        assert read["spec"] == stored["spec"]
        cls: Any = MODELS[doc["kind"]]
        # The server filled Karpenter's defaults; the model fills the same ones.
        assert cls.model_validate(read).spec == cls.model_validate(doc).spec
        # ... and nothing the manifest says was pruned or changed.
        assert_contains(read["spec"], doc.get("spec") or {}, "spec")


def assert_contains(actual: Any, expected: Any, path: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} was dropped"
            assert_contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_contains(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, path


@pytest.mark.cluster
def test_defaults_are_filled_by_the_server(created: Created) -> None:
    pool = created.create(load_example("nodepool-minimal.yaml"))["spec"]
    assert pool["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    assert pool["template"]["spec"]["expireAfter"] == "720h"
    ec2 = created.create(load_example("ec2nodeclass-custom.yaml"))["spec"]
    assert ec2["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
    aks = created.create(load_example("aksnodeclass-minimal.yaml"))["spec"]
    assert aks == {"osDiskSizeGB": 128, "imageFamily": "Ubuntu"}
