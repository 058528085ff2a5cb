"""playbooks/doctor.yml on the serving cluster with a planted fault: the worker's serving unit
stopped. The archive must exist, hold a report of every node and none of the secrets (the API key,
each node's cluster secrets, the registry password, the Hub token), even with two of them planted in
a file the doctor reads out (an env file of the config folder: the nodes must redact them), and its
summary must name the worker's stopped unit. Changes nothing on the nodes; serving is restored
(the unit started again, completions answered) before the assertions."""
from __future__ import annotations

import re
import tarfile
import time
from pathlib import Path

import yaml

from cluster_health import ClusterBroken
from endpoint import completes
from nodes import API_KEY, HEAD, HF_TOKEN, NODES, REPO, node_host
from playbook_run import changed_per_node, failure, run_playbook

WORKER = next(name for name in NODES if name != HEAD)
SERVE_UNIT = "vllm-serve"
CONFIG_DIR = "/etc/dgx-spark-vllm"
PLANTED = f"{CONFIG_DIR}/doctor-test-planted.env"
REGISTRY_PASSWORD = yaml.safe_load((REPO / "molecule/shared/vars/sources.yml").read_text())[
    "dgx_spark_test_registry_password"]
# The doctor's budget on two nodes is under a minute; this bound catches a command that hangs
# (each is bounded by doctor_command_timeout) with room for a loaded test machine.
DOCTOR_SECONDS = 120
# Seconds to serving again once the worker's unit is started: a group restart (the head's engine
# died with its peer) takes 25-132 s on the container cluster.
RESTORE_SECONDS = 300


def node_secrets(name: str) -> list[str]:
    """The values of a node's cluster secret files (the guard's key, Ray's token where there is one)."""
    listing = node_host(name).check_output(f"ls {CONFIG_DIR}").split()
    return [node_host(name).check_output(f"cat {CONFIG_DIR}/{file}").strip()
            for file in listing if file.endswith((".secret", "-token"))]


def serving_again() -> None:
    deadline = time.monotonic() + RESTORE_SECONDS
    while time.monotonic() < deadline:
        if completes() and completes():
            return
        time.sleep(2)
    raise ClusterBroken(f"no completions within {RESTORE_SECONDS} s after {WORKER}'s {SERVE_UNIT} was started again")


def archive_texts(path: Path) -> dict[str, str]:
    with tarfile.open(path, "r:gz") as archive:
        return {info.name: archive.extractfile(info).read().decode(errors="replace")  # type: ignore[union-attr]
                for info in archive.getmembers() if info.isfile()}


def test_the_doctor_archives_every_node_without_a_secret_and_names_the_stopped_worker_unit(tmp_path: Path) -> None:
    secrets = {"the API key": API_KEY, "the registry password": REGISTRY_PASSWORD, "the Hub token": HF_TOKEN}
    secrets.update({f"a cluster secret of {name}": value for name in NODES for value in node_secrets(name)})
    worker_secrets = node_secrets(WORKER)
    # The worker holds no API key (only a group head does): its guard's secret is planted there.
    assert worker_secrets, f"{WORKER} has no secret file in {CONFIG_DIR} (serving_guard_enabled is on here)"
    try:
        node_host(HEAD).check_output("printf 'NOTE=%%s\\n' %s > %s", API_KEY, PLANTED)
        node_host(WORKER).check_output("printf 'NOTE=%%s\\n' %s > %s", worker_secrets[0], PLANTED)
        node_host(WORKER).check_output(f"systemctl stop {SERVE_UNIT}")
        started = time.monotonic()
        result = run_playbook("playbooks/doctor.yml", "-e", f"doctor_archive_dir={tmp_path}", timeout=600)
        seconds = time.monotonic() - started
    finally:
        for name in NODES:
            node_host(name).run(f"rm -f {PLANTED}")
        node_host(WORKER).check_output(f"systemctl start {SERVE_UNIT}")
        serving_again()

    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    print(f"doctor.yml took {seconds:.0f} s")
    assert seconds < DOCTOR_SECONDS, f"doctor.yml took {seconds:.0f} s"
    assert changed_per_node(output) == {name: 0 for name in NODES}, failure(output)
    [archive] = list(tmp_path.glob("doctor-*.tar.gz"))
    texts = archive_texts(archive)
    top = archive.name.removesuffix(".tar.gz")
    assert {f"{top}/{name}/report.json" for name in NODES} <= set(texts), sorted(texts)
    assert texts[f"{top}/{HEAD}/env/doctor-test-planted.env"] == "NOTE=REDACTED\n"
    assert texts[f"{top}/{WORKER}/env/doctor-test-planted.env"] == "NOTE=REDACTED\n"
    for what, value in secrets.items():
        if value:
            assert not [name for name, text in texts.items() if value in text], f"{what} is in the archive"
            assert value not in output, f"{what} is in the run's output"
    summary = re.sub(r"\s+", " ", texts[f"{top}/summary.txt"])
    # A stopped container's `docker run` exits non-zero: systemd may call the stopped unit failed.
    stopped = re.compile(rf"{WORKER}: unit {SERVE_UNIT} is (inactive|failed)")
    assert stopped.search(summary), summary
    assert stopped.search(re.sub(r"\s+", " ", output)), failure(output)
