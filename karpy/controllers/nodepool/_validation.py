"""``nodepool.validation``: the ``ValidationSucceeded`` condition — what the CRD's schema
cannot check (Karpenter's RuntimeValidate): template labels and requirements may not
use ``karpenter.sh/nodepool`` or a restricted label domain; a budget's schedule must be
cron. A NodePool that does not even parse (a duration the CRD pattern lets through but
Go cannot hold, such as ``99999999h``) is reported the same way, naming the field: the
cluster model ignores such a NodePool, so nothing is provisioned from it and none of
its nodes is disrupted, and its status says why."""

from __future__ import annotations

from karpy.apis import NodePool
from karpy.apis.cron import CronError, parse_cron
from karpy.apis.labels import LABEL_NODEPOOL, restricted_label_reason
from karpy.apis.v1 import CONDITION_VALIDATION_SUCCEEDED
from karpy.cloudprovider import CloudProvider
from karpy.controllers.nodepool._objects import get_managed, parse_nodepool, write_conditions
from karpy.runtime import Client, Clock, Request, Result

__all__ = ["NodePoolValidation", "validation_errors"]


def validation_errors(nodepool: NodePool) -> list[str]:
    """Why the NodePool is invalid (empty when it is valid), in Karpenter's words."""
    problems = []
    for key in sorted(nodepool.spec.template.metadata.labels):
        if key == LABEL_NODEPOOL:
            problems.append(f'invalid key name "{key}" in labels, restricted')
            continue
        reason = restricted_label_reason(key)
        if reason is not None:
            problems.append(f'invalid key name "{key}" in labels, {reason}')
    for requirement in nodepool.spec.template.spec.requirements:
        if requirement.key == LABEL_NODEPOOL:
            problems.append(f'invalid key: "{requirement.key}" in requirements, restricted')
    for i, budget in enumerate(nodepool.spec.disruption.budgets):
        if budget.schedule is None:
            continue
        try:
            parse_cron(budget.schedule)
        except CronError as err:
            problems.append(
                f"spec.disruption.budgets[{i}].schedule: {budget.schedule!r} is not a cron "
                f"schedule ({err}; e.g. '0 9 * * 1-5' or @daily); the budget allows no "
                "disruption"
            )
    return problems


class NodePoolValidation:
    """The ``nodepool.validation`` reconciler (see the module docs)."""

    name = "nodepool.validation"

    def __init__(self, *, client: Client, cloud_provider: CloudProvider, clock: Clock) -> None:
        self._client = client
        self._provider = cloud_provider
        self._clock = clock

    async def reconcile(self, request: Request) -> Result:
        """Set ValidationSucceeded from :func:`validation_errors`."""
        found = await get_managed(self._client, self._provider, request.name)
        if found is None:
            return Result()
        stored, _ = found
        nodepool, problems = parse_nodepool(stored)
        conditions = nodepool.status_conditions(
            now=lambda: self._clock.now().replace(microsecond=0)
        )
        if not problems:
            problems = validation_errors(nodepool)
        if problems:
            conditions.set_false(
                CONDITION_VALIDATION_SUCCEEDED, "NodePoolValidationFailed", "; ".join(problems)
            )
        else:
            conditions.set_true(CONDITION_VALIDATION_SUCCEEDED)
        return await write_conditions(self._client, stored, nodepool)
