"""``karpy simulate``: a dry run of provisioning and consolidation on a live cluster or
a snapshot, optionally with changed NodePools ("what if"), from the controllers' own
code (:mod:`karpy.tools.view`), never writing.

:func:`run_simulation` opens the view(s) and returns the :class:`Report`;
:func:`render` prints it as tables, ``Report.to_json()`` is the ``-o json`` document.
"""

from karpy.tools.simulate._render import render
from karpy.tools.simulate._report import SCHEMA_VERSION, Difference, Report, compare
from karpy.tools.simulate._rows import (
    CandidateRow,
    ClaimRow,
    CommandRow,
    LowerBound,
    NodePoolRow,
    PendingRow,
)
from karpy.tools.simulate._run import SimulateOptions, load_live, run_simulation
from karpy.tools.simulate._simulate import claim_row, simulate

__all__ = [
    "SCHEMA_VERSION",
    "CandidateRow",
    "ClaimRow",
    "CommandRow",
    "Difference",
    "LowerBound",
    "NodePoolRow",
    "PendingRow",
    "Report",
    "SimulateOptions",
    "claim_row",
    "compare",
    "load_live",
    "render",
    "run_simulation",
    "simulate",
]
