"""Fixtures for karpy.runtime tests: a fake clock, and a runtime KubeClient on the local cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from karpy.runtime.testing import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """A manually advanced clock (see karpy.runtime.testing.FakeClock)."""
    return FakeClock()


@pytest.fixture
async def rt_client(cluster: object) -> AsyncIterator[object]:
    """A karpy.runtime KubeClient for the local control plane (closed after the test)."""
    from karpy.runtime import KubeClient

    client = await KubeClient.from_kubeconfig(cluster.kubeconfig)  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def compact_etcd(cluster: object) -> Callable[[], int]:
    """A function compacting etcd's history up to its current revision (returned).

    Afterwards a watch from an older resourceVersion (e.g. "1") is answered 410 Gone,
    which is how the informer tests force the relist path. Uses etcd's JSON gateway on
    the client port recorded in the cluster directory's cluster.json.
    """
    import json
    import urllib.request
    from pathlib import Path

    directory = getattr(cluster, "dir", None)
    if directory is None:
        raise RuntimeError("compacting etcd needs the cluster directory: set KARPY_CLUSTER_DIR")
    port = json.loads((Path(directory) / "cluster.json").read_text())["ports"]["etcdClient"]
    base = f"http://127.0.0.1:{port}/v3/kv"

    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            f"{base}/{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, object] = json.loads(response.read())
            return result

    def compact() -> int:
        header = post("range", {"key": "Zm9v"})["header"]
        revision = int(header["revision"])  # type: ignore[index]
        post("compaction", {"revision": str(revision), "physical": True})
        return revision

    return compact
