"""Facts of the container cluster and small helpers shared by the testinfra tests."""
from __future__ import annotations

import functools
import ipaddress
import json
import os
import ssl
from datetime import datetime, timezone
from pathlib import Path

import testinfra
import yaml

from settings import REPO, setting

# What the tests run on the nodes (docker exec -i ... python -): Ray drivers.
FILES = REPO / "molecule" / "shared" / "files"


def _platforms() -> list[dict]:
    """The running scenario's nodes and their addresses: its molecule.yml platforms (merged with the
    base configuration), their one home; the base configuration's, the sandbox's, when no scenario
    runs."""
    molecule_file = os.environ.get("MOLECULE_FILE")
    if molecule_file and Path(molecule_file).is_file():
        return yaml.safe_load(Path(molecule_file).read_text())["platforms"]
    return yaml.safe_load((REPO / ".config/molecule/config.yml").read_text())["platforms"]


PLATFORMS = _platforms()
NODES = [p["name"] for p in PLATFORMS]  # in the platforms' order: spark1, the head, first
# What the running scenario's container names start with (dgx_spark_test_prefix of
# molecule/shared/vars/cluster.yml). Molecule sets the variable; the sandbox needs
# MOLECULE_SCENARIO_NAME=sandbox, as tools/sandbox sets it.
PREFIX = f"dgx-spark-vllm-test-{os.environ.get('MOLECULE_SCENARIO_NAME', 'sandbox')}"
FABRIC = {p["name"]: p["fabric_address"] for p in PLATFORMS}
HEAD_MANAGEMENT = next(p["management_address"] for p in PLATFORMS if "management_address" in p)
HEAD = next(p["name"] for p in PLATFORMS if "management_address" in p)
FABRIC_NETWORK = ipaddress.ip_network(f"{FABRIC[HEAD]}/24", strict=False)
MANAGEMENT_NETWORK = ipaddress.ip_network(f"{HEAD_MANAGEMENT}/24", strict=False)


def on_management(host_number: int) -> str:
    """The address with this host number on the management network (registry .50, Hub .51, ...)."""
    return str(MANAGEMENT_NETWORK[host_number])


def on_fabric(host_number: int) -> str:
    """The address with this host number on the fabric."""
    return str(FABRIC_NETWORK[host_number])


# Each node's Ray unit and container (ray executor).
UNITS = {name: "ray-head" if name == HEAD else "ray-worker" for name in NODES}


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


def json_line(output: str):
    """The JSON a script printed: its last line that starts with '{' or '[' (Ray may log a warning
    after it, as it did on a loaded machine)."""
    return json.loads(next(line for line in reversed(output.strip().splitlines())
                           if line.startswith(("{", "["))))


def run_on_head(host, script: str, *args: str):
    """Run a Python script inside the head's Ray container (a driver on the cluster)."""
    return host.run("docker exec -i ray-head python - " + " ".join(args) + " <<'PYEOF'\n" + script + "\nPYEOF")


API_PORT: int = setting("dgx_spark_api_port")
# vLLM's own API on each group head's fabric address (behind the endpoint).
ENGINE_PORT: int = setting("dgx_spark_engine_api_port")
RAY_PORT: int = setting("dgx_spark_ray_port")
# The endpoint (nginx on the head, HTTPS): the one door a client on the LAN has.
API = f"https://{HEAD_MANAGEMENT}:{API_PORT}"
# The certificate the endpoint serves: the one roles/endpoint generates on the head's first deploy
# (the scenarios give none).
ENDPOINT_CERTIFICATE = "/etc/dgx-spark-vllm/tls/vllm-serve-endpoint.generated.crt"
MODEL: str = setting("vllm_serve_served_model_name")
HF_TOKEN: str = setting("model_hf_token")
API_KEY: str = setting("vllm_serve_api_key")
# vllm_serve's node rank: the head 0, then the workers in inventory (the platforms') order.
RANK = {name: rank for rank, name in enumerate(NODES)}


def serve_args(host) -> tuple[list[str], dict[str, str]]:
    """The serving container's arguments, and each --flag's value."""
    args = json.loads(host.check_output("docker inspect --format '{{json .Args}}' vllm-serve"))
    return args, {flag: args[i + 1] for i, flag in enumerate(args[:-1]) if flag.startswith("--")}


def node_host(name: str):
    """A testinfra host for one node container of the running scenario."""
    return testinfra.get_host(f"docker://{PREFIX}-{name}")


@functools.cache
def endpoint_certificate() -> str:
    """The PEM of the endpoint's certificate, read from the head (kept across deploys: read once)."""
    pem = node_host(HEAD).file(ENDPOINT_CERTIFICATE).content_string
    assert "BEGIN CERTIFICATE" in pem, f"no certificate at {ENDPOINT_CERTIFICATE} on {HEAD}"
    return pem


def endpoint_tls() -> ssl.SSLContext:
    """A client's TLS context that trusts exactly the endpoint's certificate, and checks that it
    names the address connected to (the generated one names every address of the head)."""
    return ssl.create_default_context(cadata=endpoint_certificate())


def journal_since(name: str, units: list[str], since: int, pattern: str = "", lines: int = 60) -> str:
    """A node's journal of these units since `since` (int(time.time()): the nodes share this machine's
    clock), the lines matching `pattern` (grep -E) if one is given, for a failed test's message. A node
    that is down gives the error instead (testinfra's run does not raise)."""
    selected = f" | grep -E '{pattern}' | grep -v '  File '" if pattern else ""
    units_args = " ".join(f"-u {unit}" for unit in units)
    result = node_host(name).run(f"journalctl {units_args} --since @{since} -o short-precise --no-pager"
                                 f"{selected} | cut -c8-230 | tail -n {lines}")
    return f"--- {name}: {', '.join(units)}\n{result.stdout}{result.stderr}"


def serving_stopping_at(name: str) -> float:
    """When the node's serving unit last left the active state (Unix time: the nodes share this
    machine's clock): a restart's start."""
    text = node_host(name).check_output(
        "systemctl show --property=ActiveExitTimestamp --value --timestamp=us+utc vllm-serve")
    return datetime.strptime(text, "%a %Y-%m-%d %H:%M:%S.%f UTC").replace(tzinfo=timezone.utc).timestamp()


def serving_marks_since(name: str, since: int) -> dict[str, float]:
    """When the node's serving unit first began to stop, stopped, began to start and (the head) had
    its API answering since `since` (Unix times from the node's journal: the nodes share this
    machine's clock). A mark the journal does not have since then is missing from the result."""
    patterns = {"stopping": "systemd[1]: Stopping vllm-serve.service",
                "stopped": "systemd[1]: Stopped vllm-serve.service",
                "starting": "systemd[1]: Starting vllm-serve.service",
                "ready": "Application startup complete."}
    lines = node_host(name).check_output(f"journalctl -u vllm-serve --since @{since} -o short-unix --no-pager")
    marks: dict[str, float] = {}
    for line in lines.splitlines():
        for mark, pattern in patterns.items():
            # The start and readiness that follow the stop, not those of a start before it.
            if pattern in line and mark not in marks and (mark in ("stopping", "stopped") or "stopped" in marks):
                marks[mark] = float(line.split(" ", 1)[0])
    return marks


def serving_starts_since(name: str, since: int) -> int:
    """Starts of the node's serving unit since `since` (int(time.time()): the nodes share this
    machine's clock). Counted in the journal since then, never negative: a difference of two
    totals went negative across a reboot (the node's journal starts afresh), under any bound."""
    return int(node_host(name).check_output(f"journalctl -u vllm-serve --since @{since} -o cat --no-pager "
                                            "| grep -c '^Started vllm-serve' || true"))
