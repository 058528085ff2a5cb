"""Facts of the container cluster and small helpers shared by the testinfra tests."""
from __future__ import annotations

import os
from pathlib import Path

import testinfra

FILES = Path(__file__).resolve().parent
REPO = FILES.parents[2]
FABRIC = {"spark1": "198.51.100.11", "spark2": "198.51.100.12"}
HEAD_MANAGEMENT = "198.18.0.11"
UNITS = {"spark1": "ray-head", "spark2": "ray-worker"}


def node(host) -> str:
    return host.backend.get_hostname().rsplit("-", 1)[-1]


def env_file(host, unit: str) -> dict[str, str]:
    content = host.file(f"/etc/dgx-spark-vllm/{unit}.env").content_string
    return dict(line.split("=", 1) for line in content.splitlines() if line and not line.startswith("#"))


def interface_of(host, address: str) -> str:
    for line in host.check_output("ip -o -4 addr show").splitlines():
        fields = line.split()
        if fields[3].split("/")[0] == address:
            return fields[1]
    raise AssertionError(f"{address} is on no interface of {node(host)}")


def run_on_head(host, script: str, *args: str):
    """Run a Python script inside the head's Ray container (a driver on the cluster)."""
    return host.run("docker exec -i ray-head python - " + " ".join(args) + " <<'PYEOF'\n" + script + "\nPYEOF")


API = "http://198.18.0.11:8000"
MODEL = "tiny-llama"
HF_TOKEN = "hf_dgxsparktesttoken0c2b"  # molecule/shared/inventory/group_vars/sparks/cluster.yml
API_KEY = "dgx-spark-test-key-5f1c9a"  # molecule/shared/inventory/group_vars/sparks/cluster.yml


def node_host(name: str):
    """A testinfra host for one node container of the running scenario."""
    scenario = os.environ.get("MOLECULE_SCENARIO_NAME", "default")
    return testinfra.get_host(f"docker://dgx-spark-vllm-test-{scenario}-{name}")
