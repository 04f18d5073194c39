"""A client can say the API server's version (client-go's discovery ServerVersion):
KubeClient reads /version with its retries, and any client with ``server_version()`` —
an embedder's own — is one the providers can ask, without being a KubeClient."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp_serving import serving
from kubernetes_asyncio import client as k8s_client

from karpy.runtime import KubeClient, ReportsServerVersion, ServerVersion

EKS = {"major": "1", "minor": "31+", "gitVersion": "v1.31.2-eks-7f9249a"}


@pytest.fixture
async def api_server() -> AsyncIterator[tuple[str, list[str]]]:
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.path)
        if len(seen) == 1:  # throttled once: the client's retries apply to /version too
            return web.json_response({"kind": "Status", "code": 429}, status=429,
                                     headers={"Retry-After": "0"})
        return web.json_response(EKS)

    app = web.Application()
    app.router.add_get("/version", version)
    async with serving(app) as url:
        yield url, seen


async def test_kubeclient_reads_the_servers_version(
    api_server: tuple[str, list[str]],
) -> None:
    url, seen = api_server
    api = k8s_client.ApiClient(k8s_client.Configuration(host=url))
    async with KubeClient(api, timeout=5, owns_api_client=True) as client:
        assert isinstance(client, ReportsServerVersion)
        info = await client.server_version()
    assert info == ServerVersion(major="1", minor="31+", git_version="v1.31.2-eks-7f9249a")
    assert info.major_minor == "1.31"
    assert seen == ["/version", "/version"]


class EmbeddersClient:
    """Not a KubeClient: a client of an embedder's own that knows the version."""

    async def server_version(self) -> ServerVersion:
        return ServerVersion(major="1", minor="30", git_version="v1.30.4")


async def test_an_embedders_client_gives_the_aws_provider_its_version() -> None:
    from karpy_aws._nodeclass_status import kubernetes_minor_version

    client = EmbeddersClient()
    assert isinstance(client, ReportsServerVersion)
    assert await kubernetes_minor_version(client) == "1.30"


async def test_an_embedders_client_gives_the_azure_provider_its_version() -> None:
    from karpy_azure._status import api_server_version

    assert await api_server_version(EmbeddersClient())() == "1.30.4"  # type: ignore[arg-type]


async def test_a_client_without_it_is_named_in_the_error() -> None:
    from karpy_azure._status import api_server_version

    with pytest.raises(TypeError, match=r"server_version.*object"):
        await api_server_version(object())()  # type: ignore[arg-type]
