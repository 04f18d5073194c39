"""Snapshot files (karpy.tools.view.Snapshot): what ``kubectl get -o yaml`` prints,
read back into objects by kind; bad files refused naming the document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpy.runtime import kinds
from karpy.state import NODE_CLAIM, NODE_POOL
from karpy.state import testing as t
from karpy.tools.view import Snapshot, SnapshotError, view_kinds

KWOK_CLASS = {
    "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
    "metadata": {"name": "default"},
}


def every_kind() -> list[dict[str, object]]:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    return [
        namespace, t.nodepool("default"), t.nodeclaim("nc-1", provider_id="kwok://n1"),
        t.node("n1", provider_id="kwok://n1", nodepool="default"), t.daemonset("agent"),
        t.pod("web-1", namespace="shop"), pdb, t.persistent_volume_claim("data"),
        t.persistent_volume("pv-1"), t.storage_class("standard"), KWOK_CLASS,
    ]


def test_every_kind_a_view_reads_is_kept_from_a_kubectl_list() -> None:
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": every_kind()})
    snapshot = Snapshot.parse(text, source="cluster.yaml")
    found = {kind.kind for kind in snapshot.objects}
    assert found == {k.kind for k in view_kinds() if k.kind in
                     {str(o["kind"]) for o in every_kind()}}
    assert len(found) == 11
    assert [p["metadata"]["name"] for p in snapshot.of(kinds.POD)] == ["web-1"]
    assert snapshot.of(NODE_CLAIM)[0]["status"]["providerID"] == "kwok://n1"


def test_multi_document_streams_typed_lists_json_and_arrays_all_read(tmp_path: Path) -> None:
    stream = "---\n".join(yaml.safe_dump(o) for o in every_kind()[:3])
    typed = yaml.safe_dump({"apiVersion": "v1", "kind": "PodList",
                            "items": [{"metadata": {"name": "a", "namespace": "x"}}]})
    path = tmp_path / "s.yaml"
    path.write_text(stream + "---\n" + typed)
    snapshot = Snapshot.load(path)
    assert snapshot.count() == {"Namespace": 1, "NodePool": 1, "NodeClaim": 1, "Pod": 1}
    array = tmp_path / "s.json"
    array.write_text(json.dumps(every_kind()))
    assert Snapshot.load(array).count()["StorageClass"] == 1


def test_kinds_the_view_does_not_read_are_counted_not_kept() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    snapshot = Snapshot.from_documents([[service, service | {"metadata": {"name": "t"}},
                                        t.pod("p")]])
    assert snapshot.ignored == {"v1/Service": 2}
    assert snapshot.count() == {"Pod": 1}


def test_dump_round_trips() -> None:
    snapshot = Snapshot.from_documents([every_kind()])
    again = Snapshot.parse(snapshot.dump())
    assert again.count() == snapshot.count()
    assert again.of(NODE_POOL) == snapshot.of(NODE_POOL)


def test_with_objects_replaces_by_kind_and_name() -> None:
    base = Snapshot.from_documents([[t.nodepool("default"), t.nodepool("other")]])
    spot = t.nodepool("default", weight=7)
    merged = base.with_objects(Snapshot.from_documents([[spot, t.nodepool("new")]]))
    pools = {p["metadata"]["name"]: p for p in merged.of(NODE_POOL)}
    assert sorted(pools) == ["default", "new", "other"]
    assert pools["default"]["spec"]["weight"] == 7
    assert len(base.of(NODE_POOL)) == 2  # the original is unchanged


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: List\nitems:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}}\n"
         "  - [1, 2]\n", "snap.yaml: document 1, items[1]: expected an object, got a list"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: Pod\n",
         "snap.yaml: document 2: Pod is missing apiVersion"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "snap.yaml: document 1: missing kind"),
        ("apiVersion: v1\nkind: Node\nmetadata: {labels: {}}\n",
         "snap.yaml: document 1: Node is missing metadata.name"),
        ("apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: a}\n",
         "snap.yaml: document 1: PodDisruptionBudget apiVersion 'policy/v1beta1' is not read"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n"
         "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default}\n",
         "snap.yaml: document 2: Pod default/a appears twice (first at snap.yaml: document 1)"),
        ("kind: Pod\n  bad: [indent\n", "snap.yaml: not valid YAML (line 2"),
        ('{"kind": "List", "items": [}', "snap.yaml: not valid JSON (line 1"),
        ("- just\n- strings\n", "snap.yaml: document 1, [0]: expected a Kubernetes object"),
    ],
)
def test_bad_input_names_the_document_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(SnapshotError) as info:
        Snapshot.parse(text, source="snap.yaml")
    assert str(info.value).startswith(message), str(info.value)


def test_an_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match=r"missing\.yaml: cannot read"):
        Snapshot.load(tmp_path / "missing.yaml")


async def test_take_snapshot_lists_every_kind_through_a_read_only_client() -> None:
    from karpy.tools.view import ReadOnlyClient, SnapshotClient, take_snapshot

    original = Snapshot.from_documents([every_kind()])
    fake = SnapshotClient(original)
    taken = await take_snapshot(ReadOnlyClient(fake), source="fake")
    assert taken.count() == original.count()
    assert taken.source == "fake"
    assert fake.calls == []  # nothing was written
