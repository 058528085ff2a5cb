"""The serving units, guard settings and balancer of four Sparks as two replicas of tensor
parallel 2, rendered with what the preflight published (the four-node inventory of
test_preflight_four_nodes, recorded facts).

- Each group is its own launch: --nnodes 2, rank 0 on its head then its other node, its head's
  fabric address as --master-addr, --headless on the other node; each group head's API on its own
  fabric address and dgx_spark_engine_api_port, with the key file; the workers' guards follow
  their own group head's epoch.
- The endpoint (nginx, on spark1 only) sends to both replica heads' fabric APIs, never holds the
  key, listens on dgx_spark_api_port over TLS, and passes only /v1/ and /health.
- Without replicas the same endpoint stands in front of the head's own engine, which listens on its
  fabric address and the engine port too (never on dgx_spark_api_port).
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from support.ansible_run import REPO, flat_output
from support.example_inventory import FABRIC, NEW_WORKERS, VAULT, facts_of, run_locally

REPLICAS = [{"name": "a", "head": "spark1", "nodes": ["spark1", "spark2"]},
            {"name": "b", "head": "spark3", "nodes": ["spark3", "spark4"]}]
ROLE_FILES = ["roles/dgx_spark/defaults/main.yml", "roles/dgx_spark/vars/main.yml",
              "roles/docker_image/defaults/main.yml", "roles/vllm_serve/defaults/main.yml",
              "roles/vllm_serve/vars/main.yml", "roles/model/defaults/main.yml", "roles/model/vars/main.yml",
              "roles/endpoint/defaults/main.yml", "roles/endpoint/vars/main.yml",
              "roles/serving_guard/defaults/main.yml", "roles/serving_guard/vars/main.yml"]
RENDER = """\
- name: Preflight
  ansible.builtin.import_playbook: {preflight}

- name: Render serving with what the preflight published
  hosts: sparks
  gather_facts: false
  vars_files: {vars_files}
  vars:
    # What vllm_serve gives role serving_guard (its helper did not change: nothing was installed).
    __serving_guard_engine: "{{{{ __vllm_serve_guard_engine }}}}"
    __vllm_serve_helper_result: {{changed: false}}
  tasks:
    - name: Learn where the model is (role model)
      ansible.builtin.include_tasks: {model_path}
    - name: Render the serving unit
      ansible.builtin.template:
        src: {serve}
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}-serve.service"
        mode: "0644"
    - name: Write the guard's settings
      ansible.builtin.copy:
        content: "{{{{ __serving_guard_config | to_json }}}}"
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}-guard.json"
        mode: "0644"
    - name: Write the serving environment
      ansible.builtin.copy:
        content: "{{{{ __vllm_serve_env | to_json }}}}"
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}-env.json"
        mode: "0644"
    - name: Render the balancer
      ansible.builtin.template:
        src: "{{{{ item.src }}}}"
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}-{{{{ item.name }}}}"
        mode: "0644"
      loop: {balancer}
      when: dgx_spark_is_head
"""


def render(tmp: Path, extra: dict[str, Any]) -> dict[str, str]:
    """Run the preflight on the four-node inventory, then render the role files for every node.
    Returns file name -> text."""
    out = tmp / "out"
    out.mkdir(parents=True)
    hosts = ["spark1", "spark2", *NEW_WORKERS]
    listing = {"all": {"children": {"sparks": {"children": {
        "spark_workers": {"hosts": {host: {} for host in NEW_WORKERS}}}}}}}
    templates = REPO / "roles/vllm_serve/templates"
    playbook = tmp / "render.yml"
    playbook.write_text(RENDER.format(
        preflight=REPO / "playbooks/preflight.yml", model_path=REPO / "roles/model/tasks/path.yml",
        vars_files=json.dumps([str(REPO / f) for f in ROLE_FILES]),
        serve=templates / "vllm-serve.service.j2",
        balancer=json.dumps([{"name": "endpoint.service", "src": str(REPO / "roles/endpoint/templates/endpoint.service.j2")},
                             {"name": "endpoint.nginx.conf",
                              "src": str(REPO / "roles/endpoint/templates/endpoint.nginx.conf.j2")}])))
    proc = run_locally(tmp, playbook, {host: facts_of(host) for host in hosts},
                       host_vars={host: {"ansible_host_ib": FABRIC[host]} for host in NEW_WORKERS}, hosts=listing,
                       extra={"out": str(out), **extra})
    assert proc.returncode == 0, flat_output(proc)[-3000:]
    return {path.name: path.read_text() for path in out.iterdir()}


def exec_start(unit: str) -> list[str]:
    joined = unit.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("replicas"),
                  {"dgx_spark_executor": "mp", "vllm_serve_tensor_parallel_size": 2, "dgx_spark_replicas": REPLICAS})


@pytest.mark.parametrize("host, rank, head", [("spark1", 0, "spark1"), ("spark2", 1, "spark1"),
                                              ("spark3", 0, "spark3"), ("spark4", 1, "spark3")])
def test_each_group_is_its_own_launch(replicas: dict[str, str], host: str, rank: int, head: str) -> None:
    argv = exec_start(replicas[f"{host}-serve.service"])
    assert option(argv, "--nnodes") == "2", argv
    assert option(argv, "--node-rank") == str(rank), argv
    assert option(argv, "--master-addr") == FABRIC[head], argv
    assert option(argv, "--tensor-parallel-size") == "2", argv
    assert ("--headless" in argv) == (rank != 0), argv
    env = json.loads(replicas[f"{host}-env.json"])
    assert (env["MASTER_ADDR"], env["VLLM_HOST_IP"]) == (FABRIC[head], FABRIC[host]), env


@pytest.mark.parametrize("host", ["spark1", "spark3"])
def test_each_group_head_serves_its_api_on_its_fabric_address_with_the_key(replicas: dict[str, str],
                                                                           host: str) -> None:
    argv = exec_start(replicas[f"{host}-serve.service"])
    assert option(argv, "--host") == FABRIC[host] and option(argv, "--port") == "8001", argv
    assert any(arg.endswith(":/run/secrets/dgx-spark-vllm.env:ro") for arg in argv), argv
    guard = json.loads(replicas[f"{host}-guard.json"])
    assert guard["role"] == "head" and guard["api_url"] == f"http://{FABRIC[host]}:8001"
    assert guard["metrics_dir"] == "/var/lib/dgx-spark-vllm/metrics"  # its textfile for the node exporter
    assert guard["epoch_bind"] == FABRIC[host]


@pytest.mark.parametrize("host, head", [("spark2", "spark1"), ("spark4", "spark3")])
def test_workers_follow_their_own_group_head(replicas: dict[str, str], host: str, head: str) -> None:
    argv = exec_start(replicas[f"{host}-serve.service"])
    assert "--host" not in argv and not any("secrets" in arg for arg in argv), argv
    guard = json.loads(replicas[f"{host}-guard.json"])
    assert guard == {**guard, "role": "worker", "epoch_url": f"http://{FABRIC[head]}:29596/epoch"}


def test_the_balancer_is_on_the_cluster_head_only(replicas: dict[str, str]) -> None:
    endpoint_files = {name for name in replicas if "endpoint" in name}
    assert endpoint_files == {"spark1-endpoint.service", "spark1-endpoint.nginx.conf"}


def test_the_balancer_sends_to_both_replica_heads_on_the_fabric(replicas: dict[str, str]) -> None:
    conf = replicas["spark1-endpoint.nginx.conf"]
    servers = [line.split()[1] for line in conf.splitlines() if line.strip().startswith("server ") and line.strip().endswith(";")]
    assert servers == [f"{FABRIC['spark1']}:8001", f"{FABRIC['spark3']}:8001"], conf
    for needle in ["least_conn;", "max_fails=1 fail_timeout=10s", "listen 8000 ssl;", "proxy_buffering off;",
                   "proxy_read_timeout 3600s;", "proxy_next_upstream error timeout http_502 http_503 http_504"]:
        assert needle in conf, needle
    assert conf.startswith("#")


def test_no_key_in_the_balancer(replicas: dict[str, str]) -> None:
    key = VAULT["vault_vllm_serve_api_key"]
    for name, text in replicas.items():
        assert key not in text, name


def test_the_balancer_unit_runs_nginx_on_its_own_configuration(replicas: dict[str, str]) -> None:
    unit = replicas["spark1-endpoint.service"]
    assert "ExecStart=/usr/sbin/nginx -c /etc/dgx-spark-vllm/vllm-serve-endpoint.nginx.conf" in unit
    assert "ExecReload=/bin/kill -HUP $MAINPID" in unit


def locations(conf: str) -> dict[str, str]:
    """Each `location` of the configuration -> its body (up to the closing brace of its level)."""
    found: dict[str, str] = {}
    lines = conf.splitlines()
    for i, line in enumerate(lines):
        words = line.strip().rstrip("{").split()
        if words[:1] == ["location"]:
            depth, body = 0, []
            for inner in lines[i:]:
                depth += inner.count("{") - inner.count("}")
                body.append(inner.strip())
                if depth == 0:
                    break
            found[" ".join(words[1:])] = "\n".join(body)
    return found


@pytest.mark.parametrize("layout", ["replicas", "single"])
def test_the_endpoint_passes_only_v1_and_health_and_answers_404_itself_otherwise(
        replicas: dict[str, str], single: dict[str, str], layout: str) -> None:
    conf = (replicas if layout == "replicas" else single)["spark1-endpoint.nginx.conf"]
    found = locations(conf)
    assert set(found) == {"/v1/", "= /health", "/", "@engines_unavailable"}, found
    unavailable = found["@engines_unavailable"]
    assert "return 503 " in unavailable and "add_header Retry-After 5 always;" in unavailable, unavailable
    assert "proxy_pass" not in unavailable
    assert "proxy_pass http://vllm_engines/v1/;" in found["/v1/"]
    assert "proxy_pass http://vllm_engines/health;" in found["= /health"]
    assert "proxy_intercept_errors on;" in found["= /health"]
    assert "return 404;" in found["/"] and "proxy_pass" not in found["/"]
    assert "ssl_certificate /etc/dgx-spark-vllm/tls/vllm-serve-endpoint.generated.crt;" in conf
    assert "ssl_certificate_key /etc/dgx-spark-vllm/tls/vllm-serve-endpoint.generated.key;" in conf


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("single"), {"dgx_spark_executor": "mp", "vllm_serve_tensor_parallel_size": 4})


def test_without_replicas_the_head_engine_listens_on_its_fabric_address_behind_the_endpoint(
        single: dict[str, str]) -> None:
    argv = exec_start(single["spark1-serve.service"])
    assert option(argv, "--host") == FABRIC["spark1"] and option(argv, "--port") == "8001", argv
    conf = single["spark1-endpoint.nginx.conf"]
    servers = [line.split()[1] for line in conf.splitlines() if line.strip().startswith("server ") and line.strip().endswith(";")]
    assert servers == [f"{FABRIC['spark1']}:8001"], conf
    assert "listen 8000 ssl;" in conf
    assert {name for name in single if "endpoint" in name} == {"spark1-endpoint.service", "spark1-endpoint.nginx.conf"}


def test_plain_http_only_when_asked(tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = {"dgx_spark_executor": "mp", "vllm_serve_tensor_parallel_size": 4, "endpoint_tls": False,
                "dgx_spark_api_host": "::"}
    conf = render(tmp_path_factory.mktemp("plain"), settings)["spark1-endpoint.nginx.conf"]
    assert "listen [::]:8000 ipv6only=off;" in conf and "ssl" not in conf, conf


def test_several_models_each_get_an_upstream_of_their_head_and_a_route(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    models = [{"name": "big", "model": "org/big", "nodes": ["spark1", "spark2"], "tensor_parallel_size": 2,
               "gpu_memory_utilization": 0.6, "api_port": 8001, "master_port": 29501, "guard_port": 29601},
              {"name": "small", "model": "org/small", "nodes": ["spark4", "spark3"], "gpu_memory_utilization": 0.3,
               "api_port": 8002, "tensor_parallel_size": 2, "master_port": 29502, "guard_port": 29602}]
    conf = render(tmp_path_factory.mktemp("models"), {"dgx_spark_executor": "mp", "dgx_spark_models": models,
                                                      "vllm_serve_tensor_parallel_size": 4})["spark1-endpoint.nginx.conf"]
    assert "load_module /usr/lib/nginx/modules/ngx_http_js_module.so;" in conf
    assert """js_var $endpoint_routes '{"big": 0, "small": 1}';""" in conf, conf
    upstreams = {block.split("{", 1)[0].strip(): block for block in conf.split("upstream ")[1:]}
    assert f"server {FABRIC['spark1']}:8001 " in upstreams["model_0"]
    assert f"server {FABRIC['spark4']}:8002 " in upstreams["model_1"]
    assert "vllm_engines" not in conf
