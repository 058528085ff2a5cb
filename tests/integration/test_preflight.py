"""playbooks/preflight.yml against the example inventory, with recorded facts.

The inventory is inventories/sparks itself (spark1 head at 10.1.230.180 with
fabric 192.168.200.12, spark2 at 192.168.200.13), overlaid only to run locally
from a fact cache holding setup-module facts of two Sparks. Each bad input must
fail with a message that names the host, the variable and the fix.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.example_inventory import run_preflight
from support.facts import load_facts, set_default


def test_example_inventory_passes(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path)
    assert rc == 0, output
    assert "changed=0" in output and "failed=0" in output


def test_an_image_named_by_a_tag_is_a_warning_once(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"dgx_spark_image": "nvcr.io/nvidia/vllm:25.11-py3"})
    assert rc == 0, output
    assert output.count("WARNING: dgx_spark_image=nvcr.io/nvidia/vllm:25.11-py3 is a tag") == 1, output


@pytest.mark.parametrize("distribute", ["each", "from_head"])
def test_an_image_pinned_by_digest_passes_without_a_warning(tmp_path: Path, distribute: str) -> None:
    pinned = "docker.io/hellohal2064/vllm-qwen3.5-gb10@sha256:" + "3f1c" * 16
    rc, output = run_preflight(tmp_path, extra={"dgx_spark_image": pinned, "docker_image_distribute": distribute})
    assert rc == 0, output
    assert "is a tag, which the registry" not in output, output


def node_port_range() -> str:
    """This machine's net.ipv4.ip_local_port_range as first-last: the nodes of these runs are it."""
    first, last = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return f"{first}-{last}"


def test_without_the_collection_firewall_preflight_wants_the_sites_own_confirmed(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"firewall_enabled": False})
    assert rc != 0, "firewall_enabled false passed without firewall_external_confirmed"
    for needle in ("Host spark1: firewall_enabled is false", "Close TCP ports 6379, 6380",
                   "set firewall_external_confirmed: true in group_vars/sparks",
                   "or set firewall_enabled: true (the default)"):
        assert needle in output, needle


def test_with_the_sites_own_firewall_confirmed_preflight_names_the_ports_to_close(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"firewall_enabled": False, "firewall_external_confirmed": True})
    assert rc == 0, output
    assert "firewall_enabled is false: the collection does not filter. Close TCP ports 6379, 6380" in output
    assert "10002-10199" in output
    assert f"new connections to its ephemeral ports {node_port_range()} (net.ipv4.ip_local_port_range)" in output
    assert ("to everything but loopback and the nodes' fabric addresses 192.168.200.12, 192.168.200.13 "
            "arriving on enp1s0f0np0") in output


def test_a_fabric_on_the_default_route_is_refused(tmp_path: Path) -> None:
    """The two Sparks share only the fabric; spark2's default route goes over it: the fabric is
    then the LAN, which the firewall would trust."""
    facts = {host: load_facts(host) for host in ("spark1", "spark2")}
    set_default(facts["spark2"], "enp1s0f0np0")
    rc, output = run_preflight(tmp_path, facts=facts)
    assert rc != 0, "a fabric on the default route passed"
    for needle in ("Host spark2: the fabric the nodes reach each other on (192.168.200.0/24, 192.168.200.13 on "
                   "enp1s0f0np0) carries this node's default route", "ansible_host_ib in host_vars/spark2.yml"):
        assert needle in output, needle
    assert "Host spark1: the fabric" not in output


def test_ssh_in_the_nodes_ephemeral_range_is_refused(tmp_path: Path) -> None:
    """The range is the node's own sysctl, not a setting."""
    first, last = (int(port) for port in node_port_range().split("-"))
    ssh = (first + last) // 2
    rc, output = run_preflight(tmp_path, host_vars={"spark2": {"ansible_port": ssh}})
    assert rc != 0, "SSH in the ephemeral range passed"
    assert (f"Host spark2: the internal ports {first}-{last} would include SSH ({ssh})" in output
            and f"({first}-{last} is the node's net.ipv4.ip_local_port_range)" in output), output[-3000:]


def test_serving_without_an_api_key_is_an_explicit_choice(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"vault_vllm_serve_api_key": "",
                                                "vllm_serve_allow_no_api_key": True})
    assert rc == 0, output


@pytest.mark.parametrize("address", ["10.1.230.180", "::", "fe80::1:2", ""])
def test_the_endpoint_listens_on_any_ip_address_or_every_address(tmp_path: Path, address: str) -> None:
    rc, output = run_preflight(tmp_path, extra={"dgx_spark_api_host": address})
    assert rc == 0, output[-3000:]


@pytest.mark.parametrize("case, host_vars, extra, hosts, expected", [
    ("head ansible_host_ib on its management address",
     {"spark1": {"ansible_host_ib": "10.1.230.180"}}, None, None,
     ["host 'spark1' sets ansible_host_ib=10.1.230.180", "192.168.200.0/24", "host_vars/spark1.yml"]),
    ("ansible_host_ib on no interface",
     {"spark2": {"ansible_host_ib": "192.168.200.99"}}, None, None,
     ["host 'spark2' sets ansible_host_ib=192.168.200.99", "no interface of spark2 holds that address"]),
    ("ansible_host_ib not an address",
     {"spark2": {"ansible_host_ib": "192.168.200"}}, None, None,
     ["host 'spark2' sets ansible_host_ib='192.168.200', which is not an IPv4 address"]),
    ("two heads", None, None,
     {"all": {"children": {"spark_head": {"hosts": {"spark2": {}}}}}},
     ["group spark_head must hold exactly one host (it has 2: spark1, spark2)", "hosts.yml"]),
    ("tensor x pipeline parallel does not match the GPUs", None,
     {"vllm_serve_tensor_parallel_size": 4}, None,
     ["vllm_serve_tensor_parallel_size (4) x vllm_serve_pipeline_parallel_size (1) must equal the GPUs of the "
      "cluster: 2 nodes x dgx_spark_gpus_per_node 1 = 2"]),
    ("GPUs per node not a number", None, {"dgx_spark_gpus_per_node": "one"}, None,
     ["[spark1]", "argument 'dgx_spark_gpus_per_node' is of type str and we were unable to convert to int"]),
    ("no GPUs per node", None, {"dgx_spark_gpus_per_node": 0}, None,
     ["dgx_spark_gpus_per_node=0 is not a positive whole number", "group_vars/sparks"]),
    ("two cluster settings wrong at once: both named", None,
     {"dgx_spark_gpus_per_node": 0, "dgx_spark_data_dir": "var/lib/models"}, None,
     ["dgx_spark_gpus_per_node=0 is not a positive whole number", "dgx_spark_data_dir=var/lib/models must be an "
      "absolute path"]),
    ("no model", None, {"model_name": ""}, None,
     ["Host spark1: model_name is empty"]),
    ("unknown executor", None, {"dgx_spark_executor": "slurm"}, None,
     ["[spark1]", "value of dgx_spark_executor must be one of: ray, mp, got: slurm"]),
    ("two cluster ports the same", None, {"dgx_spark_master_port": 6379}, None,
     ["The cluster's ports must be distinct TCP ports", "dgx_spark_master_port", "group_vars/sparks"]),
    ("a unit name systemd cannot take", None, {"dgx_spark_serve_unit": "vllm serve; rm -rf /"}, None,
     ["Unit names become systemd units and container names", "dgx_spark_serve_unit", "group_vars/sparks"]),
    ("archive source without an archive", None, {"docker_image_source": "archive"}, None,
     ["docker_image_source=archive needs docker_image_archive"]),
    ("an oldest vLLM that is not a version", None, {"docker_image_vllm_min_version": "latest"}, None,
     ["docker_image_vllm_min_version=latest is not a release number such as 0.18.0", "group_vars/sparks"]),
    ("a model folder the controller does not have", None,
     {"model_download": False, "model_src": "/nonexistent/tiny-llama"}, None,
     ["The model cannot be sent: model_src=/nonexistent/tiny-llama is not a folder on the controller",
      "ansible.posix.synchronize"]),
    ("image name missing", None, {"dgx_spark_image": ""}, None,
     ["dgx_spark_image is not an image name"]),
    ("no API key", None, {"vault_vllm_serve_api_key": ""}, None,
     ["Host spark1: vllm_serve_api_key is empty", "ansible-vault create", "vllm_serve_allow_no_api_key: true"]),
    ("Ray's token on two lines", None, {"dgx_spark_ray_auth_token": "abc def"}, None,
     ["dgx_spark_ray_auth_token printable ASCII without spaces", "openssl rand -hex 32"]),
    ("the API on one of Ray's ports", None, {"dgx_spark_api_port": 10050}, None,
     ["\"dgx_spark_api_port\": 10050", "ports Ray also takes", "10002-10199", "group_vars/sparks"]),
    ("SSH on one of the internal ports", {"spark2": {"ansible_port": 6381}}, None, None,
     ["Host spark2: the internal ports 6381-6381 would include SSH (6381)", "must stay open on the LAN"]),
    ("the fabric gate on the rendezvous port", None, {"dgx_spark_fabric_gate_port": 29501}, None,
     ["The cluster's ports must be distinct TCP ports", "\"dgx_spark_fabric_gate_port\": 29501"]),
    ("nginx configuration in the endpoint's listen address", None,
     {"dgx_spark_api_host": "127.0.0.1; location /x { alias /; autoindex on; } #"}, None,
     ["Host spark1: dgx_spark_api_host=\"127.0.0.1; location /x", "is not an IP address", "group_vars/sparks"]),
    ("the engine on the endpoint's port", None, {"dgx_spark_engine_api_port": 8000}, None,
     ["The cluster's ports must be distinct TCP ports", "\"dgx_spark_engine_api_port\": 8000"]),
    ("a TLS certificate without its key", None, {"endpoint_tls_certificate": "/etc/hostname"}, None,
     ["Host spark1: endpoint_tls_certificate and endpoint_tls_private_key go together"]),
    ("a TLS certificate the controller does not have", None,
     {"endpoint_tls_certificate": "/nonexistent/front.crt", "endpoint_tls_private_key": "/nonexistent/front.key"},
     None, ["Host spark1: endpoint_tls_certificate=/nonexistent/front.crt is not a file on the controller"]),
    ("a fabric gate action it does not know", None, {"ib_network_bandwidth_action": "ignore"}, None,
     ["the fabric gate wants ib_network_bandwidth_action fail or warn (it is ignore)"]),
    ("a model revision that climbs out", None, {"model_revision": "../main"}, None,
     ["Host spark1: model_revision=../main is not a branch, tag or commit", "group_vars/sparks"]),
    ("a token over plain HTTP", None, {"model_hf_endpoint": "http://mirror.lan:8080", "vault_hf_token": "hf_x"},
     None, ["model_hf_endpoint=http://mirror.lan:8080 is not https://", "the token would go over plain HTTP"]),
    ("an image pinned by digest built on the head", None,
     {"dgx_spark_image": "docker.io/org/image@sha256:" + "0" * 64, "docker_image_source": "build",
      "docker_image_distribute": "from_head",
      "docker_image_build_path": "/srv/image"}, None,
     ["is pinned by digest, which only a registry pull can give a node", "docker_image_source: pull"]),
    ("a digest that is not one", None, {"dgx_spark_image": "repo/image@sha256:abc"}, None,
     ["dgx_spark_image=repo/image@sha256:abc", "is not a name pinned by digest"]),
    ("a fabric gate size that could exhaust a GB10's memory", None, {"ib_network_bandwidth_sizes_mb": [512, 8192]},
     None, ["ib_network_bandwidth_sizes_mb one to eight sizes of more than 0 and at most 4096 MiB ([512, 8192]",
            "group_vars/sparks"]),
    ("a GID index that is not a number", {"spark2": {"dgx_spark_nccl_ib_gid_index": "three"}}, None, None,
     ["fabric_env: host spark2: dgx_spark_nccl_ib_gid_index='three' is not a GID index (0 or more)",
      "set a whole number in host_vars"]),
])
def test_bad_input_is_refused_naming_host_variable_and_fix(
        tmp_path: Path, case: str, host_vars: dict[str, dict[str, Any]] | None,
        extra: dict[str, Any] | None, hosts: dict[str, Any] | None, expected: list[str]) -> None:
    rc, output = run_preflight(tmp_path, host_vars, extra, hosts)
    assert rc != 0, f"{case}: preflight passed"
    for needle in expected:
        assert needle in output, f"{case}: {needle!r} not in output:\n{output[-3000:]}"
