"""``karpy.runtime.Client`` is a protocol that the real client, the fake and the tools'
clients all implement (mypy proves it where each is declared; this checks the same at
run time), and code written when ``Client`` was the concrete class still builds one."""

from __future__ import annotations

import inspect
import warnings

import pytest
from kubernetes_asyncio import client as k8s_client

from karpy.runtime import Client, KubeClient, LeaderElectionConfig, ListerWatcher, ManagerClient
from karpy.runtime.leaderelection import LeaderElector
from karpy.runtime.testing import FakeClient
from karpy.tools.view import ReadOnlyClient, SnapshotClient

IMPLEMENTATIONS = {
    "Client": [KubeClient, FakeClient, ReadOnlyClient, SnapshotClient],
    "ListerWatcher": [KubeClient, ReadOnlyClient, SnapshotClient],
    "ManagerClient": [KubeClient, ReadOnlyClient],
}
PROTOCOLS = {"Client": Client, "ListerWatcher": ListerWatcher, "ManagerClient": ManagerClient}


def _verbs(protocol: type) -> list[str]:
    return sorted(name for name in vars(protocol) if not name.startswith("_"))


@pytest.mark.parametrize(
    ("protocol", "implementation"),
    [(p, i) for p, impls in IMPLEMENTATIONS.items() for i in impls],
    ids=[f"{p}-{i.__name__}" for p, impls in IMPLEMENTATIONS.items() for i in impls],
)
def test_each_implementation_takes_every_verb_and_keyword(
    protocol: str, implementation: type
) -> None:
    for verb in _verbs(PROTOCOLS[protocol]):
        wanted = inspect.signature(getattr(PROTOCOLS[protocol], verb)).parameters
        offered = inspect.signature(getattr(implementation, verb)).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in offered.values())
        missing = [n for n in wanted if n not in offered and not takes_any]
        assert missing == [], f"{implementation.__name__}.{verb} lacks {missing}"
    assert PROTOCOLS[protocol] not in implementation.__mro__, "implements it, never subclasses"


def test_the_protocol_names_reads_and_writes_only() -> None:
    assert _verbs(Client) == [
        "apply", "create", "delete", "get", "list", "patch", "patch_status", "update",
        "update_status",
    ]
    assert _verbs(ListerWatcher) == ["list_page", "watch"]
    assert isinstance(FakeClient(), Client)  # as isinstance(x, Client) worked before
    assert not isinstance(FakeClient(), ListerWatcher)
    assert not isinstance(object(), Client)


async def test_building_a_client_the_old_way_warns_and_builds_a_kube_client() -> None:
    api = k8s_client.ApiClient(k8s_client.Configuration(host="http://127.0.0.1:1"))
    with pytest.warns(DeprecationWarning, match="use karpy.runtime.KubeClient"):
        made = Client(api, timeout=5)  # type: ignore[misc]
    assert isinstance(made, KubeClient)
    assert made.timeout == 5
    await made.close()
    await api.close()
    with pytest.warns(DeprecationWarning, match=r"Client\.from_kubeconfig\(\)"):
        build = Client.from_kubeconfig  # type: ignore[attr-defined]
    assert build == KubeClient.from_kubeconfig
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            Client.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_leader_election_renewing_in_its_own_thread_needs_a_kube_client() -> None:
    config = LeaderElectionConfig(name="karpy", namespace="karpy", renew_in_thread=True)
    with pytest.raises(TypeError, match=r"renew_in_thread needs a KubeClient.*not FakeClient"):
        LeaderElector(FakeClient(), config)
    # renewing on the caller's loop, any Client will do (the unit tests' fakes)
    LeaderElector(FakeClient(), LeaderElectionConfig(name="karpy", namespace="karpy"))
