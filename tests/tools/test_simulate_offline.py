"""``karpy simulate`` (and ``karpy explain``) on AWS and AKS snapshots with the provider
offline: the plan is priced from the shipped tables, with the network blocked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from karpy_aws._staticdata import static_data
from karpy_azure._pricing import fallback_prices

from karpy.cli import main

DATA = Path(__file__).parent / "data"


def simulate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["simulate", "-o", "json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    document: dict[str, Any] = json.loads(out.out)
    return document


def the_claim(doc: dict[str, Any]) -> dict[str, Any]:
    assert doc["provisioning"]["pendingPods"] == 3
    (claim,) = doc["provisioning"]["nodeclaims"]
    assert claim["pods"] == 3 and claim["capacityTypes"] == ["on-demand"]
    assert doc["provisioning"]["pending"] == []
    return claim


def test_aws_plan_is_priced_from_the_shipped_tables_offline(
    capsys: pytest.CaptureFixture[str], no_network: list[str]
) -> None:
    doc = simulate_json(capsys, "--snapshot", str(DATA / "aws-offline.yaml"),
                        "--provider-setting", "offline=true",
                        "--provider-setting", "region=us-east-1")  # fmt: skip
    assert doc["provider"] == "aws"
    claim = the_claim(doc)
    offering = claim["cheapestOffering"]
    # the NodePool allows c and m only; zones are the EC2NodeClass's subnets'
    assert offering["instanceType"][0] in "cm"
    assert offering["zone"] in ("us-east-1a", "us-east-1b")
    price = static_data().on_demand_prices["us-east-1"][offering["instanceType"]]
    assert claim["pricePerHour"] == pytest.approx(price, abs=1e-6)
    assert doc["totals"]["afterPerHour"] == pytest.approx(price, abs=1e-6)


def test_aws_offline_from_the_environment(
    capsys: pytest.CaptureFixture[str], no_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KARPY_OFFLINE", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    doc = simulate_json(capsys, "--snapshot", str(DATA / "aws-offline.yaml"))
    assert doc["provider"] == "aws" and the_claim(doc)["pricePerHour"] > 0


def test_azure_plan_is_priced_from_the_shipped_tables_offline(
    capsys: pytest.CaptureFixture[str], no_network: list[str]
) -> None:
    doc = simulate_json(capsys, "--snapshot", str(DATA / "azure-offline.yaml"),
                        "--provider-setting", "offline=true",
                        "--provider-setting", "location=southcentralus")  # fmt: skip
    assert doc["provider"] == "azure"
    claim = the_claim(doc)
    offering = claim["cheapestOffering"]
    assert offering["instanceType"].startswith("Standard_")
    price = fallback_prices("southcentralus").on_demand[offering["instanceType"]]
    assert claim["pricePerHour"] == pytest.approx(price, abs=1e-6)


def test_an_unpriced_region_fails_naming_the_setting(
    capsys: pytest.CaptureFixture[str], no_network: list[str]
) -> None:
    code = main(["simulate", "--snapshot", str(DATA / "aws-offline.yaml"),
                 "--provider-setting", "offline=true", "--provider-setting", "region=eu-west-1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "eu-west-1" in err and "region=" in err and "Traceback" not in err


def test_explain_prices_a_pending_pod_offline(
    capsys: pytest.CaptureFixture[str], no_network: list[str]
) -> None:
    code = main(["explain", "pod", "shop/web-0", "--snapshot", str(DATA / "aws-offline.yaml"),
                 "--provider-setting", "offline=true", "--provider-setting", "region=us-east-1",
                 "-o", "json"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    decision = json.loads(out.out)["decision"]
    assert decision["action"] == "new-nodeclaim"
    cheapest = decision["instanceTypes"][0]
    assert decision["price"] == pytest.approx(
        static_data().on_demand_prices["us-east-1"][cheapest], abs=1e-6)
