"""A real Prometheus scraping karpy, and every panel query of the dashboards evaluated
through its HTTP API.

:func:`running_prometheus` runs the ``prometheus`` on PATH (Debian's package, which
scripts/setup.sh installs when root) with a scrape job named ``karpenter`` — the job
Karpenter's ServiceMonitor gives its series, which the performance dashboard selects on —
scraping the given targets every second; :class:`Prometheus` is its HTTP API.
:func:`dashboard_queries` reads the panel targets of the chart's dashboard
(charts/karpy/dashboards/karpy.json) and of Karpenter's published ones (kept in
data/karpenter_dashboards_v1_14.json with their commit), and :func:`empty_panels` says
which of them draw nothing over the time Prometheus ran, with the dashboards' variables
substituted as Grafana substitutes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from dashboards import DASHBOARDS
from harness import stop_process

__all__ = ["EMPTY_IN_KARPENTER_TOO", "PROMETHEUS", "Prometheus", "Query", "dashboard_queries",
           "empty_panels", "empty_panels_of", "running_prometheus", "serving",
           "unexplained"]

PROMETHEUS = shutil.which("prometheus")
CHART_DASHBOARD = Path(__file__).resolve().parents[2] / "charts/karpy/dashboards/karpy.json"
JOB = "karpenter"

#: What Grafana puts for ``$__rate_interval`` here: max(4 x the scrape interval,
#: $__interval + the scrape interval); 1m is what a 15 s scrape gives, and with the
#: 1 s scrape here holds enough samples for every rate().
RATE_INTERVAL = "1m"

_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}|\[\[(\w+)\]\]")
_LABEL_VALUES = re.compile(r"label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*$")


@dataclass(frozen=True)
class Variable:
    """A dashboard variable: a ``query`` one lists ``label_values(series, label)``, a
    ``custom`` one its options; ``current`` is the selection the JSON saves
    (``$__all`` for All)."""

    name: str
    kind: str
    query: str
    current: tuple[str, ...]


@dataclass(frozen=True)
class Query:
    """One panel target of one dashboard."""

    dashboard: str
    panel: str
    expr: str
    variables: tuple[Variable, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.dashboard} / {self.panel}: {' '.join(self.expr.split())}"


def _chart_dashboard() -> list[Query]:
    board = json.loads(CHART_DASHBOARD.read_text())
    variables = []
    for v in board.get("templating", {}).get("list", []):
        if v["type"] == "datasource":
            continue
        query = v.get("query")
        current = (v.get("current") or {}).get("value", "$__all" if v.get("includeAll") else "")
        variables.append(Variable(
            v["name"], v["type"], query["query"] if isinstance(query, dict) else str(query or ""),
            tuple(current) if isinstance(current, list) else (current,)))
    return [Query(board["title"], panel["title"], target["expr"], tuple(variables))
            for panel in _panels(board.get("panels", []))
            for target in panel.get("targets", []) if target.get("expr")]


def _panels(panels: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _karpenter_dashboards() -> list[Query]:
    boards = json.loads(DASHBOARDS.read_text())["queries"]
    out = []
    for name, board in boards.items():
        variables = tuple(Variable(v["name"], v["type"], v.get("query", ""), tuple(v["current"]))
                          for v in board["variables"])
        out += [Query(name, t["panel"], t["expr"], variables) for t in board["targets"]]
    return out


def dashboard_queries() -> list[Query]:
    """Every panel target of the chart's dashboard and of Karpenter's published ones."""
    return _chart_dashboard() + _karpenter_dashboards()


#: Panel targets that Karpenter's own series leave empty too, by dashboard and a part of
#: the query, with the reason.
EMPTY_IN_KARPENTER_TOO = {
    ("karpenter-capacity-dashboard", "node_time_seconds"):
        "node-exporter's series (a node's uptime), not Karpenter's: no node-exporter on kwok nodes",
    # Prometheus interpolates quantile 0 inside the lowest bucket as 0 of its count: NaN
    # unless some reconcile in the window was faster than that bucket's bound (5 ms),
    # whatever the controller; its other quantiles (0.5 to 1) read the same series.
    ("karpenter-performance-dashboard", "histogram_quantile(0, "):
        "quantile 0 is NaN while the lowest bucket (5 ms) is empty, for Karpenter too",
}


def unexplained(problems: Iterable[str]) -> list[str]:
    """``problems`` of :func:`empty_panels` less those :data:`EMPTY_IN_KARPENTER_TOO` lists."""
    return [p for p in problems
            if not any(p.startswith(f"{board} /") and part in p
                       for board, part in EMPTY_IN_KARPENTER_TOO)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """The HTTP API of a running Prometheus (see :func:`running_prometheus`)."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self._session = session
        self.started = time.time()

    async def _get(self, path: str, **params: str) -> Any:
        async with self._session.get(f"{self.url}{path}", params=params) as response:
            body = await response.json()
        if body.get("status") != "success":
            raise AssertionError(f"Prometheus refused {path} {params}: {body}")
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one element) ``expr`` evaluates to now."""
        data = await self._get("/api/v1/query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    async def query_range(self, expr: str) -> list[dict[str, Any]]:
        """``expr`` over the whole time this Prometheus ran, a point a second, as a
        Grafana panel over that time range asks for it: each series's ``values``."""
        data = await self._get("/api/v1/query_range", query=expr, start=f"{self.started:.3f}",
                               end=f"{time.time():.3f}", step="1s")
        if data["resultType"] == "scalar":
            return [{"metric": {}, "values": [data["result"]]}]
        return list(data["result"])

    async def label_values(self, series: str, label: str) -> list[str]:
        """What Grafana's ``label_values(series, label)`` lists."""
        found = await self._get("/api/v1/series", **{"match[]": series})
        return sorted({s[label] for s in found if label in s})

    async def _scraped(self) -> float:
        """How many scrapes the least-scraped target has had (0 before the first)."""
        up = await self.query(f'count_over_time(up{{job="{JOB}"}}[1h])')
        return min((float(r["value"][1]) for r in up), default=0.0)

    async def scrapes(self, count: int, *, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Return once every target has been scraped ``count`` more times from now and
        the last scrape of each was up."""
        wanted = await self._scraped() + count
        async with asyncio.timeout(timeout):
            while True:
                healthy = await self.query(f'min(up{{job="{JOB}"}})')
                if await self._scraped() >= wanted and healthy \
                        and float(healthy[0]["value"][1]) == 1.0:
                    return
                await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def running_prometheus(targets: Sequence[str]) -> AsyncIterator[Prometheus]:
    """A Prometheus scraping ``targets`` (host:port of /metrics) every second as job
    ``karpenter``, its data in a temporary directory, until the block exits."""
    if PROMETHEUS is None:
        raise RuntimeError("prometheus is not installed (scripts/setup.sh installs it as root)")
    with tempfile.TemporaryDirectory(prefix="karpy-prometheus-") as where:
        config = Path(where) / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": list(targets)}]}],
        }))
        port = _free_port()
        proc = await asyncio.create_subprocess_exec(
            PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={where}/data",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            async with aiohttp.ClientSession() as session:
                url = f"http://127.0.0.1:{port}"
                async with asyncio.timeout(60.0):
                    while True:
                        if proc.returncode is not None:
                            assert proc.stderr is not None
                            said = (await proc.stderr.read()).decode()
                            raise RuntimeError(f"prometheus exited: {said}")
                        with contextlib.suppress(aiohttp.ClientError):
                            async with session.get(f"{url}/-/ready") as response:
                                if response.status == 200:
                                    break
                        await asyncio.sleep(0.2)
                yield Prometheus(url, session)
        finally:
            await stop_process(proc)


@contextlib.asynccontextmanager
async def serving(text: str) -> AsyncIterator[str]:
    """``host:port`` of a /metrics that answers ``text``, until the block exits."""
    app = web.Application()

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/plain")

    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def empty_panels_of(text: str) -> list[str]:
    """:func:`empty_panels` for a Prometheus that scraped ``text`` (a /metrics body) three
    times."""
    async with serving(text) as target, running_prometheus([target]) as prom:
        await prom.scrapes(3)
        return await empty_panels(prom, dashboard_queries())


def _regex_escaped(value: str) -> str:
    """``value`` as Grafana's Prometheus data source puts a variable's value into a
    regex matcher: a backslash before each regex metacharacter, doubled for the PromQL
    string (a ``-`` is left as it is: PromQL refuses ``\\-``)."""
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", value.replace("\\", "\\" * 4))


def _substituted(query: Query, listed: dict[str, list[str]]) -> str:
    """``query.expr`` with its variables replaced as Grafana replaces them: All becomes
    the regex of every value the variable lists (``listed``), ``(a|b)``; a chosen value
    itself."""
    values: dict[str, str] = {"__rate_interval": RATE_INTERVAL}
    for v in query.variables:
        if v.current == ("$__all",):
            values[v.name] = "(" + "|".join(_regex_escaped(x) for x in listed.get(v.name, [])) + ")"
        else:
            values[v.name] = "|".join(v.current)

    def replace(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return values.get(name, m.group(0))

    return _VARIABLE.sub(replace, query.expr)


def _has_data(result: list[dict[str, Any]]) -> bool:
    """Something Grafana draws: a point whose value is a number (NaN draws nothing)."""
    return any(not math.isnan(float(value)) for r in result for _, value in r["values"])


async def empty_panels(prom: Prometheus, queries: Iterable[Query]) -> list[str]:
    """Each query (variables substituted) that has no point in the time Prometheus ran,
    as ``"<dashboard> / <panel>: <expr>"``; also each query variable that lists nothing.
    Each dashboard's variables are listed once, as Grafana lists them on load."""
    problems = []
    listed: dict[str, dict[str, list[str]]] = {}  # dashboard -> variable -> its values
    for query in queries:
        if query.dashboard not in listed:
            listed[query.dashboard] = {}
            for v in query.variables:
                if v.kind != "query":
                    continue
                m = _LABEL_VALUES.match(v.query)
                values = await prom.label_values(m.group(1), m.group(2)) if m else []
                listed[query.dashboard][v.name] = values
                if not values:
                    problems.append(
                        f"{query.dashboard}: variable ${v.name} ({v.query}) lists nothing")
        expr = _substituted(query, listed[query.dashboard])
        if not _has_data(await prom.query_range(expr)):
            problems.append(str(query))
    return problems
