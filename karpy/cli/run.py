"""`karpy run`: the autoscaler.

Configuration errors end the command before it connects to anything: exit status 2 and
one line on stderr naming the setting (flag and environment variable) and the fix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

_DESCRIPTION = (
    "Run karpy's controllers against the cluster with the chosen provider. Every flag "
    "falls back to its environment variable (Karpenter's names), so the chart configures "
    "karpy through the environment alone."
)


class _HelpWithProviders(argparse.Action):
    """``-h``: the flags, then each installed provider's settings.

    The providers are imported only here, so other commands do not pay for it.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show this help message and exit")  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        parser.epilog = providers_epilog()
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.print_help()
        parser.exit()


def providers_epilog() -> str:
    """The installed providers' settings as ``karpy run --help`` shows them."""
    from karpy.cloudprovider.registry import installed_providers, provider_settings

    lines = []
    for name in installed_providers():
        try:
            declared = provider_settings(name)
        except Exception as exc:  # a broken plugin must not break --help
            lines.append(f"provider {name}: cannot list its settings ({exc})")
            continue
        if not declared:
            continue
        lines.append(f"provider {name} (--provider-setting KEY=VALUE, else the variable):")
        for s in declared:
            default = "required" if s.required else f"default {s.default or '(none)'}"
            env = s.env or "-"
            lines.append(f"  {s.key:<26} {env:<28} {default}; {s.help}")
        lines.append("")
    return "\n".join(lines).rstrip()


def settings_markdown() -> str:
    """The settings table of docs/install.md: karpy's settings (the same table as
    ``--help``), then each installed provider's. tests/cli checks the page holds it."""
    from karpy.cloudprovider.registry import installed_providers, provider_settings
    from karpy.options import SETTINGS

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    out = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default else ""
        out.append(f"| `{s.flag}` | `{s.env}` | {cell(default)} | {cell(s.help)} |")
    for name in installed_providers():
        declared = provider_settings(name)
        if not declared:
            continue
        out += [
            "",
            f"Provider `{name}` (`--provider-setting KEY=VALUE`, else the variable):",
            "",
            "| key | environment | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        for ps in declared:
            default = "*required*" if ps.required else (f"`{ps.default}`" if ps.default else "")
            out.append(f"| `{ps.key}` | `{ps.env}` | {default} | {cell(ps.help)} |")
    return "\n".join(out) + "\n"


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from karpy.options import add_run_arguments

    cmd = commands.add_parser(
        "run",
        help="run the autoscaler (controllers + the chosen cloud provider)",
        description=_DESCRIPTION,
        add_help=False,
    )
    cmd.add_argument("-h", "--help", action=_HelpWithProviders)
    add_run_arguments(cmd)
    cmd.set_defaults(func=_run_operator)


def _fail(message: str, status: int = 2) -> int:
    print(f"karpy run: {message}", file=sys.stderr)
    return status


def _run_operator(args: argparse.Namespace) -> int:
    import os

    from karpy.cloudprovider.errors import UnknownProviderError
    from karpy.cloudprovider.registry import ProviderSettingsError, check_provider_settings
    from karpy.options import ConfigError, options_from_args

    try:
        options = options_from_args(args)
        check_provider_settings(
            options.cloud_provider,
            settings=options.provider_settings,
            cluster_name=options.settings.cluster_name,
            environ=os.environ,
        )
    except (ConfigError, ProviderSettingsError, UnknownProviderError) as err:
        return _fail(str(err))

    from karpy.cli._logpaths import LogPathError
    from karpy.cli._logs import configure_command_logging
    from karpy.operator import run_operator
    from karpy.runtime import run
    from karpy.runtime.errors import LeaderElectionLost, TransportError

    try:
        configure_command_logging(
            options.log_level,
            sdk_level=options.sdk_log_level,
            output_paths=options.log_output_paths,
            error_output_paths=options.log_error_output_paths,
        )
    except LogPathError as err:
        return _fail(str(err))
    try:
        run(run_operator(options))
    except LeaderElectionLost as err:
        # Another replica may be leading already: stop at once, as controller-runtime
        # does; the restart campaigns for the lease again.
        return _fail(f"leader election lost: {err}", 1)
    except TransportError as err:
        # No cluster to talk to (no kubeconfig, not in a pod, or the server refused the
        # credentials at start): one line, not a traceback.
        return _fail(f"{err}; pass --kubeconfig (env KUBECONFIG) or run in a pod", 1)
    return 0
