"""``KUBE_CLIENT_QPS``/``KUBE_CLIENT_BURST`` (Karpenter's names and defaults, 200/300)
reach the options karpy's client is built from; nonsense is one line naming them."""

from __future__ import annotations

import argparse

import pytest

from karpy.options import ConfigError, add_run_arguments, options_from_args


def _options(*argv: str, **env: str) -> object:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(list(argv)), environ=env)


def test_karpenters_defaults() -> None:
    options = _options()
    assert (options.kube_client_qps, options.kube_client_burst) == (200.0, 300)  # type: ignore[attr-defined]


def test_the_environment_and_the_flags_set_them() -> None:
    options = _options(KUBE_CLIENT_QPS="50", KUBE_CLIENT_BURST="75")
    assert (options.kube_client_qps, options.kube_client_burst) == (50.0, 75)  # type: ignore[attr-defined]
    options = _options("--kube-client-qps", "7.5", "--kube-client-burst", "9")
    assert (options.kube_client_qps, options.kube_client_burst) == (7.5, 9)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("env", "words"), [
    ({"KUBE_CLIENT_QPS": "fast"}, ["KUBE_CLIENT_QPS", "--kube-client-qps", "'fast'"]),
    ({"KUBE_CLIENT_QPS": "0"}, ["KUBE_CLIENT_QPS", "> 0"]),
    ({"KUBE_CLIENT_QPS": "inf"}, ["KUBE_CLIENT_QPS", "'inf'"]),
    ({"KUBE_CLIENT_BURST": "-3"}, ["KUBE_CLIENT_BURST", "--kube-client-burst", ">= 1"]),
    ({"SDK_LOG_LEVEL": "chatty"}, ["SDK_LOG_LEVEL", "--sdk-log-level"]),
])  # fmt: skip
def test_nonsense_is_one_line_naming_the_setting(env: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        _options(**env)
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)
