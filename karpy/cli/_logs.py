"""Which loggers a karpy command's ``--log-level`` applies to.

The level applies to karpy's own loggers and to those of the installed providers'
packages (``karpy_aws``, ``karpy_azure``, a plugin's); every other logger — botocore,
aiobotocore, boto3, azure, urllib3, aiohttp, kubernetes_asyncio — stays at WARNING
unless asked otherwise (``karpy run --sdk-log-level``), because at debug the cloud SDKs
log each request's parameters: launch template user data, the access key id.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TextIO

from karpy.cli._logpaths import DEFAULT_PATHS, PathsHandler, open_paths
from karpy.cloudprovider.registry import installed_providers
from karpy.runtime import configure_logging

__all__ = ["configure_command_logging", "karpy_loggers"]


# The NodeClaim lifecycle and provisioning controllers log under Karpenter's logger name,
# "controller", so their lines read as Karpenter's do ("created nodeclaim", ...).
_KARPENTER_LOGGERS = frozenset({"controller"})


def karpy_loggers() -> list[str]:
    """``karpy``, the loggers karpy names as Karpenter does (``controller``) and the
    top-level package of every installed provider, sorted."""
    packages = {target.split(":")[0].split(".")[0] for target in installed_providers().values()}
    return sorted(packages | {"karpy"} | _KARPENTER_LOGGERS)


def _level(name: str) -> int:
    value = logging.getLevelName({"warn": "WARNING"}.get(name.lower(), name.upper()))
    return value if isinstance(value, int) else logging.WARNING


def configure_command_logging(
    level: str,
    *,
    sdk_level: str | None = None,
    stream: TextIO | None = None,
    output_paths: Sequence[str] = DEFAULT_PATHS,
    error_output_paths: Sequence[str] = DEFAULT_PATHS,
) -> None:
    """JSON logs (to ``stream``, default stderr) with ``level`` for karpy's loggers;
    ``sdk_level`` (default: WARNING, or ``level`` if that is higher) for every other.

    ``output_paths`` / ``error_output_paths`` other than stderr (``karpy run``'s
    LOG_OUTPUT_PATHS / LOG_ERROR_OUTPUT_PATHS, :mod:`karpy.cli._logpaths`) send the lines
    there instead; a path that cannot be opened raises LogPathError."""
    mine = _level(level)
    others = _level(sdk_level) if sdk_level is not None else max(mine, logging.WARNING)
    configure_logging(mine, stream=stream, loggers=karpy_loggers(), others=others)
    if tuple(output_paths) == DEFAULT_PATHS and tuple(error_output_paths) == DEFAULT_PATHS:
        return
    handler = PathsHandler(
        open_paths(output_paths, env="LOG_OUTPUT_PATHS"),
        open_paths(error_output_paths, env="LOG_ERROR_OUTPUT_PATHS"),
    )
    root = logging.getLogger()
    # the same JSON lines, only elsewhere
    handler.setFormatter(root.handlers[0].formatter)
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
