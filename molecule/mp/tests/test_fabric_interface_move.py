"""The worker's fabric moves to another interface (a cable moved to the other CX7 port, a rename),
with the same address: one site.yml run brings serving back, with nothing done by hand.

The move: the worker's fabric network is detached from its container and attached again with the
same address, so Docker gives it a new interface (eth0 becomes eth1), and drops the default route
Docker adds back (the fabric carries none, as create.yml leaves it). Serving on the old interface
cannot work any more (the worker's firewall drops what arrives on any interface but the old one,
and the engines' NCCL/Gloo environment names it). site.yml then has to re-derive the fabric from
the node as it is now, bring the firewall's table up to date before the fabric check, re-render
the serving environment for the new interface and restart the group.

Should anything fail, the worker is attached to its fabric again in `finally`, and the module's
fixture runs site.yml until the cluster serves, for the tests after this one.
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

import cluster_health
from endpoint import assert_completes, completes, seconds_to_first_completion
from nodes import FABRIC, NODES, PREFIX, env_file, interface_of, node_host
from playbook_run import failure, run_playbook

WORKER = next(name for name in NODES if name != NODES[0])
FABRIC_NETWORK = f"{PREFIX}-fabric"
CONTAINER = f"{PREFIX}-{WORKER}"
# Seconds the endpoint may take to answer once site.yml has ended (it waited for readiness itself).
SERVING_AFTER_SITE = 120


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], check=check, capture_output=True, text=True, timeout=180)


def worker_interface() -> str | None:
    """The worker's interface holding its fabric address, None when it has none."""
    return interface_of(node_host(WORKER), FABRIC[WORKER])


def attached() -> bool:
    """Whether the worker's container is on the fabric network."""
    networks = docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", CONTAINER).stdout
    return f'"{FABRIC_NETWORK}"' in networks


def attach_worker() -> None:
    """The worker on its fabric with its address, and without the default route Docker gives it."""
    if not attached():
        docker("network", "connect", "--ip", FABRIC[WORKER], FABRIC_NETWORK, CONTAINER)
    node_host(WORKER).run("if ip -4 route show default | grep -q .; then ip -4 route del default; fi")


def move_worker_fabric() -> None:
    """Detach the worker's fabric network and attach it again: the same address on a new interface."""
    docker("network", "disconnect", FABRIC_NETWORK, CONTAINER)
    attach_worker()


@pytest.fixture(scope="module", autouse=True)
def healthy_at_the_end() -> Iterator[None]:
    """Leave the cluster serving for the tests after this module: the worker on its fabric, and a
    site run when the endpoint does not answer."""
    yield
    attach_worker()
    if cluster_health.broken() is None and completes():
        return
    result = run_playbook("site.yml")
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    assert seconds_to_first_completion(time.monotonic(), deadline=SERVING_AFTER_SITE) is not None, \
        "site.yml ran to its end, and the cluster answered no completion within 120 s"
    cluster_health.clear()


def test_one_site_run_heals_a_fabric_moved_to_another_interface() -> None:
    assert_completes()
    before = worker_interface()
    assert before, f"{WORKER} has no interface with its fabric address {FABRIC[WORKER]}"
    try:
        move_worker_fabric()
        after = worker_interface()
        assert after and after != before, \
            f"{WORKER}'s fabric address {FABRIC[WORKER]} is on {after} after the move, was on {before}: not moved"

        result = run_playbook("site.yml")
        output = result.stdout + result.stderr
        assert result.returncode == 0, failure(output)
        assert seconds_to_first_completion(time.monotonic(), deadline=SERVING_AFTER_SITE) is not None, \
            f"site.yml ran to its end, and the cluster answered no completion within {SERVING_AFTER_SITE} s"
        assert_completes()

        # What serves now names the new interface: the firewall's table and the engine's environment.
        worker = node_host(WORKER)
        table = worker.check_output("nft list table inet dgx_spark_vllm")
        assert f'ip daddr {FABRIC[WORKER]} iifname != "{after}"' in table, table
        assert f'"{before}"' not in table, table
        environment = env_file(worker, "vllm-serve")
        for variable in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            assert environment.get(variable, "").lstrip("=") == after, (variable, environment.get(variable))
    finally:
        attach_worker()
