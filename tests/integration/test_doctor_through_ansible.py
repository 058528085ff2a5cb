"""playbooks/doctor.yml through ansible-playbook without a cluster: this machine is spark1 (a local
connection, its config folder a temporary one holding a secrets file, a token file and an env file
that repeats the API key), spark2 answers nowhere (ssh to a closed port of this machine). The archive
must exist without a secret, the summary must name spark2 as unreachable, and a secret the node does
not know that reached the archive must delete it and fail the run naming the setting."""
from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from support.ansible_run import REPO, run_ansible_playbook, write_ansible_cfg, write_half_down_inventory

KEY = "dgx-spark-test-key-5f1c9a"
TOKEN = "0f3a9c1e77d24b6a8e5d0c3b9a1f2e4d"
REGISTRY_PASSWORD = "dgx-spark-test-registry-pw-7d2e"


def run_doctor(tmp_path: Path, env_text: str, *extra_args: str) -> tuple[str, int, Path]:
    config = tmp_path / "etc"
    config.mkdir()
    (config / "vllm-serve.secrets.env").write_text(f"VLLM_API_KEY='{KEY}'\n")
    (config / "ray-auth-token").write_text(f"{TOKEN}\n")
    (config / "vllm-serve.env").write_text(env_text)
    hosts = write_half_down_inventory(tmp_path, {
        "vllm_serve_api_key": KEY, "docker_image_registry_password": REGISTRY_PASSWORD,
        "dgx_spark_ray_auth_token": TOKEN, "dgx_spark_image": "dgx-spark-vllm-test/absent:none"})
    archives = tmp_path / "archives"
    proc = run_ansible_playbook(REPO / "playbooks/doctor.yml", [hosts],
                                config=write_ansible_cfg(tmp_path), cwd=tmp_path, timeout=240, extra_args=extra_args,
                                # The node's config folder (a var of the base role: only -e is above it).
                                extra_vars={"dgx_spark_config_dir": str(config), "doctor_archive_dir": str(archives),
                                            "doctor_command_timeout": 10})
    return proc.stdout + proc.stderr, proc.returncode, archives


def archive_texts(path: Path) -> dict[str, str]:
    with tarfile.open(path, "r:gz") as archive:
        return {info.name: archive.extractfile(info).read().decode()  # type: ignore[union-attr]
                for info in archive.getmembers() if info.isfile()}


def test_the_archive_holds_every_node_and_no_secret_and_the_summary_names_the_unreachable_one(tmp_path: Path) -> None:
    output, rc, archives = run_doctor(tmp_path, f"NCCL_SOCKET_IFNAME=lo\nVLLM_EXTRA=--api-key {KEY}\n")
    assert rc == 0, output[-4000:]
    [archive] = list(archives.glob("doctor-*.tar.gz"))
    texts = archive_texts(archive)
    top = archive.name.removesuffix(".tar.gz")
    assert {f"{top}/summary.txt", f"{top}/spark1/report.json", f"{top}/spark1/env/vllm-serve.env",
            f"{top}/spark2/unreachable.txt"} <= set(texts)
    everything = "".join(texts.values())
    assert KEY not in everything and TOKEN not in everything and REGISTRY_PASSWORD not in everything
    assert texts[f"{top}/spark1/env/vllm-serve.env"] == "NCCL_SOCKET_IFNAME=lo\nVLLM_EXTRA=--api-key REDACTED\n"
    report = json.loads(texts[f"{top}/spark1/report.json"])
    assert report["fabric_env"] == {"NCCL_SOCKET_IFNAME": "lo"} and "lo" in report["interfaces"]
    flat = re.sub(r"\s+", " ", output)
    assert "spark2: NO REPORT: unreachable" in flat
    assert "spark1: image dgx-spark-vllm-test/absent:none is not on the node" in flat
    assert re.search(r"spark1\s+:.*changed=0", output), output[-2000:]


def test_a_secret_that_reached_the_archive_deletes_it_and_fails_naming_the_setting(tmp_path: Path) -> None:
    # The node does not hold the registry password, so nothing there can redact it: the controller's scan must.
    output, rc, archives = run_doctor(tmp_path, f"NOTE={REGISTRY_PASSWORD}\n")
    assert rc != 0
    flat = re.sub(r"\s+", " ", output)
    assert "the archive held a secret, so it was deleted: docker_image_registry_password in doctor-" in flat
    assert REGISTRY_PASSWORD not in output
    assert not list(archives.glob("*.tar.gz"))


def test_check_mode_collects_and_summarizes_but_writes_no_archive(tmp_path: Path) -> None:
    output, rc, archives = run_doctor(tmp_path, "NCCL_SOCKET_IFNAME=lo\n", "--check")
    assert rc == 0, output[-4000:]
    assert "spark2: NO REPORT: unreachable" in re.sub(r"\s+", " ", output)
    assert not archives.exists()
