"""The rollback of role serving_rollout never puts back a last known good environment that names an interface
(or RDMA device) its node no longer has, through ansible-playbook against this machine (a local
connection): its /sys/class/net is the node's fabric as it is now (it has lo and no RDMA device).

A refused rollback fails before anything is stopped or copied: the failed configuration's files stay
as they are, and the message names the node, the variable, the name and the fix.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.ansible_run import REPO, flat_output, run_ansible_playbook, write_ansible_cfg

PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The task file under test
      ansible.builtin.include_tasks: {tasks}
"""
# A name no machine's interface starts with.
GONE = "fabricgone0"


def run(tmp_path: Path, tasks: str, last_good_env: str) -> tuple[int, str]:
    """Run roles/serving_rollout/tasks/TASKS with this machine as the group's one serving node; (rc, output).

    The failed configuration is an env file and a unit under tmp_path/etc, its last known good copies
    (the env file given, the same unit) under tmp_path/last-good.
    """
    etc, last_good = tmp_path / "etc", tmp_path / "last-good"
    etc.mkdir()
    last_good.mkdir()
    (etc / "vllm-serve.env").write_text("NCCL_SOCKET_IFNAME=lo\nMASTER_ADDR=198.51.100.11\n")
    (etc / "vllm-serve.service").write_text("[Service]\n")
    (last_good / "vllm-serve.env").write_text(last_good_env)
    (last_good / "vllm-serve.service").write_text("[Service]\n")
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(tasks=REPO / "roles/serving_rollout/tasks" / tasks))
    proc = run_ansible_playbook(
        playbook, ["localhost,"],
        extra_vars={"ansible_python_interpreter": sys.executable,
                    "serving_rollout_rollback": True,
                    "dgx_spark_group_hosts": ["localhost"],
                    "serving_rollout_env_file": str(etc / "vllm-serve.env"),
                    "serving_rollout_config_files": [str(etc / "vllm-serve.service"), str(etc / "vllm-serve.env")],
                    "__serving_rollout_last_good_dir": str(last_good),
                    "__serving_rollout_probe_result": {"stage": "timeout", "detail": "no answer"},
                    # Never reached when the rollback is refused; named so that nothing real could be stopped.
                    "dgx_spark_serve_unit": "dgx-spark-vllm-test-absent",
                    "dgx_spark_serve_guard_unit": "dgx-spark-vllm-test-absent-guard"},
        extra_args=["-c", "local"], config=write_ansible_cfg(tmp_path), cwd=tmp_path)
    return proc.returncode, flat_output(proc)


@pytest.mark.parametrize("env", [
    "NCCL_SOCKET_IFNAME=lo\nGLOO_SOCKET_IFNAME=lo\nTP_SOCKET_IFNAME=lo\n",
    "NCCL_SOCKET_IFNAME==lo\n",  # NCCL's exact-match form
    "NCCL_SOCKET_IFNAME=l\n",  # NCCL reads a name without "=" as a prefix: lo matches
    f"NCCL_SOCKET_IFNAME=^{GONE}\nNCCL_IB_HCA=^mlx5_9\n",  # exclusions name nothing that must exist
    "# Managed by dgx_spark.vllm\nMASTER_ADDR=198.51.100.11\n",  # no fabric variable at all
])
def test_a_last_good_environment_naming_present_interfaces_passes(tmp_path: Path, env: str) -> None:
    rc, output = run(tmp_path, "last_good_fabric.yml", env)
    assert rc == 0, output


@pytest.mark.parametrize("env, named", [
    (f"GLOO_SOCKET_IFNAME={GONE}\nNCCL_SOCKET_IFNAME={GONE}\nTP_SOCKET_IFNAME={GONE}\n",
     f"localhost's last known good GLOO_SOCKET_IFNAME={GONE} names interface {GONE}, which localhost no longer has"),
    ("GLOO_SOCKET_IFNAME=l\n",  # Gloo and torch take exact names: no prefix match
     "localhost's last known good GLOO_SOCKET_IFNAME=l names interface l, which localhost no longer has"),
    (f"NCCL_SOCKET_IFNAME==lo,{GONE}\n",
     f"NCCL_SOCKET_IFNAME==lo,{GONE} names interface {GONE}, which localhost no longer has"),
    ("NCCL_IB_HCA==rocep1s0f0:1,roceP2p1s0f0\n",
     "NCCL_IB_HCA==rocep1s0f0:1,roceP2p1s0f0 names RDMA device rocep1s0f0, which localhost no longer has "
     "(/sys/class/infiniband/rocep1s0f0)"),
])
def test_a_rollback_to_an_interface_the_node_no_longer_has_is_refused_and_changes_nothing(
        tmp_path: Path, env: str, named: str) -> None:
    rc, output = run(tmp_path, "rollback.yml", env)
    assert rc != 0, output
    assert ("The new serving configuration did not come up on localhost (stage: timeout: no answer), and its "
            "last known good configuration cannot serve either: ") in output, output
    assert named in output, output
    assert "Nothing was put back. Fix the fabric" in output and "and run site.yml" in output
    assert "Stop serving and the guards" not in output, "refused before anything was stopped"
    assert (tmp_path / "etc/vllm-serve.env").read_text() == "NCCL_SOCKET_IFNAME=lo\nMASTER_ADDR=198.51.100.11\n"
