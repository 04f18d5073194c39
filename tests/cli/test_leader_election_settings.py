"""The leader-election Lease is named and placed as Karpenter v1.15.0 does it
(pkg/operator/options: ``--leader-election-name`` / ``LEADER_ELECTION_NAME`` default
``karpenter-leader-election``, ``--leader-election-namespace`` /
``LEADER_ELECTION_NAMESPACE`` default empty = the system namespace), and nonsense is one
line naming the setting."""

from __future__ import annotations

import argparse

import pytest

from karpy.options import ConfigError, Options, add_run_arguments, options_from_args


def _options(*argv: str, **env: str) -> Options:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(list(argv)), environ=env)


def _lease(options: Options) -> tuple[str, str]:
    return options.leader_election_name, options.leader_election_namespace


def test_karpenters_defaults_put_the_lease_in_the_system_namespace() -> None:
    assert _lease(_options()) == ("karpenter-leader-election", "kube-system")
    assert _lease(_options(SYSTEM_NAMESPACE="karpenter")) == (
        "karpenter-leader-election", "karpenter")
    # Empty, as Karpenter's default: still the system namespace.
    assert _lease(_options(SYSTEM_NAMESPACE="karpenter", LEADER_ELECTION_NAMESPACE="")) == (
        "karpenter-leader-election", "karpenter")


def test_the_environment_and_the_flags_name_and_place_the_lease() -> None:
    env = {"LEADER_ELECTION_NAME": "karpy-lease", "LEADER_ELECTION_NAMESPACE": "ops",
           "SYSTEM_NAMESPACE": "karpenter"}
    assert _lease(_options(**env)) == ("karpy-lease", "ops")
    flags = _options("--leader-election-name", "other.lease", "--leader-election-namespace",
                     "team-a", **env)
    assert _lease(flags) == ("other.lease", "team-a")


@pytest.mark.parametrize(("env", "words"), [
    ({"LEADER_ELECTION_NAME": "Karpenter_Lease"},
     ["LEADER_ELECTION_NAME", "--leader-election-name", "'Karpenter_Lease'", "Lease name"]),
    ({"LEADER_ELECTION_NAMESPACE": "kube.system"},
     ["LEADER_ELECTION_NAMESPACE", "--leader-election-namespace", "namespace"]),
    ({"SYSTEM_NAMESPACE": "-ns"}, ["SYSTEM_NAMESPACE", "--system-namespace"]),
])  # fmt: skip
def test_nonsense_is_one_line_naming_the_setting(env: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        _options(**env)
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)
