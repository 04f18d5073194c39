"""Budget schedules: karpy.apis.cron against robfig/cron v3's standard parser.

tests/apis/data/cron_golden.json is robfig/cron v3.0.1's output (scripts/cron_parity,
a Go program) for the corpus beside it: for each schedule, accepted or refused, and its
next activations after four instants. Every verdict and every activation must agree."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.apis.cron import CronError, parse_cron
from karpy.apis.v1.nodepool import Budget

DATA = Path(__file__).parent / "data"
GOLDEN = json.loads((DATA / "cron_golden.json").read_text())
# The instants of scripts/cron_parity/main.go.
STARTS = [datetime.fromisoformat(s.replace("Z", "+00:00")) for s in (
    "2026-12-02T04:30:15.5Z", "2024-02-28T23:59:59Z", "2027-12-31T23:59:00Z",
    "2025-03-09T01:59:30Z")]  # fmt: skip


def _go_time(value: datetime | None) -> str:
    if value is None:
        return ""  # Go's zero time
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{value.microsecond:06d}".rstrip("0")
    return f"{text}{'.' + frac if frac else ''}Z"


def test_the_corpus_is_large_and_mixed() -> None:
    accepted = sum(v["ok"] for v in GOLDEN)
    assert len(GOLDEN) >= 1500 and 300 < accepted < len(GOLDEN) - 300


def test_every_schedule_is_accepted_or_refused_as_robfig_cron_does() -> None:
    wrong = []
    for verdict in GOLDEN:
        try:
            parse_cron(verdict["schedule"])
            ok = True
        except CronError:
            ok = False
        if ok != verdict["ok"]:
            wrong.append((verdict["schedule"], verdict.get("error")))
    assert not wrong, wrong[:10]


def test_every_accepted_schedule_fires_when_robfig_cron_says() -> None:
    wrong = []
    for verdict in (v for v in GOLDEN if v["ok"]):
        schedule = parse_cron(verdict["schedule"])
        got = [_go_time(schedule.next_after(start)) for start in STARTS]
        if got != verdict["next"]:
            wrong.append((verdict["schedule"], got, verdict["next"]))
    assert not wrong, wrong[:5]


@pytest.mark.parametrize(
    ("schedule", "now", "active"),
    [
        ("0 9 * * mon-fri", datetime(2026, 12, 2, 9, 30, tzinfo=UTC), True),  # a Wednesday
        ("0 9 * * mon-fri", datetime(2026, 12, 5, 10, 0, tzinfo=UTC), False),  # a Saturday
        # Day of month OR day of week when neither is '*': the 1st, or any Friday.
        ("0 0 1 * 5", datetime(2026, 12, 4, 0, 30, tzinfo=UTC), True),
        ("0 0 1 * 5", datetime(2026, 12, 3, 0, 30, tzinfo=UTC), False),
        # Never fires: Karpenter reads Go's zero time as "before now", so always active.
        ("0 0 30 2 *", datetime(2026, 12, 3, 0, 30, tzinfo=UTC), True),
    ],
)
def test_a_budget_is_active_as_karpenter_decides(
    schedule: str, now: datetime, active: bool
) -> None:
    assert Budget(nodes="0", schedule=schedule, duration="1h").is_active(now) is active


def test_a_schedule_karpenter_refuses_blocks_disruption() -> None:
    # "* * * * 7" passes the CRD pattern; robfig refuses it, and Karpenter fails closed.
    budget = Budget(nodes="50%", schedule="* * * * 7", duration="1h")
    with pytest.raises(ValueError, match="above maximum"):
        budget.is_active(datetime(2026, 12, 2, tzinfo=UTC))
    assert budget.allowed_disruptions(datetime(2026, 12, 2, tzinfo=UTC), 10) == 0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=64) | st.lists(
    st.sampled_from(["*", "?", "-", "/", ",", "1", "59", "mon", "\u0130", " ", "\t", "@",
                     "every", "9" * 25]), max_size=20).map("".join))  # fmt: skip
def test_any_text_is_parsed_or_refused_quickly(text: str) -> None:
    started = time.thread_time()
    try:
        schedule = parse_cron(text)
    except CronError as err:
        assert "\n" not in str(err)
    else:
        for start in STARTS:
            schedule.next_after(start)
    assert time.thread_time() - started < 0.1


@pytest.mark.parametrize("schedule", [", * * * *", "* , * * *", "* * , , *", "0 0 30 2 *"])
def test_a_schedule_that_never_fires_is_answered_at_once(schedule: str) -> None:
    # robfig walks five years before giving up; here that must not cost seconds of CPU
    # in every disruption pass.
    started = time.thread_time()
    assert parse_cron(schedule).next_after(STARTS[0]) is None
    assert time.thread_time() - started < 0.1
