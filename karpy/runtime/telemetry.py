"""What the runtime emits, for code that wires it up itself: the metrics registry
behind ``/metrics`` and the JSON log formatter.

:class:`Metrics` is the per-manager OpenTelemetry/Prometheus registry
(``Manager(metrics=...)``; add instruments with ``metrics.meter("name")``);
:class:`QueueMetrics` is what a :class:`~karpy.runtime.WorkQueue` reports to;
:class:`JsonFormatter` is the Karpenter-shaped JSON formatter that
:func:`~karpy.runtime.configure_logging` installs.
"""

from ._logging import JsonFormatter
from ._metrics import Metrics
from ._workqueue import QueueMetrics

__all__ = ["JsonFormatter", "Metrics", "QueueMetrics"]
