"""Which loggers ``--log-level`` reaches: karpy's and the installed providers'
packages, not the SDKs' (those stay at ``--sdk-log-level``, warn by default)."""

from __future__ import annotations

import io
import logging

from karpy.cli._logs import configure_command_logging, karpy_loggers

SDKS = ("botocore", "aiobotocore", "boto3", "azure", "urllib3", "aiohttp",
        "kubernetes_asyncio")  # fmt: skip


def test_the_providers_packages_are_karpys_loggers() -> None:
    assert {"karpy", "karpy_aws", "karpy_azure"} <= set(karpy_loggers())


def test_the_nodeclaim_lifecycle_lines_are_logged_at_info() -> None:
    """Provisioning and the lifecycle log under Karpenter's logger name "controller"
    ("created nodeclaim", "launched nodeclaim", ...): LOG_LEVEL=info must show them."""
    stream = io.StringIO()
    configure_command_logging("info", stream=stream)
    logging.getLogger("controller").info("created nodeclaim")
    assert '"message":"created nodeclaim"' in stream.getvalue().replace(": ", ":")


def _logged(level: str, sdk_level: str | None = None) -> str:
    stream = io.StringIO()
    configure_command_logging(level, sdk_level=sdk_level, stream=stream)
    for name in (*karpy_loggers(), *SDKS):
        logging.getLogger(f"{name}.module").debug("debug from %s", name)
        logging.getLogger(f"{name}.module").warning("warning from %s", name)
    return stream.getvalue()


def test_debug_reaches_karpy_and_the_providers_not_the_sdks() -> None:
    log = _logged("debug")
    for name in karpy_loggers():
        assert f"debug from {name}\"" in log
    for name in SDKS:
        assert f"debug from {name}\"" not in log
        assert f"warning from {name}\"" in log


def test_the_sdks_log_at_debug_only_when_asked() -> None:
    log = _logged("info", sdk_level="debug")
    assert 'debug from botocore"' in log
    assert 'debug from karpy"' not in log


def test_a_quieter_level_quiets_the_sdks_too() -> None:
    log = _logged("error")
    assert 'warning from botocore"' not in log
    assert 'warning from karpy"' not in log
