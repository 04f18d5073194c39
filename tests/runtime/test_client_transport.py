"""The client's transport: the environment (proxy variables, ``.netrc``) is read once
when a client is built, not on every request; a client with its own connections. A stub
HTTP endpoint plays the API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp.client
import pytest
from aiohttp import web
from aiohttp_serving import serving
from kubernetes_asyncio import client as k8s_client

from karpy.runtime import KubeClient, kinds


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def get(request: web.Request) -> web.Response:
        return web.json_response({"metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", get)
    async with serving(app) as url:
        yield url


def _client(host: str) -> KubeClient:
    configuration = k8s_client.Configuration(host=host)
    return KubeClient(k8s_client.ApiClient(configuration), timeout=5, owns_api_client=True)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records aiohttp's per-request environment lookups."""
    seen: list[str] = []
    real_proxy = aiohttp.client.get_env_proxy_for_url
    real_netrc = aiohttp.ClientSession._get_netrc_auth

    def proxy(url: Any) -> Any:
        seen.append("proxy")
        return real_proxy(url)

    def netrc(self: aiohttp.ClientSession, host: str) -> Any:
        seen.append("netrc")
        return real_netrc(self, host)

    monkeypatch.setattr(aiohttp.client, "get_env_proxy_for_url", proxy)
    monkeypatch.setattr(aiohttp.ClientSession, "_get_netrc_auth", netrc)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    return seen


async def test_requests_do_not_look_up_proxy_or_netrc_when_no_proxy_applies(
    server: str, lookups: list[str]
) -> None:
    client = _client(server)
    try:
        for _ in range(3):
            got = await client.get(kinds.NAMESPACE, "default", live=True)
            assert got["metadata"]["name"] == "default"
    finally:
        await client.close()
    assert lookups == []


async def test_a_proxy_from_the_environment_is_still_honoured(
    server: str, lookups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    client = _client(server)
    try:
        assert client.api_client.rest_client.pool_manager.trust_env
    finally:
        await client.close()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = _client(server)
    try:
        assert not client.api_client.rest_client.pool_manager.trust_env
    finally:
        await client.close()


async def test_with_own_connections_is_a_separate_pool_to_the_same_server(
    server: str, lookups: list[str]
) -> None:
    client = _client(server)
    own = client.with_own_connections()
    try:
        assert own.api_client.rest_client.pool_manager is not (
            client.api_client.rest_client.pool_manager)
        got = await own.get(kinds.NAMESPACE, "kube-system", live=True)
        assert got["metadata"]["name"] == "kube-system"
        await own.close()
        # Closing it leaves the original usable.
        assert (await client.get(kinds.NAMESPACE, "x", live=True))["metadata"]["name"] == "x"
    finally:
        await own.close()
        await client.close()
    assert lookups == []



async def test_a_client_from_a_kubeconfig_opens_at_most_48_connections(
    tmp_path: Any,
) -> None:
    # Every HTTPS connection holds a 256 KiB TLS buffer; a hundred concurrent requests
    # must queue on a bounded pool rather than open a hundred connections.
    peers: set[tuple[str, int]] = set()

    async def get(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername"))  # type: ignore[union-attr]
        await asyncio.sleep(0.02)  # the API server's latency, so requests overlap
        return web.json_response({"metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", get)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        names = await asyncio.gather(
            *(client.get(kinds.NAMESPACE, f"ns-{i}", live=True) for i in range(100)))
    finally:
        await client.close()
        await runner.cleanup()
    assert [n["metadata"]["name"] for n in names] == [f"ns-{i}" for i in range(100)]
    assert 1 < len(peers) <= 48
