"""``karpy top``'s model: the cluster's machines as rows grouped by NodePool, with what
they request, what they cost and the totals, as a pure function of the cluster model.

:func:`machine_rows` reads the :class:`~karpy.state.Cluster` (and a
:class:`~karpy.state.cost.PriceBook`) into :class:`NodeRow` values; :func:`build_view`
filters, sorts, groups and totals them into a :class:`TopView`; :func:`render` draws
that as a rich renderable. None of them does I/O, so the whole picture is
unit-tested without a cluster; the command (karpy/cli/top.py) only feeds them from
watches and redraws.

Prices are those of each machine's offering (instance type, zone, capacity type) in
the provider's catalogue; machines karpy does not manage show ``-`` and count for
nothing in the totals. "In flight" are NodeClaims not initialized yet (launching,
registering, initializing); "pending" are pods waiting for capacity (kube-scheduler
marked them Unschedulable), the same pods the provisioner works on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from karpy.apis.conditions import condition_is_true
from karpy.runtime import parse_time
from karpy.scheduling import resources as res
from karpy.state import Cluster, StateNode
from karpy.state.cost import MachineOffering, PriceBook, machine_offering

__all__ = [
    "FILTER_KEYS",
    "FOOTER_LINES",
    "SORT_KEYS",
    "UNMANAGED",
    "Filter",
    "NodeRow",
    "PoolGroup",
    "TopView",
    "bar",
    "build_view",
    "format_age",
    "format_price",
    "machine_rows",
    "next_sort",
    "render",
    "summary_line",
    "view_of",
]

UNMANAGED: Final = "-"
"""The group of nodes no NodePool owns."""

READY: Final = "Ready"
LAUNCHING: Final = "Launching"
REGISTERING: Final = "Registering"
INITIALIZING: Final = "Initializing"
DELETING: Final = "Deleting"
CORDONED: Final = "Cordoned"
NOT_READY: Final = "NotReady"
IN_FLIGHT: Final = frozenset({LAUNCHING, REGISTERING, INITIALIZING})


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One machine: a Node, or a NodeClaim whose Node has not registered yet.

    CPU amounts are millicores, memory bytes (canonical units); ``price`` is $/h, None
    when unknown or unmanaged; ``created`` the Node's (else the NodeClaim's)
    creationTimestamp.
    """

    name: str
    nodepool: str
    instance_type: str
    zone: str
    capacity_type: str
    cpu_requested: int
    cpu_allocatable: int
    memory_requested: int
    memory_allocatable: int
    pods: int
    created: datetime | None
    price: float | None
    status: str

    @property
    def in_flight(self) -> bool:
        """A NodeClaim not initialized yet."""
        return self.status in IN_FLIGHT

    @property
    def cpu_fraction(self) -> float:
        """Requested over allocatable CPU (0 when nothing is allocatable)."""
        return _fraction(self.cpu_requested, self.cpu_allocatable)

    @property
    def memory_fraction(self) -> float:
        """Requested over allocatable memory (0 when nothing is allocatable)."""
        return _fraction(self.memory_requested, self.memory_allocatable)


def _fraction(used: int, total: int) -> float:
    return used / total if total > 0 else 0.0


# -- reading the cluster model -----------------------------------------------------------


def _created(obj: Mapping[str, Any] | None) -> datetime | None:
    text = ((obj or {}).get("metadata") or {}).get("creationTimestamp")
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError:
        return None


def _status(state: StateNode) -> str:
    if state.marked_for_deletion:
        return DELETING
    if state.nodeclaim is not None:
        if not state.launched:
            return LAUNCHING
        if not state.registered or state.node is None:
            return REGISTERING
        if not state.initialized:
            return INITIALIZING
    node = state.node
    if node is not None:
        if not state.schedulable:
            return CORDONED
        if not condition_is_true(node, "Ready"):
            return NOT_READY
    return READY


def _row(state: StateNode, book: PriceBook) -> NodeRow:
    offering = machine_offering(state) if state.managed else MachineOffering("", "", "", "")
    labels = state.labels
    allocatable = state.allocatable
    requests = state.pod_requests
    return NodeRow(
        name=state.name,
        nodepool=state.nodepool or UNMANAGED,
        instance_type=offering.instance_type
        or str(labels.get("node.kubernetes.io/instance-type", "")),
        zone=offering.zone or str(labels.get("topology.kubernetes.io/zone", "")),
        capacity_type=offering.capacity_type,
        cpu_requested=requests.get(res.CPU, 0),
        cpu_allocatable=allocatable.get(res.CPU, 0),
        memory_requested=requests.get(res.MEMORY, 0),
        memory_allocatable=allocatable.get(res.MEMORY, 0),
        pods=len(state.bound),
        created=_created(state.node) or _created(state.nodeclaim),
        price=book.machine_price(state),
        status=_status(state),
    )


def _unlaunched_row(claim: Mapping[str, Any]) -> NodeRow:
    meta = claim.get("metadata") or {}
    labels = meta.get("labels") or {}
    return NodeRow(
        name=str(meta.get("name", "")),
        nodepool=str(labels.get("karpenter.sh/nodepool", "")) or UNMANAGED,
        instance_type="",
        zone="",
        capacity_type="",
        cpu_requested=0,
        cpu_allocatable=0,
        memory_requested=0,
        memory_allocatable=0,
        pods=0,
        created=_created(claim),
        price=None,
        status=DELETING if meta.get("deletionTimestamp") else LAUNCHING,
    )


def machine_rows(cluster: Cluster, book: PriceBook) -> list[NodeRow]:
    """Every machine the cluster model knows, priced from ``book``: launched machines
    (Nodes, NodeClaims) and NodeClaims not launched yet."""
    rows = [_row(state, book) for state in cluster.nodes()]
    rows.extend(_unlaunched_row(claim) for claim in cluster.unlaunched_nodeclaims())
    return rows


# -- filtering and sorting ---------------------------------------------------------------

FILTER_KEYS: Final[Mapping[str, str]] = {
    "nodepool": "nodepool",
    "pool": "nodepool",
    "zone": "zone",
    "capacity-type": "capacity_type",
    "capacity_type": "capacity_type",
    "ct": "capacity_type",
    "instance-type": "instance_type",
    "instance_type": "instance_type",
    "type": "instance_type",
    "status": "status",
}
"""Filter keys (and their aliases) to the row field they match."""
_ANY_FIELDS: Final = ("nodepool", "zone", "capacity_type", "instance_type", "name", "status")


@dataclass(frozen=True, slots=True)
class Filter:
    """Which rows to show: every term must match. A term ``key=value`` matches the
    field exactly (``nodepool``, ``zone``, ``capacity-type``, ``instance-type``,
    ``status``); a bare word matches when it appears in any of them or in the name."""

    terms: tuple[tuple[str, str], ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> Filter:
        """Parse ``"zone=a, spot"`` style input (terms split on commas or spaces);
        raises ValueError naming an unknown key and the known ones."""
        terms: list[tuple[str, str]] = []
        for raw in text.replace(",", " ").split():
            key, sep, value = raw.partition("=")
            if not sep:
                terms.append(("", raw.lower()))
                continue
            fld = FILTER_KEYS.get(key.strip().lower())
            if fld is None:
                known = ", ".join(sorted({k for k in FILTER_KEYS if "_" not in k}))
                raise ValueError(f"filter key {key!r} is not one of: {known}")
            terms.append((fld, value.strip()))
        return cls(tuple(terms), text.strip())

    def matches(self, row: NodeRow) -> bool:
        """Whether ``row`` passes every term."""
        for fld, value in self.terms:
            if fld:
                if str(getattr(row, fld)) != value:
                    return False
            elif not any(value in str(getattr(row, f)).lower() for f in _ANY_FIELDS):
                return False
        return True


def _created_key(row: NodeRow) -> float:
    # Oldest first: an unknown creation time sorts last.
    return row.created.timestamp() if row.created is not None else math.inf


SORT_KEYS: Final = ("name", "price", "cpu", "memory", "pods", "age", "instance-type", "zone")
"""What rows can be sorted by, in the order ``s`` cycles through them. Numbers sort
largest first (the most expensive, busiest, oldest node on top); names A to Z."""

_SORTERS: Final = {
    "name": lambda r: (r.name,),
    "price": lambda r: (-(r.price if r.price is not None else -1.0), r.name),
    "cpu": lambda r: (-r.cpu_fraction, r.name),
    "memory": lambda r: (-r.memory_fraction, r.name),
    "pods": lambda r: (-r.pods, r.name),
    "age": lambda r: (_created_key(r), r.name),
    "instance-type": lambda r: (r.instance_type, r.name),
    "zone": lambda r: (r.zone, r.name),
}


def next_sort(key: str) -> str:
    """The sort key after ``key`` (what pressing ``s`` does)."""
    index = SORT_KEYS.index(key) if key in SORT_KEYS else -1
    return SORT_KEYS[(index + 1) % len(SORT_KEYS)]


# -- the view ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoolGroup:
    """The rows of one NodePool (or of unmanaged nodes, :data:`UNMANAGED`) and their
    subtotal in $/h (machines without a price count 0)."""

    nodepool: str
    rows: tuple[NodeRow, ...]
    price: float


@dataclass(frozen=True, slots=True)
class TopView:
    """What one frame shows: groups of rows, totals over the shown rows, pending pods
    over the whole cluster."""

    groups: tuple[PoolGroup, ...]
    price: float
    machines: int
    in_flight: int
    pending: int
    sort: str = "name"
    filter: Filter = field(default_factory=Filter)


def build_view(
    rows: Iterable[NodeRow], *, pending: int, sort: str = "name", filter: Filter | None = None
) -> TopView:
    """Filter, group by NodePool (pools A to Z, unmanaged nodes last), sort within each
    group by ``sort`` (one of :data:`SORT_KEYS`) and total. Raises ValueError for an
    unknown sort key."""
    sorter = _SORTERS.get(sort)
    if sorter is None:
        raise ValueError(f"sort key {sort!r} is not one of: {', '.join(SORT_KEYS)}")
    chosen = filter or Filter()
    by_pool: dict[str, list[NodeRow]] = {}
    for row in rows:
        if chosen.matches(row):
            by_pool.setdefault(row.nodepool, []).append(row)
    groups = tuple(
        PoolGroup(
            nodepool=pool,
            rows=tuple(sorted(members, key=sorter)),
            price=math.fsum(r.price for r in members if r.price is not None),
        )
        for pool, members in sorted(by_pool.items(), key=lambda kv: (kv[0] == UNMANAGED, kv[0]))
    )
    shown = [r for g in groups for r in g.rows]
    return TopView(
        groups=groups,
        price=math.fsum(g.price for g in groups),
        machines=len(shown),
        in_flight=sum(1 for r in shown if r.in_flight),
        pending=pending,
        sort=sort,
        filter=chosen,
    )


# -- drawing -----------------------------------------------------------------------------

BAR_WIDTH: Final = 10


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """``fraction`` (clamped to 0..1) as a bar of ``width`` cells and a percentage,
    e.g. ``"████░░░░░░  40%"``; more than 100 % (overcommitted) still says so."""
    shown = min(max(fraction, 0.0), 1.0)
    filled = round(shown * width)
    return f"{'█' * filled}{'░' * (width - filled)} {round(fraction * 100):3d}%"


def format_price(price: float | None) -> str:
    """$/h with four decimals (``"-"`` when unknown)."""
    return "-" if price is None else f"${price:.4f}"


def format_age(created: datetime | None, now: datetime) -> str:
    """kubectl's style: ``45s``, ``12m``, ``3h``, ``5d`` (``"-"`` when unknown)."""
    if created is None:
        return "-"
    seconds = max(0, int((now - created).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cpu(amount: int) -> str:
    return f"{amount / 1000:g}"


def _memory(amount: int) -> str:
    return f"{amount / 2**30:.1f}Gi"


def _resource_cell(used: int, total: int, fraction: float, fmt: Any) -> Text:
    style = "red" if fraction > 0.9 else "yellow" if fraction > 0.7 else "green"
    return Text.assemble((bar(fraction), style), f" {fmt(used)}/{fmt(total)}")


def summary_line(view: TopView) -> str:
    """The totals, as the last line of a frame shows them."""
    return (
        f"TOTAL {view.machines} nodes  {format_price(view.price)}/h  "
        f"in flight: {view.in_flight}  pending pods: {view.pending}"
    )


FOOTER_LINES: Final = 6
"""Lines a frame uses besides the table's rows: the column header, the "more" line, a
blank line, the totals, the keys and the prompt or error."""


def render(
    view: TopView, *, now: datetime, prompt: str | None = None, error: str | None = None,
    max_rows: int | None = None,
) -> RenderableType:
    """One frame: a table of nodes grouped by NodePool with subtotals, then the totals
    and the keys. ``prompt`` is the filter being typed; ``error`` a problem to show.

    ``max_rows`` bounds the table's rows (pool headers included; a live view passes
    the screen's height less :data:`FOOTER_LINES`): the rest is counted in one line,
    while headers and totals still cover every node. Laying out a row costs a few
    milliseconds, so a frame of 2,000 nodes drawn in full would take seconds."""
    table = Table(box=None, pad_edge=False, expand=False, header_style="bold")
    for name, justify in (
        ("NODE", "left"), ("TYPE", "left"), ("ZONE", "left"), ("CAPACITY", "left"),
        ("CPU", "left"), ("MEMORY", "left"), ("PODS", "right"), ("AGE", "right"),
        ("$/H", "right"), ("STATUS", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    budget = max_rows if max_rows is not None else math.inf
    hidden = 0
    for group in view.groups:
        if budget < 2:  # a header without a row of its own says nothing
            hidden += len(group.rows)
            continue
        budget -= 1
        title = "unmanaged" if group.nodepool == UNMANAGED else f"nodepool {group.nodepool}"
        table.add_row(
            Text(f"{title}: {len(group.rows)} nodes", style="bold cyan"),
            "", "", "", "", "", "", "",
            Text(format_price(group.price), style="bold cyan"), "",
        )
        for row in group.rows:
            if budget < 1:
                hidden += 1
                continue
            budget -= 1
            table.add_row(
                f"  {row.name}",
                row.instance_type or "-",
                row.zone or "-",
                row.capacity_type or "-",
                _resource_cell(row.cpu_requested, row.cpu_allocatable, row.cpu_fraction, _cpu),
                _resource_cell(row.memory_requested, row.memory_allocatable,
                               row.memory_fraction, _memory),
                str(row.pods),
                format_age(row.created, now),
                format_price(row.price),
                row.status,
            )
    filter_text = view.filter.text or "none"
    footer = Text(summary_line(view), style="bold")
    keys = Text(
        f"sort: {view.sort}  filter: {filter_text}    "
        "s: next sort  /: filter  c: clear filter  q: quit",
        style="dim",
    )
    parts: list[RenderableType] = [table]
    if hidden:
        parts.append(Text(f"… {hidden} more nodes (filter with / or sort with s)",
                          style="dim"))
    parts += [Text(""), footer, keys]
    if prompt is not None:
        parts.append(Text(f"filter> {prompt}", style="reverse"))
    if error:
        parts.append(Text(error, style="bold red"))
    return Group(*parts)


def view_of(
    cluster: Cluster, book: PriceBook, *, sort: str = "name", filter: Filter | None = None
) -> TopView:
    """:func:`build_view` of the cluster model's machines and pending pods."""
    return build_view(
        machine_rows(cluster, book),
        pending=cluster.provisionable_count(),
        sort=sort,
        filter=filter,
    )
