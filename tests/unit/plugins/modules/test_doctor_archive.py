"""The doctor_archive module's functions: sorting out what each node gave, the summary, the archive's
members, and the scan that finds a secret in the archive as written."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from ansible_collections.dgx_spark.vllm.plugins.modules.doctor_archive import (
    leaks,
    members,
    secret_values,
    sort_out,
    summary,
    write_archive,
)

NODES = ["spark1", "spark2", "spark3"]
REPORT = {"machine": "aarch64", "kernel": "Linux 6.11.0-1016-nvidia #16", "vllm_version": "0.11.0 (label x)",
          "nvidia": {"nvidia_smi": "NVIDIA GB10, 580.95.05, [N/A], [N/A]"}, "image": {"id": "sha256:" + "ab" * 32}}


def collected(findings: list[str]) -> dict:
    return {"rc": 0, "stdout": json.dumps({"report": REPORT, "findings": findings,
                                           "texts": {"journal/vllm-serve.txt": "started\n"}})}


def test_each_node_gives_a_report_or_the_reason_it_gave_none() -> None:
    reports, errors = sort_out(NODES + ["spark4"], {
        "spark1": collected([]),
        "spark2": {"unreachable": True, "msg": "Failed to connect to the host via ssh"},
        "spark3": {"rc": 1, "stderr": "Traceback ...\nPermissionError"},
        "spark4": None,
    })
    assert list(reports) == ["spark1"]
    assert errors == {"spark2": "unreachable: Failed to connect to the host via ssh",
                      "spark3": "the collection failed (exit 1): Traceback ...\nPermissionError",
                      "spark4": "not in this run (--limit?)"}


def test_the_summary_names_each_nodes_faults_and_the_nodes_that_gave_nothing() -> None:
    reports = {"spark1": json.loads(collected([])["stdout"]),
               "spark2": json.loads(collected(["unit vllm-serve is inactive"])["stdout"])}
    lines = summary(NODES, reports, {"spark3": "unreachable: no route"})
    assert lines == [
        "spark1: aarch64, kernel 6.11.0-1016-nvidia, GPU NVIDIA GB10, 580.95.05, [N/A], [N/A], "
        "image sha256:abababababab, vLLM 0.11.0 (label x)",
        "  spark1: nothing looks wrong",
        "spark2: aarch64, kernel 6.11.0-1016-nvidia, GPU NVIDIA GB10, 580.95.05, [N/A], [N/A], "
        "image sha256:abababababab, vLLM 0.11.0 (label x)",
        "  spark2: unit vllm-serve is inactive",
        "spark3: NO REPORT: unreachable: no route",
    ]


def test_the_archive_holds_the_summary_and_per_node_report_findings_and_texts(tmp_path: Path) -> None:
    reports = {"spark1": json.loads(collected(["link enp1s0f0np0 (NCCL_IB_HCA) is down"])["stdout"])}
    files = members("doctor-x", ["spark1", "spark2"], reports, {"spark2": "unreachable"}, ["the summary"])
    path = tmp_path / "doctor-x.tar.gz"
    write_archive(str(path), files)
    assert path.stat().st_mode & 0o777 == 0o600
    with tarfile.open(path, "r:gz") as archive:
        names = sorted(archive.getnames())
        assert names == ["doctor-x/spark1/findings.txt", "doctor-x/spark1/journal/vllm-serve.txt",
                         "doctor-x/spark1/report.json", "doctor-x/spark2/unreachable.txt", "doctor-x/summary.txt"]
        findings = archive.extractfile("doctor-x/spark1/findings.txt")
        assert findings is not None and findings.read() == b"link enp1s0f0np0 (NCCL_IB_HCA) is down\n"


def test_a_secret_in_any_member_is_found_by_setting_and_member(tmp_path: Path) -> None:
    path = tmp_path / "a.tar.gz"
    write_archive(str(path), {"d/summary.txt": "fine\n", "d/spark2/env/x.env": "X=pw-7d2e-registry\n"})
    secrets = secret_values({"docker_image_registry_password": ["pw-7d2e-registry"], "vllm_serve_api_key": "key-5f1c9a",
                             "model_hf_token": [""], "dgx_spark_ray_auth_token": ""})
    assert secrets == {"docker_image_registry_password": ["pw-7d2e-registry"], "vllm_serve_api_key": ["key-5f1c9a"]}
    assert leaks(str(path), secrets) == [("docker_image_registry_password", "d/spark2/env/x.env")]
    assert leaks(str(path), {"vllm_serve_api_key": ["key-5f1c9a"]}) == []
