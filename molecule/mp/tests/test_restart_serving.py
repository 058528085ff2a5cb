"""Restarting serving alone (converging, then as it is), and a wrong VLLM_HOST_IP failing fast
(controller side).

Runs the collection's own playbooks against the molecule inventory. Order
matters: restart first, then the failure, then a serve.yml run that heals it.
"""
from __future__ import annotations

import re
import time

import pytest

from ansible_run import write_overlay_inventory
from nodes import API_KEY, NODES, node_host, on_fabric, serving_stopping_at
from playbook_run import failure, run_playbook
from endpoint import assert_completes, call

# A served name systemd would split and expand if it reached the unit unquoted.
ODD_NAME = "tiny; touch /tmp/x 100% $HOME"

SERVING_CONTAINER = "docker inspect --format '{{.Id}} {{.State.StartedAt}}' vllm-serve"
OTHER_SERVICES = ("systemctl show --property=MainPID --property=ActiveEnterTimestamp "
                  "docker.service containerd.service systemd-journald.service")


def processes_of_container(host, container_id: str) -> list[str]:
    """Processes still in the given (old) container's cgroup: orphans after a restart."""
    return host.run("grep -l %s /proc/[0-9]*/cgroup", container_id).stdout.split()


def serve_the_odd_name(tmp_path, record_property, figure: str, says: str) -> str:
    """serve.yml with the odd served name; asserts that it restarted serving alone, left no orphan
    and no key in its output, and serves the odd name exactly. Its output."""
    hosts = {name: node_host(name) for name in NODES}
    before = {n: (h.check_output(SERVING_CONTAINER), h.check_output(OTHER_SERVICES)) for n, h in hosts.items()}
    odd = write_overlay_inventory(tmp_path / "odd-name", {n: {"vllm_serve_served_model_name": ODD_NAME} for n in NODES})

    started, started_wall = time.monotonic(), time.time()
    result = run_playbook("playbooks/serve.yml", inventories=(str(odd),))
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    restart_began = serving_stopping_at(NODES[0]) - started_wall
    record_property(figure, round(seconds))
    print(f"{says}: {seconds:.0f} s, the old head engine began to stop {restart_began:.1f} s into it")

    assert API_KEY not in output
    for name, host in hosts.items():
        container, services = host.check_output(SERVING_CONTAINER), host.check_output(OTHER_SERVICES)
        assert container.split()[0] != before[name][0].split()[0], f"{name}: serving was not restarted"
        assert services == before[name][1], f"{name}: another service was touched"
        assert processes_of_container(host, before[name][0].split()[0]) == [], f"{name}: orphans left"
        assert not host.file("/tmp/x").exists
    status, models = call("/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == [ODD_NAME]
    status, body = call("/v1/completions", body={"model": ODD_NAME, "prompt": "Hi", "max_tokens": 4})
    assert status == 200, body
    return output


@pytest.mark.gate
def test_serve_playbook_restarts_only_serving_and_serves_an_odd_name_exactly(record_property, tmp_path):
    serve_the_odd_name(tmp_path, record_property, "restart_serving_seconds", "restart serving (playbooks/serve.yml)")


@pytest.mark.gate
def test_serve_playbook_with_nothing_changed_restarts_serving_as_it_is(record_property, tmp_path):
    """The same inventory again right after the converge above: serve.yml restarts serving as it
    is (none of the roles' checks, staging or rendering), and it serves as before."""
    output = serve_the_odd_name(tmp_path, record_property, "restart_as_is_seconds",
                                "restart serving as it is (playbooks/serve.yml, nothing changed)")
    # Flattened: the callback wraps long messages.
    assert "Nothing changed since the last converge that served: serving restarts as it is" in " ".join(output.split()), \
        failure(output)


ENGINE_STARTED = "systemctl show --property=ActiveEnterTimestampMonotonic --property=InvocationID vllm-serve"
UNIT_FILES = "cat /etc/systemd/system/vllm-serve.service /etc/dgx-spark-vllm/vllm-serve.env"


@pytest.mark.parametrize("setting, says", [
    ("vllm_serve_extra_args: ['--max-num-seqs', '$HOME']", "invalid int value"),
    ("vllm_serve_max_model_len: -5", "max_model_len"),
])
def test_a_command_vllm_refuses_is_refused_before_anything_is_written_or_stops(tmp_path, setting, says):
    """The two mistakes of the issue: vLLM in the image names them while the old engines serve on;
    no node's unit or environment changes and no engine restarts."""
    hosts = {name: node_host(name) for name in NODES}
    before = {n: (h.check_output(ENGINE_STARTED), h.check_output(UNIT_FILES)) for n, h in hosts.items()}
    bad = write_overlay_inventory(tmp_path / "bad-command", {n: setting + "\n" for n in NODES})

    started = time.monotonic()
    result = run_playbook("playbooks/serve.yml", inventories=(str(bad),))
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    print(f"{setting}: refused after {seconds:.0f} s")

    assert result.returncode != 0, output[-5000:]
    assert "refuses the new serving command" in output and says in output, failure(output)
    assert "Nothing was written and nothing stopped" in output
    for name, host in hosts.items():
        assert (host.check_output(ENGINE_STARTED), host.check_output(UNIT_FILES)) == before[name], \
            f"{name}: the unit, its environment or its engine changed"
    status, models = call("/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == [ODD_NAME]


BAD_WORKER_ENV = ("vllm_serve_env:\n  VLLM_CPU_KVCACHE_SPACE: '1'\n  VLLM_CPU_OMP_THREADS_BIND: '1'\n"
                  f"  VLLM_HOST_IP: {on_fabric(99)}\n")


# A key rotated in the same run as the bad setting (after a leak, say): the rollback must keep it.
ROTATED_KEY = "rotated-" + API_KEY[::-1]


def test_a_wrong_worker_vllm_host_ip_is_rolled_back_to_the_configuration_that_served(tmp_path):
    """The role's own variable, as a user would set it: an address spark2 lacks, in the same run as a
    new API key. The readiness wait fails with the journals, the previous configuration is put back
    and serves again, no run needed, under the new key: the old one gets 401. (The next test's run
    puts the inventory's key back.)"""
    rotated = f"vllm_serve_api_key: {ROTATED_KEY}\n"
    bad = str(write_overlay_inventory(tmp_path / "bad-inventory",
                                      {"spark1": rotated, "spark2": BAD_WORKER_ENV + rotated}))
    served_before = {n: node_host(n).check_output("cat /etc/dgx-spark-vllm/vllm-serve.env") for n in NODES}

    started = time.monotonic()
    result = run_playbook("playbooks/serve.yml", inventories=(bad,))
    seconds = time.monotonic() - started
    print(f"wrong VLLM_HOST_IP on spark2: failed, rolled back and serving again after {seconds:.0f} s")
    output = result.stdout + result.stderr

    assert result.returncode != 0, output[-5000:]
    assert seconds < 600, "the readiness wait and the rollback must end, not hang"
    assert "The new serving configuration did not come up on spark1" in output, failure(output)
    assert "ROLLED BACK: the last known good configuration is back on every serving node of this group and " \
        "serves again" in output, failure(output)
    assert re.search(r"journalctl -u vllm-serve on spark2", output)
    assert "Cannot assign requested address" in output
    assert API_KEY not in output and ROTATED_KEY not in output
    for name in NODES:
        assert node_host(name).check_output("cat /etc/dgx-spark-vllm/vllm-serve.env") == served_before[name]
        assert not node_host(name).file("/etc/dgx-spark-vllm/last-good/vllm-serve.secrets.env").exists
    assert call("/v1/models", key=API_KEY)[0] == 401, "the rollback brought the rotated-away key back"
    status, models = call("/v1/models", key=ROTATED_KEY)
    assert status == 200 and [m["id"] for m in models["data"]] == [ODD_NAME]


def test_a_setting_that_can_never_start_stops_after_the_bounded_attempts(tmp_path):
    """With rollback off, the broken worker is restarted with back-off, then left failed with its
    reason in systemctl status and the journal; re-running serve.yml with the right settings
    heals it. (A limit of 2 shows the bound as well as a larger one; each start of this worker
    takes over a minute before it fails.)"""
    limit = 2
    bounded = ("vllm_serve_rollback: false\nvllm_serve_restart_sec: 2\nvllm_serve_restart_max_delay: 8\n"
               f"vllm_serve_restart_limit: {limit}\n")
    bad = str(write_overlay_inventory(tmp_path / "bad-inventory",
                                      {"spark1": bounded, "spark2": BAD_WORKER_ENV + bounded}))
    worker = node_host("spark2")
    since = worker.check_output("date +%s").strip()
    result = run_playbook("playbooks/serve.yml", inventories=(bad,))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-5000:]
    assert "Nothing was rolled back (vllm_serve_rollback is false)" in output, failure(output)

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not worker.run("systemctl is-failed --quiet vllm-serve").rc == 0:
        time.sleep(5)
    status = worker.run("systemctl status vllm-serve --no-pager -l -n 40").stdout
    print(status[:3000])
    assert "start-limit-hit" in status or "Start request repeated too quickly" in status, status[:3000]
    # Since this run only: the test before left the same error in the worker's journal.
    assert "Cannot assign requested address" in worker.check_output(
        f"journalctl -u vllm-serve -o cat --no-pager --since @{since}")
    count = f"journalctl -u vllm-serve -o cat --no-pager --since @{since} | grep -c '^Started vllm-serve' || true"
    starts_now = worker.check_output(count)
    # Longer than the back-off's cap (8 s) and two of the serving guard's failed probes (5 s apart).
    time.sleep(20)
    starts_later = worker.check_output(count)
    print(f"starts of the broken worker: {starts_now.strip()} (limit {limit}), none more in 20 s")
    # The run's own start, then at most `limit` more: the run's daemon-reload may have restarted
    # systemd's count after its own start (seen: 1 + 3 with a limit of 3).
    assert int(starts_now) <= limit + 1 and starts_later == starts_now

    healed = run_playbook("playbooks/serve.yml")
    assert healed.returncode == 0, failure(healed.stdout + healed.stderr)
    assert_completes()
