"""``PREFERENCE_POLICY`` and ``MIN_VALUES_POLICY`` (Karpenter's names, flags and defaults)
from ``karpy run``'s command line and environment to the provisioner's SchedulerOptions."""

from __future__ import annotations

import argparse

import pytest

from karpy.controllers.settings import Settings
from karpy.options import ConfigError, add_run_arguments, options_from_args


def settings(*flags: str, env: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(list(flags)), env or {}).settings


def test_defaults_are_karpenters() -> None:
    s = settings()
    assert (s.preference_policy, s.min_values_policy) == ("Respect", "Strict")


def test_environment_and_flags() -> None:
    s = settings(env={"PREFERENCE_POLICY": "Ignore", "MIN_VALUES_POLICY": "BestEffort"})
    assert (s.preference_policy, s.min_values_policy) == ("Ignore", "BestEffort")
    s = settings("--min-values-policy", "Strict", env={"MIN_VALUES_POLICY": "BestEffort"})
    assert s.min_values_policy == "Strict"
    assert settings("--preference-policy", "Ignore").preference_policy == "Ignore"


@pytest.mark.parametrize(
    ("env", "named"),
    [({"PREFERENCE_POLICY": "ignore"}, "PREFERENCE_POLICY"),
     ({"MIN_VALUES_POLICY": "Lenient"}, "MIN_VALUES_POLICY")],
)
def test_a_bad_value_names_the_setting_and_the_choices(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as err:
        settings(env=env)
    assert "is not one of" in str(err.value)
