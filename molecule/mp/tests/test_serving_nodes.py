"""Serving units on every node (testinfra): layout, environment, secrets."""
from __future__ import annotations

from nodes import API_KEY, FABRIC, HEAD, HF_TOKEN, MODEL, RANK, env_file, interface_of, node, node_host, serve_args

MODEL_LISTING = ("cd /var/lib/dgx-spark-vllm/models/%s && "
                 "find . -type f ! -name '.dgx-spark-vllm-*' -printf '%%P %%s\\n' | sort")


def test_every_node_runs_its_serving_unit_and_no_ray(host):
    assert host.service("vllm-serve").is_running
    assert host.service("vllm-serve").is_enabled
    for ray_unit in ("ray-head", "ray-worker"):
        assert not host.file(f"/etc/systemd/system/{ray_unit}.service").exists


def test_rank_and_rendezvous_point(host):
    me = node(host)
    args, value = serve_args(host)
    assert value["--master-addr"] == FABRIC[HEAD]
    assert value["--tensor-parallel-size"] == "2"
    assert value["--nnodes"] == "2"
    assert value["--distributed-executor-backend"] == "mp"
    assert value["--node-rank"] == str(RANK[me])
    assert ("--headless" in args) == (me != HEAD)


def test_environment_is_root_only_and_binds_own_fabric_address(host):
    me = node(host)
    for name in ("vllm-serve.env", "vllm-serve.secrets.env")[:2 if me == HEAD else 1]:
        f = host.file(f"/etc/dgx-spark-vllm/{name}")
        assert (f.user, f.group, f.mode) == ("root", "root", 0o600), name
    env = env_file(host, "vllm-serve")
    assert env["VLLM_HOST_IP"] == FABRIC[me]
    assert env["MASTER_ADDR"] == FABRIC[HEAD]
    assert env["GLOO_SOCKET_IFNAME"] == interface_of(host, FABRIC[me])
    assert env["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_API_KEY" not in env


def test_api_key_appears_in_no_unit_process_list_journal_or_docker_inspect(host):
    assert API_KEY not in host.check_output("cat /etc/systemd/system/*.service")
    assert API_KEY not in host.check_output("ps -eo args")
    assert API_KEY not in host.check_output("journalctl --no-pager -o cat")
    assert API_KEY not in host.check_output("cat /etc/dgx-spark-vllm/vllm-serve.env")
    assert API_KEY not in host.check_output("docker ps -q | xargs -r docker inspect")
    if node(host) == HEAD:
        # ...but it is in the root-only secrets file the API server's shell sources.
        assert host.run("grep -c %s /etc/dgx-spark-vllm/vllm-serve.secrets.env", API_KEY).stdout.strip() == "1"
        # ...and in the one clients on the head send (the endpoint's probe, status, the benchmark).
        client = host.file("/etc/dgx-spark-vllm/vllm-serve-endpoint.client.secrets.env")
        assert (client.user, client.group, client.mode) == ("root", "root", 0o600)
        assert host.run("grep -c %s %s", API_KEY, client.path).stdout.strip() == "1"
    else:
        # A headless worker serves no API: it holds no key.
        assert not host.file("/etc/dgx-spark-vllm/vllm-serve.secrets.env").exists


def test_the_hugging_face_token_reaches_no_node_when_nothing_is_downloaded(host):
    """Only a container that downloads gets the token; this scenario downloads nothing."""
    assert HF_TOKEN not in host.check_output("cat /etc/systemd/system/*.service")
    assert HF_TOKEN not in host.check_output("ps -eo args")
    assert HF_TOKEN not in host.check_output("docker ps -q | xargs -r docker inspect")
    assert HF_TOKEN not in host.check_output("journalctl --no-pager -o cat")
    assert host.run("grep -rl %s /etc/dgx-spark-vllm", HF_TOKEN).stdout == ""


def test_model_was_copied_to_every_node(host):
    listing = host.check_output(MODEL_LISTING, MODEL)
    assert "model.safetensors" in listing and "tokenizer.json" in listing
    assert listing == node_host(HEAD).check_output(MODEL_LISTING, MODEL)
