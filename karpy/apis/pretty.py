"""Names as Karpenter's ``pkg/utils/pretty`` prints them in metric labels.

``to_snake_case`` is ``pretty.ToSnakeCase``: the condition label of
karpenter_nodeclaims_unhealthy_disrupted_total is written through it, so a dashboard reads
the same values from karpy as from Karpenter, acronyms included (``NodeOOM`` ->
``node_oom``, ``HTTPServer`` -> ``http_server``), and so is the ``consolidation_policy``
label of karpenter_nodeclaims_disrupted_total (``WhenEmptyOrUnderutilized`` ->
``when_empty_or_underutilized``)."""

from __future__ import annotations

import re
from typing import Final

# Karpenter's two regular expressions, applied in its order: a capital that starts a
# word (followed by lower case), then a capital after a lower-case letter or a digit.
_FIRST_CAP: Final = re.compile(r"(.)([A-Z][a-z]+)")
_ALL_CAP: Final = re.compile(r"([a-z0-9])([A-Z])")


def to_snake_case(name: str) -> str:
    """``KernelDeadlock`` -> ``kernel_deadlock``, as Karpenter's pretty.ToSnakeCase."""
    return _ALL_CAP.sub(r"\1_\2", _FIRST_CAP.sub(r"\1_\2", name)).lower()
