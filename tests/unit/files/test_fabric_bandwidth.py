"""The pure parts of roles/ib_network/files/fabric_bandwidth.py (the fabric gate's measuring
script): bus bandwidth, sizes, NCCL's transport from its log, the verdict and its message, the
arguments, and the one JSON line it prints when it cannot measure. The measurement itself (torch,
two processes) runs in the serving image: molecule/mp/tests/test_fabric_gate.py."""
from __future__ import annotations

import importlib.util
import json

import pytest

from support.role_files import load_role_file

RING = "ring spark1 (192.168.200.12) <-> spark2 (192.168.200.13)"

fb = load_role_file("roles/ib_network/files/fabric_bandwidth.py")


def test_bus_bandwidth_is_size_over_time_times_two_n_minus_one_over_n() -> None:
    # 1 GB in 0.1 s is 80 Gb/s of algorithm bandwidth; with 2 ranks the factor is 1.
    assert fb.algorithm_bandwidth_gbps(10**9, 0.1) == pytest.approx(80.0)
    assert fb.bus_bandwidth_gbps(10**9, 0.1, 2) == pytest.approx(80.0)
    assert fb.bus_bandwidth_gbps(10**9, 0.1, 4) == pytest.approx(120.0)  # 2 * 3/4
    assert fb.bus_bandwidth_gbps(10**9, 0.1, 8) == pytest.approx(140.0)  # 2 * 7/8
    assert fb.bus_bandwidth_gbps(10**9, 0.1, 1) == 0.0


@pytest.mark.parametrize("size, seconds, world", [(1, 0.0, 2), (1, -1.0, 2), (1, 1.0, 0)])
def test_bandwidth_refuses_impossible_inputs(size: int, seconds: float, world: int) -> None:
    with pytest.raises(ValueError):
        fb.bus_bandwidth_gbps(size, seconds, world)


def test_sizes_are_mib_as_whole_float32_elements_ascending_and_distinct() -> None:
    assert fb.parse_sizes_mb("256, 16,64,16") == [16 * 2**20, 64 * 2**20, 256 * 2**20]
    assert fb.parse_sizes_mb("0.000001") == [4]  # at least one element
    with pytest.raises(ValueError, match="positive"):
        fb.parse_sizes_mb("16,0")


def test_peak_is_the_size_with_the_highest_bus_bandwidth() -> None:
    sizes = [fb.SizeResult(1, 1.0, 1.0, 1.0), fb.SizeResult(2, 1.0, 9.0, 9.0), fb.SizeResult(3, 1.0, 5.0, 5.0)]
    assert fb.peak(sizes).bytes == 2


@pytest.mark.parametrize("log, net", [
    ("spark1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE", "IB"),
    ("spark1:1:1 [0] NCCL INFO NET/Socket : Using [0]enp1s0f0np0:192.168.200.12<0>", "Socket"),
    ("NCCL INFO NET/Plugin: No plugin found\nNCCL INFO NET/IB : No device found.\n"
     "NCCL INFO NET/Socket : Using [0]eth0", "IB"),  # both named: IB was found and tried first
    ("", None),
    ("NCCL INFO Bootstrap : Using eth0", None),
])
def test_nccl_transport_is_read_from_its_log(log: str, net: str | None) -> None:
    assert fb.nccl_net_in_use(log) == net


def test_verdict_passes_at_or_above_the_expected_figure() -> None:
    ok, message = fb.verdict(187.4, 100, RING, "nccl", "IB")
    assert ok
    assert message == (f"all_reduce bus bandwidth over {RING}: 187.40 Gb/s (nccl, NCCL over NET/IB), "
                       "at least 100 Gb/s expected: pass")
    assert fb.verdict(0.5, 0.5, RING, "gloo")[0]


def test_verdict_below_names_ring_figures_and_likely_causes() -> None:
    ok, message = fb.verdict(4.82, 1e6, RING, "gloo")
    assert not ok
    assert message.startswith(f"all_reduce bus bandwidth over {RING}: 4.82 Gb/s (gloo), below the 1e+06 Gb/s expected.")
    for cause in ("MTU", "wrong interface", "lower speed", "NCCL falling back to sockets"):
        assert cause in message


def test_verdict_puts_a_socket_fallback_first() -> None:
    ok, message = fb.verdict(20.0, 100, RING, "nccl", "Socket")
    assert not ok
    assert "(nccl, NCCL over NET/Socket)" in message
    assert message.index("NCCL used NET/Socket, not RDMA") < message.index("MTU")


def test_arguments_and_their_defaults() -> None:
    args = fb.parse_args(["--backend", "gloo", "--rank", "1", "--world-size", "2",
                          "--master-addr", "198.51.100.11", "--master-port", "29597"])
    assert (args.backend, args.rank, args.world_size, args.master_port) == ("gloo", 1, 2, 29597)
    assert args.sizes == [16 * 2**20, 64 * 2**20, 256 * 2**20]
    assert (args.iterations, args.warmup, args.min_gbps, args.device_index) == (10, 3, None, None)


@pytest.mark.parametrize("extra", [
    ["--rank", "2", "--world-size", "2"],
    ["--rank", "0", "--world-size", "2", "--iterations", "0"],
    ["--rank", "0", "--world-size", "2", "--sizes-mb", "0"],
    ["--rank", "0", "--world-size", "2", "--backend", "mpi"],
])
def test_bad_arguments_exit_2(extra: list[str]) -> None:
    base = ["--backend", "gloo", "--master-addr", "127.0.0.1", "--master-port", "29597"]
    with pytest.raises(SystemExit) as exit_:
        fb.parse_args(base + extra)
    assert exit_.value.code == 2


def test_gpu_is_the_device_index_else_local_rank_else_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert fb.device_index(None) == 0
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert fb.device_index(None) == 1
    assert fb.device_index(0) == 0


def test_finish_takes_the_peak_and_judges_it() -> None:
    args = fb.parse_args(["--backend", "gloo", "--rank", "0", "--world-size", "2", "--master-addr", "127.0.0.1",
                          "--master-port", "29597", "--min-gbps", "3", "--ring", RING])
    report = fb.Report(0, 2, "gloo", "spark1", sizes=[fb.SizeResult(1, 1.0, 2.0, 2.0), fb.SizeResult(2, 1.0, 4.5, 4.5)])
    fb.finish(report, args)
    assert (report.busbw_gbps, report.peak_bytes, report.ok, report.min_gbps) == (4.5, 2, True, 3.0)
    assert RING in report.message


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_a_failed_measurement_still_prints_one_json_line_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    status = fb.main(["--backend", "gloo", "--rank", "0", "--world-size", "2", "--master-addr", "127.0.0.1",
                      "--master-port", "29597", "--min-gbps", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1 and len(lines) == 1
    line = json.loads(lines[0])
    assert "torch" in line["error"] and line["ok"] is None and line["busbw_gbps"] == 0.0
