"""FakeClient keeps the API-server rules its docstring promises (and refuses the rest)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.runtime import PatchType, errors, kinds
from karpy.runtime.testing import FakeClient, FakeClock


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock)


def cm(name: str = "cm", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", **extra}, "data": {"a": "1"}}


def pod(
    name: str, labels: dict[str, str], *, phase: str = "Running", ready: bool = True
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "status": {"phase": phase,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pdb(name: str, labels: dict[str, str], **budget: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {**budget, "selector": {"matchLabels": labels}}}


async def evict(kube: FakeClient, name: str) -> None:
    await kube.create(kinds.POD, {"metadata": {"name": name, "namespace": "ns"}},
                      namespace="ns", subresource="eviction")


async def test_create_fills_server_fields_and_refuses_a_taken_name(kube: FakeClient) -> None:
    made = await kube.create(kinds.CONFIG_MAP, cm())
    meta = made["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert made["kind"] == "ConfigMap" and made["apiVersion"] == "v1"
    with pytest.raises(errors.AlreadyExists):
        await kube.create(kinds.CONFIG_MAP, cm())
    named = await kube.create(kinds.CONFIG_MAP, {"metadata": {"generateName": "gen-"}},
                              namespace="ns")
    assert named["metadata"]["name"].startswith("gen-") and named["metadata"]["name"] != "gen-"


async def test_merge_patch_merges_maps_replaces_lists_and_deletes_nulls(kube: FakeClient) -> None:
    kube.add(kinds.CONFIG_MAP, {"metadata": {"name": "cm", "namespace": "ns",
                                             "labels": {"a": "1", "b": "2"}},
                                "data": {"x": "1"}, "list": [1, 2]})
    out = await kube.patch(kinds.CONFIG_MAP, "cm",
                           {"metadata": {"labels": {"b": None, "c": "3"}}, "list": [3]},
                           namespace="ns")
    assert out["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert out["list"] == [3] and out["data"] == {"x": "1"}


async def test_a_stale_resource_version_is_a_conflict_and_writes_bump_it(kube: FakeClient) -> None:
    first = await kube.create(kinds.CONFIG_MAP, cm())
    rv = first["metadata"]["resourceVersion"]
    second = await kube.patch(kinds.CONFIG_MAP, "cm",
                              {"metadata": {"resourceVersion": rv}, "data": {"a": "2"}},
                              namespace="ns")
    assert second["metadata"]["resourceVersion"] != rv
    with pytest.raises(errors.Conflict):
        await kube.patch(kinds.CONFIG_MAP, "cm",
                         {"metadata": {"resourceVersion": rv}, "data": {"a": "3"}}, namespace="ns")
    assert kube.peek(kinds.CONFIG_MAP, "cm", "ns")["data"] == {"a": "2"}  # type: ignore[index]
    stale = dict(second, data={"a": "4"})
    stale["metadata"] = dict(second["metadata"], resourceVersion=rv)
    with pytest.raises(errors.Conflict):
        await kube.update(kinds.CONFIG_MAP, stale)


async def test_the_status_subresource_is_kept_apart(kube: FakeClient) -> None:
    kube.add(kinds.POD, pod("p", {}, phase="Pending"))
    out = await kube.patch(kinds.POD, "p", {"status": {"phase": "Running"},
                                            "metadata": {"labels": {"x": "y"}}}, namespace="ns")
    assert out["status"]["phase"] == "Pending" and out["metadata"]["labels"] == {"x": "y"}
    out = await kube.patch_status(kinds.POD, "p", {"status": {"phase": "Running"},
                                                   "metadata": {"labels": {"x": "z"}}},
                                  namespace="ns")
    assert out["status"]["phase"] == "Running" and out["metadata"]["labels"] == {"x": "y"}
    current = await kube.get(kinds.POD, "p", namespace="ns")
    replaced = {"metadata": dict(current["metadata"]), "status": {"phase": "Failed"}}
    out = await kube.update(kinds.POD, replaced)
    assert out["status"]["phase"] == "Running"  # update ignores status
    out = await kube.update_status(kinds.POD, {**replaced, "metadata": out["metadata"]})
    assert out["status"]["phase"] == "Failed"


async def test_finalizers_hold_a_deleted_object_until_the_last_is_removed(
    kube: FakeClient,
) -> None:
    kube.add(kinds.CONFIG_MAP, cm(finalizers=["a", "b"]))
    held = await kube.delete(kinds.CONFIG_MAP, "cm", namespace="ns")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    await kube.patch(kinds.CONFIG_MAP, "cm", {"metadata": {"finalizers": ["b"]}}, namespace="ns")
    assert kube.peek(kinds.CONFIG_MAP, "cm", "ns") is not None
    await kube.patch(kinds.CONFIG_MAP, "cm", {"metadata": {"finalizers": None}}, namespace="ns")
    assert kube.peek(kinds.CONFIG_MAP, "cm", "ns") is None
    with pytest.raises(errors.NotFound):
        await kube.get(kinds.CONFIG_MAP, "cm", namespace="ns")


async def test_delete_preconditions(kube: FakeClient) -> None:
    kube.add(kinds.CONFIG_MAP, cm())
    with pytest.raises(errors.Conflict):
        await kube.delete(kinds.CONFIG_MAP, "cm", namespace="ns", uid="someone-else")
    with pytest.raises(errors.Conflict):
        await kube.delete(kinds.CONFIG_MAP, "cm", namespace="ns", resource_version="0")
    await kube.delete(kinds.CONFIG_MAP, "cm", namespace="ns")
    with pytest.raises(errors.NotFound):
        await kube.delete(kinds.CONFIG_MAP, "cm", namespace="ns")


async def test_list_filters_by_namespace_labels_and_fields(kube: FakeClient) -> None:
    kube.add(kinds.POD, pod("a", {"app": "web", "tier": "1"}))
    kube.add(kinds.POD, pod("b", {"app": "db"}, phase="Pending"))
    kube.add(kinds.POD, {**pod("c", {"app": "web"}), "metadata": {"name": "c", "namespace": "other",
                                                               "labels": {"app": "web"}}})

    async def names(**kw: Any) -> set[str]:
        return {p["metadata"]["name"] for p in await kube.list(kinds.POD, **kw)}

    assert await names() == {"a", "b", "c"}
    assert await names(namespace="ns") == {"a", "b"}
    assert await names(label_selector={"app": "web"}) == {"a", "c"}
    assert await names(label_selector="app in (web,db),!tier") == {"b", "c"}
    assert await names(field_selector="status.phase=Pending") == {"b"}


async def test_reads_are_read_only_and_writes_are_recorded(kube: FakeClient) -> None:
    await kube.create(kinds.CONFIG_MAP, cm())
    got = await kube.get(kinds.CONFIG_MAP, "cm", namespace="ns")
    with pytest.raises(TypeError):
        got["data"]["a"] = "2"
    await kube.patch(kinds.CONFIG_MAP, "cm", {"data": {"a": "2"}}, namespace="ns")
    await kube.delete(kinds.CONFIG_MAP, "cm", namespace="ns")
    assert [(c.verb, c.kind, c.name) for c in kube.calls] == [
        ("create", kinds.CONFIG_MAP, "cm"),
        ("patch", kinds.CONFIG_MAP, "cm"),
        ("delete", kinds.CONFIG_MAP, "cm"),
    ]


async def test_fail_next_fails_one_write_only(kube: FakeClient) -> None:
    kube.add(kinds.CONFIG_MAP, cm())
    kube.fail_next("patch", "cm", errors.ServerError("boom", status=500))
    with pytest.raises(errors.ServerError):
        await kube.patch(kinds.CONFIG_MAP, "cm", {"data": {"a": "2"}}, namespace="ns")
    assert kube.peek(kinds.CONFIG_MAP, "cm", "ns")["data"] == {"a": "1"}  # type: ignore[index]
    await kube.patch(kinds.CONFIG_MAP, "cm", {"data": {"a": "2"}}, namespace="ns")
    assert kube.peek(kinds.CONFIG_MAP, "cm", "ns")["data"] == {"a": "2"}  # type: ignore[index]


def test_by_index_uses_the_index_functions_it_was_given(clock: FakeClock) -> None:
    kube = FakeClient(clock=clock, indexers={
        (kinds.POD, "node"): lambda o: [o["spec"]["nodeName"]] if o.get("spec") else []})
    kube.add(kinds.POD, {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n1"}})
    kube.add(kinds.POD, {"metadata": {"name": "b", "namespace": "ns"}, "spec": {"nodeName": "n2"}})
    assert [p["metadata"]["name"] for p in kube.by_index(kinds.POD, "node", "n1")] == ["a"]
    with pytest.raises(KeyError, match="no index"):
        kube.by_index(kinds.NODE, "node", "n1")


async def test_unemulated_features_are_refused_not_faked(kube: FakeClient) -> None:
    kube.add(kinds.CONFIG_MAP, cm())
    with pytest.raises(NotImplementedError):
        await kube.patch(kinds.CONFIG_MAP, "cm", [{"op": "remove", "path": "/data"}],
                         namespace="ns", patch_type=PatchType.JSON)
    with pytest.raises(NotImplementedError):
        await kube.apply(kinds.CONFIG_MAP, cm(), field_manager="me")


async def test_eviction_honours_a_min_available_budget(kube: FakeClient) -> None:
    kube.add(kinds.POD, pod("a", {"app": "web"}))
    kube.add(kinds.POD, pod("b", {"app": "web"}))
    kube.add(kinds.POD_DISRUPTION_BUDGET, pdb("web", {"app": "web"}, minAvailable=1))
    await evict(kube, "a")
    assert kube.peek(kinds.POD, "a", "ns") is None
    with pytest.raises(errors.TooManyRequests):
        await evict(kube, "b")
    assert kube.peek(kinds.POD, "b", "ns") is not None


async def test_eviction_with_max_unavailable_counts_unready_pods(kube: FakeClient) -> None:
    kube.add(kinds.POD, pod("a", {"app": "web"}))
    kube.add(kinds.POD, pod("b", {"app": "web"}, ready=False))
    kube.add(kinds.POD_DISRUPTION_BUDGET, pdb("web", {"app": "web"}, maxUnavailable=1))
    with pytest.raises(errors.TooManyRequests):
        await evict(kube, "a")  # "b" is already the one unavailable pod
    await evict(kube, "b")  # evicting the unready pod makes nothing worse


async def test_eviction_ignores_budgets_for_pods_not_running_and_refuses_two(
    kube: FakeClient,
) -> None:
    kube.add(kinds.POD, pod("done", {"app": "web"}, phase="Succeeded", ready=False))
    kube.add(kinds.POD, pod("live", {"app": "web"}))
    kube.add(kinds.POD_DISRUPTION_BUDGET, pdb("web", {"app": "web"}, minAvailable=5))
    await evict(kube, "done")
    kube.add(kinds.POD_DISRUPTION_BUDGET, pdb("all", {}, minAvailable=0))
    with pytest.raises(errors.ServerError) as info:
        await evict(kube, "live")
    assert info.value.status == 500


async def test_lingering_pods_stay_terminating_for_their_grace_period(
    kube: FakeClient, clock: FakeClock
) -> None:
    kube.pods_linger = True
    kube.add(kinds.POD, {**pod("a", {}), "spec": {"terminationGracePeriodSeconds": 45}})
    await kube.delete(kinds.POD, "a", namespace="ns")
    stored = kube.peek(kinds.POD, "a", "ns")
    assert stored is not None
    assert stored["metadata"]["deletionTimestamp"] == "2024-01-01T00:00:45Z"
