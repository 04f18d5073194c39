"""``karpy simulate``'s readable output: the :class:`Report` as rich tables.

Every name and reason is escaped: rich reads ``[...]`` as markup, and the provisioner's
reasons list requirement values in brackets."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from karpy.tools.simulate._report import Report, compare
from karpy.tools.simulate._rows import ClaimRow

__all__ = ["render"]


def _money(value: float) -> str:
    return f"${value:,.4f}/h"


def _change(before: float, after: float) -> str:
    delta = after - before
    sign = "+" if delta > 0 else "-" if delta < 0 else "±"
    return f"{sign}${abs(delta):,.4f}/h"


def _types(row: ClaimRow) -> str:
    shown = ", ".join(row.instance_types[:3])
    more = len(row.instance_types) - 3
    return f"{len(row.instance_types)}: {shown}" + (f" +{more}" if more > 0 else "")


def _requests(requests: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in requests.items() if k in ("cpu", "memory"))


def _claims_table(title: str, rows: tuple[ClaimRow, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("nodepool", "instance types", "zone", "capacity", "pods", "requests", "$/h"):
        table.add_column(column, justify="right" if column in ("pods", "$/h") else "left")
    for row in rows:
        capacity = ",".join(row.capacity_types)
        if row.reservations:
            capacity += f" ({', '.join(row.reservations)})"
        table.add_row(escape(row.nodepool), escape(_types(row)), ",".join(row.zones),
                      escape(capacity), str(row.pods), _requests(row.requests),
                      f"{row.price:.4f}" + (f" ({escape(row.priced_by)})" if row.priced_by
                                            else ""))
    return table


def _reservations(report: Report, console: Console) -> None:
    """How much of each capacity reservation the plan uses."""
    for rid, (used, free) in sorted(report.reservations.items()):
        console.print(f"reservation {escape(rid)}: the plan takes {used} of {free} free "
                      f"slot(s)")


def render(report: Report, console: Console) -> None:
    """Print ``report`` as tables (what ``karpy simulate`` shows by default)."""
    header = f"[bold]karpy simulate[/] {escape(report.source)} · provider {report.provider}"
    if report.what_if:
        header += f" · what-if: {escape(', '.join(report.what_if))}"
    console.print(header)
    if report.overlays is not None:
        console.print(f"NodeOverlays applied: {escape(', '.join(report.overlays) or 'none')}")
        for name, why in sorted(report.overlays_not_applied.items()):
            console.print(f"[yellow]NodeOverlay {escape(name)} not applied: {escape(why)}[/]")
    if not report.synced:
        console.print("[yellow]NodeClaims are still launching: karpy would wait for them "
                      "before provisioning.[/]")
    pools = Table(title="NodePools", title_justify="left")
    for column in ("name", "usable", "instance types", "nodes", "$/h now"):
        pools.add_column(column)
    for pool in report.nodepools:
        pools.add_row(escape(pool.name), "yes" if pool.usable else escape(f"no: {pool.reason}"),
                      str(pool.instance_types), str(pool.nodes), f"{pool.price:.4f}")
    console.print(pools)

    claims = len(report.claims)
    console.print(
        f"\n[bold]Provisioning[/]: {report.pending_pods} pod(s) need capacity → "
        f"{claims} new NodeClaim(s), {sum(report.on_existing.values())} pod(s) onto existing "
        f"capacity, {len(report.pending)} stay pending"
    )
    if report.claims:
        console.print(_claims_table("NodeClaims provisioning would create", report.claims))
    _reservations(report, console)
    if report.on_existing:
        console.print("onto existing capacity: " + escape(", ".join(
            f"{node} ({count})" for node, count in sorted(report.on_existing.items()))))
    if report.pending:
        pending = Table(title="Pods that stay pending", title_justify="left")
        pending.add_column("pod")
        pending.add_column("reason", overflow="fold")
        for row in report.pending:
            pending.add_row(escape(row.pod), escape(row.reason))
        console.print(pending)
    bound = report.lower_bound
    if bound is not None:
        above = bound.above_percent
        gap = f", {above:.1f} % above" if above is not None else ""
        console.print(f"plan {_money(bound.plan_price)}, lower bound {_money(bound.price)}{gap}")

    console.print("\n[bold]Disruption[/]: " + (
        f"the next pass would start {len(report.commands)} {report.disruption_method} "
        "command(s)" if report.commands else "nothing to disrupt"))
    for command in report.commands:
        sources = ", ".join(
            f"{c.node} ({c.instance_type} {c.capacity_type} {c.zone}, {c.pods} pod(s), "
            f"{c.price:.4f})" for c in command.candidates)
        console.print(f"  {command.decision} ({command.reason}): {escape(sources)} "
                      f"→ {len(command.replacements)} replacement(s), saves "
                      f"{_money(command.savings)}")
        if command.replacements:
            console.print(_claims_table("    replacements", command.replacements))

    console.print(
        f"\n[bold]Totals[/]: {report.nodes} node(s) now {_money(report.current_price)}; "
        f"+ provisioning {_money(report.plan_price)} - disruption {_money(report.savings)} "
        f"= after {_money(report.after_price)}"
    )
    if report.baseline is not None:
        _render_difference(report, console)


def _render_difference(report: Report, console: Console) -> None:
    assert report.baseline is not None
    diff = compare(report.baseline, report)
    table = Table(title="What-if vs unchanged", title_justify="left")
    for column in ("", "unchanged", "what-if", "change"):
        table.add_column(column, justify="left" if not column else "right")
    for pool, (before, after) in sorted(diff.claims_by_pool.items()):
        price_before, price_after = diff.price_by_pool[pool]
        table.add_row(escape(f"NodeClaims in {pool}"), str(before), str(after),
                      f"{after - before:+d}")
        table.add_row(escape(f"$/h in {pool}"), f"{price_before:.4f}", f"{price_after:.4f}",
                      _change(price_before, price_after))
    table.add_row("pods pending", str(diff.pending[0]), str(diff.pending[1]),
                  f"{diff.pending[1] - diff.pending[0]:+d}")
    for label, (cost_before, cost_after) in (("provisioning $/h", diff.plan_price),
                                             ("disruption savings $/h", diff.savings),
                                             ("after $/h", diff.after_price)):
        table.add_row(label, f"{cost_before:.4f}", f"{cost_after:.4f}",
                      _change(cost_before, cost_after))
    console.print(table)
