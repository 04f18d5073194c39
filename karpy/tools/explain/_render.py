"""The explanations as text for a terminal: the answer first, then each NodePool or
disruption method with its reasons, indented."""

from __future__ import annotations

from karpy.tools.explain._node import NodeExplanation
from karpy.tools.explain._pod import PodExplanation

__all__ = ["render_node", "render_pod"]


def render_pod(answer: PodExplanation) -> str:
    """``karpy explain pod``'s text output."""
    lines = [answer.summary]
    for reason in answer.reasons:
        lines.append(f"  [{reason.code}] {reason.message}")
    if answer.event:
        lines.append(f"  event: FailedScheduling: {answer.event}")
    if answer.nodepools:
        lines.append("NodePools:")
    for verdict in answer.nodepools:
        if verdict.fits:
            types = ", ".join(verdict.instance_types[:5])
            more = len(verdict.instance_types) - 5
            if more > 0:
                types += f" and {more} other(s)"
            price = f", ${verdict.price:.4f}/h" if verdict.price is not None else ""
            if verdict.priced_by:
                price += f" priced by NodeOverlay {verdict.priced_by}"
            lines.append(f"  {verdict.nodepool}: can host it ({types}{price})")
            continue
        lines.append(f"  {verdict.nodepool}: cannot host it")
        for reason in verdict.reasons:
            lines.append(f"    [{reason.code}] {reason.message}")
        if verdict.scheduler and all(r.message != verdict.scheduler for r in verdict.reasons):
            lines.append(f"    scheduler: {verdict.scheduler}")
    return "\n".join(lines) + "\n"


def render_node(answer: NodeExplanation) -> str:
    """``karpy explain node``'s text output."""
    lines = [answer.summary]
    if not answer.found:
        return lines[0] + "\n"
    facts = [f"nodeclaim={answer.nodeclaim or '-'}", f"nodepool={answer.nodepool or '-'}",
             f"instance-type={answer.instance_type or '-'}", f"zone={answer.zone or '-'}",
             f"capacity-type={answer.capacity_type or '-'}"]
    if answer.price is not None:
        facts.append(f"price=${answer.price:.4f}/h")
    lines.append("  " + " ".join(facts))
    if answer.blockers:
        lines.append("Blocked:")
        lines += [f"  [{r.code}] {r.message}" for r in answer.blockers]
    if answer.methods:
        lines.append("Methods:")
    for verdict in answer.methods:
        head = "candidate" if verdict.candidate else "not a candidate"
        lines.append(f"  {verdict.method}: {head}")
        lines += [f"    [{r.code}] {r.message}" for r in verdict.reasons]
        if verdict.action.get("description"):
            lines.append(f"    -> {verdict.action['description']}")
    if answer.expiration.get("description"):
        lines.append(f"Expiration: {answer.expiration['description']}")
    return "\n".join(lines) + "\n"
