"""Role monitoring's Prometheus configuration, rendered by Ansible's own templating from the role's
template, defaults and vars (and the base role's) for a 2-node cluster and for 4 nodes in two
replicas, and checked by promtool (tools/ensure-promtool; a test that cannot get it fails):
what the scrape jobs of issue 28's contract are (job vllm: each group head's engine, labels node
and group; job node: every node's exporter, label node), the rules it loads, and remote_write
passed through. Its units listen where the contract says: Prometheus on 127.0.0.1 only, each
exporter on its node's fabric address only.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "monitoring"
FABRIC = {"spark1": "192.168.200.12", "spark2": "192.168.200.13",
          "spark3": "192.168.200.14", "spark4": "192.168.200.15"}
REPLICAS = [{"name": "a", "head": "spark1", "nodes": ["spark1", "spark2"]},
            {"name": "b", "head": "spark3", "nodes": ["spark3", "spark4"]}]
ENGINE_PORT = 8001  # dgx_spark_engine_api_port's default
EXPORTER_PORT = 9100  # dgx_spark_node_exporter_port's default
REMOTE_WRITE = [{"url": "https://metrics.example.org/api/v1/write",
                 "basic_auth": {"username": "spark", "password": "s3cret-remote-write"}}]


@pytest.fixture(scope="module")
def promtool() -> str:
    """A promtool: tools/ensure-promtool finds or unpacks one, and this fails when it cannot."""
    found = subprocess.run([str(REPO / "tools" / "ensure-promtool")], capture_output=True, text=True,
                           check=False)
    assert found.returncode == 0, f"tools/ensure-promtool found no promtool:\n{found.stderr}"
    return found.stdout.strip().splitlines()[-1]


def role_variables(nodes: list[str], overrides: dict[str, Any]) -> dict[str, Any]:
    """What the role's templates see on the head: the base role's and this role's defaults and
    vars as Ansible loads them (templates stay templates), the inventory, and the overrides."""
    from ansible.parsing.dataloader import DataLoader

    loader = DataLoader()
    variables: dict[str, Any] = {}
    for path in ("roles/dgx_spark/defaults/main.yml", "roles/dgx_spark/vars/main.yml",
                 "roles/monitoring/defaults/main.yml", "roles/monitoring/vars/main.yml"):
        variables.update(loader.load_from_file(str(REPO / path), trusted_as_template=True))
    variables.update(
        groups={"all": nodes, "sparks": nodes, "spark_head": nodes[:1], "spark_workers": nodes[1:]},
        hostvars={name: {"dgx_spark_fabric_address": FABRIC[name]} for name in nodes},
        inventory_hostname=nodes[0],
        dgx_spark_fabric_address=FABRIC[nodes[0]],
        ansible_managed="Ansible managed")
    variables.update(overrides)
    return variables


def render(template: str, nodes: list[str], **overrides: Any) -> str:
    """One of the role's templates, rendered by Ansible's Templar."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables=role_variables(nodes, overrides))
    return templar.template(trust_as_template((ROLE / "templates" / template).read_text()))


def check_config(promtool: str, tmp_path: Path, nodes: list[str], **overrides: Any) -> dict[str, Any]:
    """The configuration rendered with the role's rules in a folder of tmp_path (where the role
    installs them on the head), checked by promtool, parsed."""
    rules = tmp_path / "rules"
    rules.mkdir()
    shutil.copy(ROLE / "files" / "dgx-spark-vllm.rules.yml", rules)
    config = tmp_path / "prometheus.yml"
    config.write_text(render("prometheus.yml.j2", nodes, __monitoring_rules_dir=str(rules), **overrides))
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True,
                             check=False)
    assert checked.returncode == 0, f"promtool check config:\n{checked.stdout}{checked.stderr}\n{config.read_text()}"
    assert "dgx-spark-vllm.rules.yml" in checked.stdout + checked.stderr  # it checked the rules too
    return yaml.safe_load(config.read_text())


def targets(config: dict[str, Any], job: str) -> list[tuple[str, dict[str, str]]]:
    """Each target of a job with its labels."""
    scrape = next(s for s in config["scrape_configs"] if s["job_name"] == job)
    return [(target, group.get("labels", {})) for group in scrape["static_configs"] for target in group["targets"]]


def test_two_nodes_scrape_the_head_engine_as_group_main_and_both_exporters(promtool: str, tmp_path: Path) -> None:
    config = check_config(promtool, tmp_path, ["spark1", "spark2"])
    assert targets(config, "vllm") == [(f"192.168.200.12:{ENGINE_PORT}", {"node": "spark1", "group": "main"})]
    assert targets(config, "node") == [(f"192.168.200.12:{EXPORTER_PORT}", {"node": "spark1"}),
                                       (f"192.168.200.13:{EXPORTER_PORT}", {"node": "spark2"})]
    assert config["global"]["scrape_interval"] == config["global"]["evaluation_interval"] == "10s"
    assert config["rule_files"] == [str(tmp_path / "rules" / "*.yml")]
    assert "remote_write" not in config


def test_replicas_scrape_each_replica_head_engine_and_every_exporter(promtool: str, tmp_path: Path) -> None:
    nodes = ["spark1", "spark2", "spark3", "spark4"]
    config = check_config(promtool, tmp_path, nodes, dgx_spark_replicas=REPLICAS,
                          dgx_spark_executor="mp", monitoring_scrape_interval="15s")
    assert targets(config, "vllm") == [(f"192.168.200.12:{ENGINE_PORT}", {"node": "spark1", "group": "a"}),
                                       (f"192.168.200.14:{ENGINE_PORT}", {"node": "spark3", "group": "b"})]
    assert targets(config, "node") == [(f"{FABRIC[name]}:{EXPORTER_PORT}", {"node": name}) for name in nodes]
    assert config["global"]["scrape_interval"] == config["global"]["scrape_timeout"] == "15s"


def test_remote_write_entries_pass_through(promtool: str, tmp_path: Path) -> None:
    config = check_config(promtool, tmp_path, ["spark1", "spark2"], monitoring_remote_write=REMOTE_WRITE)
    assert config["remote_write"] == REMOTE_WRITE


def test_promtool_refuses_a_configuration_it_cannot_run(promtool: str, tmp_path: Path) -> None:
    """The control for the checks above: a remote_write without its url does not pass (the role's
    validate step would keep such a file from replacing the running one)."""
    with pytest.raises(AssertionError, match="promtool check config"):
        check_config(promtool, tmp_path, ["spark1", "spark2"], monitoring_remote_write=[{"name": "no-url"}])


def exec_start(unit: str) -> list[str]:
    """The unit's ExecStart= command line, its continuation lines joined, split into words."""
    lines = unit.replace("\\\n", " ").splitlines()
    return next(line for line in lines if line.startswith("ExecStart=")).split("=", 1)[1].split()


def test_prometheus_listens_on_loopback_only() -> None:
    unit = render("prometheus.service.j2", ["spark1", "spark2"])
    assert "--web.listen-address=127.0.0.1:9090" in exec_start(unit)
    assert "--config.file=/etc/dgx-spark-vllm/prometheus/prometheus.yml" in exec_start(unit)
    assert "User=prometheus" in unit.splitlines()


def test_each_exporter_listens_on_its_fabric_address_only() -> None:
    unit = render("node-exporter.service.j2", ["spark1", "spark2"], inventory_hostname="spark2",
                  dgx_spark_fabric_address=FABRIC["spark2"])
    words = exec_start(unit)
    assert f"--web.listen-address={FABRIC['spark2']}:{EXPORTER_PORT}" in words
    assert "--collector.textfile.directory=/var/lib/dgx-spark-vllm/metrics" in words
    assert "User=prometheus" in unit.splitlines()
