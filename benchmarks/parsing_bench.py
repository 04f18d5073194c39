"""Benchmark of the worst inputs to karpy's quantity and duration parsers (not a test).

Run:  .venv/bin/python benchmarks/parsing_bench.py [--repeat 2000]

Each input is parsed ``--repeat`` times with the parsers' caches bypassed; the median
and the 99th percentile of single parses are printed (the maximum on a shared machine
measures the scheduler, not the parser). The bound that matters is that no parse,
whatever the text, holds the event loop (issue 24: ``cpu: "1e30000000"`` once took
39 s). docs/performance.md keeps the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable

from karpy.apis import quantity
from karpy.apis.duration import go_duration_nanoseconds

QUANTITIES = [
    "1e30000000",  # saturates
    "-1e-9223372036854775807",  # rounds up to one nano unit
    "1e9223372036854775808",  # refused: the exponent does not fit int64
    "0." + "0" * 60 + "1",  # the longest accepted text, tiny
    "9" * 19 + "." + "9" * 9 + "Ei",  # the largest binary amount: computed, then capped
    "1" * 65,  # refused: too long
    "0." + "0" * 10_000_000 + "1",  # 10 MB of text: refused on its length
    "1500m",  # an ordinary one
]
DURATIONS = [
    "2562047h47m16.854775807s",  # the longest Go duration
    "99999999h",  # refused: beyond Go's limit
    "0." + "0" * 120 + "1s",  # the longest text read: Go reads it as 0
    "1h" * 64,  # many groups (128 characters)
    "1h" * 500_000,  # a megabyte: refused on its length
    "720h",  # an ordinary one
]


def slowest(parse: Callable[[str], object], text: str, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.suppress(ValueError):
            parse(text)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    uncached = quantity._parse_text.__wrapped__
    for name, parse, inputs in (("quantity", uncached, QUANTITIES),
                                ("duration", go_duration_nanoseconds, DURATIONS)):
        for text in inputs:
            median, worst = slowest(parse, text, args.repeat)
            shown = text if len(text) <= 32 else f"{text[:24]}... ({len(text)} chars)"
            print(f"{name:9} {shown:42} median {median * 1e6:7.1f} µs  p99 {worst * 1e6:7.1f} µs")


if __name__ == "__main__":
    main()
