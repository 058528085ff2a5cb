"""The monitoring's alert rules (roles/monitoring/files/dgx-spark-vllm.rules.yml): Prometheus
accepts them (``promtool check rules``), they fire and stay quiet as their rule tests say
(``promtool test rules tests/promtool/*.yml``), every alert of issue 28's contract is there and
tested both ways, and each names its severity, a summary and its runbook section of
docs/monitoring.md.

promtool comes from tools/ensure-promtool; a machine that cannot get it fails these tests (the
rules would otherwise ship unchecked).
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.promql_names import RULES

REPO = Path(__file__).resolve().parents[2]
RULE_TESTS = sorted((REPO / "tests" / "promtool").glob("*.yml"))
DOCS = REPO / "docs" / "monitoring.md"
# The alerts issue 28 names (status.yml lists the firing ones by these names).
CONTRACT_ALERTS = {
    "DgxSparkServingDown", "DgxSparkEngineRestarting", "DgxSparkStartLimitHit", "DgxSparkGuardStale",
    "DgxSparkKvCacheHigh", "DgxSparkRequestsWaitingGrowing", "DgxSparkMemoryLow", "DgxSparkMemoryPressure",
    "DgxSparkFabricDown", "DgxSparkFabricMtuChanged", "DgxSparkFabricGateFailed", "DgxSparkFirewallTableMissing",
    "DgxSparkTargetDown"}
SEVERITIES = {"critical", "warning"}


@pytest.fixture(scope="module")
def promtool() -> str:
    """The path of a promtool; fails (never skips) when there is none to be had."""
    result = subprocess.run([str(REPO / "tools" / "ensure-promtool")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"tools/ensure-promtool found no promtool:\n{result.stderr}"
    return result.stdout.strip().splitlines()[-1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False, cwd=REPO)


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_prometheus_accepts_the_rules(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rules_fire_and_stay_quiet_as_their_tests_say(promtool: str) -> None:
    assert RULE_TESTS, "no rule tests in tests/promtool"
    result = run(promtool, "test", "rules", *map(str, RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_of_the_contract_is_there_once() -> None:
    names = [rule["alert"] for rule in alerts()]
    assert sorted(names) == sorted(CONTRACT_ALERTS)


def rule_test_cases() -> list[dict[str, Any]]:
    return [case for path in RULE_TESTS for test in yaml.safe_load(path.read_text())["tests"]
            for case in test.get("alert_rule_test", [])]


@pytest.mark.parametrize("alert", sorted(CONTRACT_ALERTS))
def test_every_alert_is_tested_firing_and_not_firing(alert: str) -> None:
    cases = [case for case in rule_test_cases() if case["alertname"] == alert]
    assert any(case.get("exp_alerts") for case in cases), f"{alert}: no rule test where it fires"
    assert any(not case.get("exp_alerts") for case in cases), f"{alert}: no rule test where it stays quiet"


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: rule["alert"])
def test_an_alert_names_its_severity_summary_and_runbook(rule: dict[str, Any]) -> None:
    alert = rule["alert"]
    assert rule.get("labels", {}).get("severity") in SEVERITIES, f"{alert}: severity not one of {sorted(SEVERITIES)}"
    summary = rule.get("annotations", {}).get("summary", "")
    assert "$labels.node" in summary or "$labels.group" in summary, f"{alert}: its summary names no node or group"
    assert rule["annotations"].get("runbook") == f"docs/monitoring.md#{alert.lower()}", \
        f"{alert}: its runbook is not docs/monitoring.md#{alert.lower()}"


def test_every_runbook_has_its_section() -> None:
    """GitHub's anchor of the heading ``### DgxSparkServingDown`` is ``dgxsparkservingdown``."""
    headings = {line.lstrip("#").strip() for line in DOCS.read_text().splitlines() if line.startswith("### ")}
    missing = sorted(rule["alert"] for rule in alerts() if rule["alert"] not in headings)
    assert missing == [], f"docs/monitoring.md has no section (### <alert>) for: {missing}"
