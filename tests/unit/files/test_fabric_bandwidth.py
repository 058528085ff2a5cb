"""The pure parts of roles/ib_network/files/fabric_bandwidth.py (the fabric gate's measuring
script): all_gather bus bandwidth, bounded sizes, NCCL's transport from its log, the verdict and its message, the
arguments, and the one JSON line it prints when it cannot measure. The measurement itself (torch,
two processes) runs in the serving image: molecule/mp/tests/test_fabric_gate.py."""
from __future__ import annotations

import importlib.util
import json

import pytest

from support.role_files import load_role_file

RING = "ring spark1 (192.168.200.12) <-> spark2 (192.168.200.13)"

fb = load_role_file("roles/ib_network/files/fabric_bandwidth.py")


def test_all_gather_bus_bandwidth_is_size_over_time_times_n_minus_one_over_n() -> None:
    # 1 GB gathered in 0.1 s is 10 GB/s of algorithm bandwidth; the bus carries (n-1)/n of it.
    assert fb.algorithm_bandwidth(10**9, 0.1) == pytest.approx(10.0)
    assert fb.bus_bandwidth(10**9, 0.1, 2) == pytest.approx(5.0)
    assert fb.bus_bandwidth(10**9, 0.1, 4) == pytest.approx(7.5)
    assert fb.bus_bandwidth(10**9, 0.1, 8) == pytest.approx(8.75)
    assert fb.bus_bandwidth(10**9, 0.1, 1) == 0.0


@pytest.mark.parametrize("size, seconds, world", [(1, 0.0, 2), (1, -1.0, 2), (1, 1.0, 0)])
def test_bandwidth_refuses_impossible_inputs(size: int, seconds: float, world: int) -> None:
    with pytest.raises(ValueError):
        fb.bus_bandwidth(size, seconds, world)


def test_sizes_are_mib_as_whole_float32_elements_per_rank_ascending_and_distinct() -> None:
    assert fb.parse_sizes_mb("256, 16,64,16") == [16 * 2**20, 64 * 2**20, 256 * 2**20]
    assert fb.parse_sizes_mb("0.000001") == [4]  # at least one element
    assert fb.parse_sizes_mb("0.000001", world_size=3) == [12]  # one element per rank
    assert fb.parse_sizes_mb("1", world_size=3) == [3 * (2**20 // 4 // 3) * 4]  # equal parts
    assert fb.parse_sizes_mb("4096") == [4096 * 2**20]


@pytest.mark.parametrize("sizes", ["16,0", "-1", "4097", "8192"])
def test_sizes_outside_0_to_4_gib_are_refused(sizes: str) -> None:
    with pytest.raises(ValueError, match="more than 0 and at most 4096 MiB"):
        fb.parse_sizes_mb(sizes)


def test_peak_is_the_size_with_the_highest_bus_bandwidth() -> None:
    sizes = [fb.SizeResult(1, 1.0, 1.0, 1.0), fb.SizeResult(2, 1.0, 9.0, 9.0), fb.SizeResult(3, 1.0, 5.0, 5.0)]
    assert fb.peak(sizes).bytes == 2


@pytest.mark.parametrize("log, net", [
    ("spark1:1:1 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [1]roceP2p1s0f0:1/RoCE", "IB"),
    ("spark1:1:1 [0] NCCL INFO NET/Socket : Using [0]enp1s0f0np0:192.168.200.12<0>", "Socket"),
    # IB found no device, so NCCL went on to sockets.
    ("NCCL INFO NET/Plugin: No plugin found\nNCCL INFO NET/IB : No device found.\n"
     "NCCL INFO NET/Socket : Using [0]eth0:198.51.100.11<0>", "Socket"),
    ("NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE\nNCCL INFO Using network IB\n"
     "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0", "IB"),
    ("NCCL INFO NET/Socket : Using [0]enp1s0f0np0:192.168.200.12<0>\nNCCL INFO Using network Socket", "Socket"),
    ("NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0\n"
     "NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/Socket/0", "Socket"),
    ("", None),
    ("NCCL INFO Bootstrap : Using eth0:198.51.100.11<0>", None),
])
def test_nccl_transport_is_read_from_its_log(log: str, net: str | None) -> None:
    assert fb.nccl_net_in_use(log) == net


def test_verdict_passes_at_or_above_the_expected_figure() -> None:
    ok, message = fb.verdict(23.4, 21.875, RING, "nccl", "IB", require_ib=True)
    assert ok
    assert message == (f"all_gather bus bandwidth over {RING}: 23.40 GB/s (nccl, NCCL over NET/IB), "
                       "at least 21.875 GB/s expected: pass")
    assert fb.verdict(0.0625, 0.0625, RING, "gloo")[0]


def test_verdict_below_names_ring_figures_and_likely_causes() -> None:
    ok, message = fb.verdict(4.82, 1e6, RING, "gloo")
    assert not ok
    assert message.startswith(f"all_gather bus bandwidth over {RING}: 4.82 GB/s (gloo), below the 1e+06 GB/s expected.")
    for cause in ("MTU", "wrong interface", "lower speed", "NCCL falling back to sockets"):
        assert cause in message


PLANTED_SOCKET_LOG = ("spark2:41:41 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)\n"
                      "spark2:41:41 [0] NCCL INFO NET/IB : No device found.\n"
                      "spark2:41:41 [0] NCCL INFO NET/Socket : Using [0]enp1s0f0np0:192.168.200.13<0>\n"
                      "spark2:41:41 [0] NCCL INFO Using network Socket\n")


def test_a_planted_net_socket_log_fails_a_node_with_rdma_whatever_the_figure() -> None:
    ok, message = fb.verdict(25.0, 21.875, RING, "nccl", fb.nccl_net_in_use(PLANTED_SOCKET_LOG), require_ib=True)
    assert not ok
    assert message.startswith(f"all_gather bus bandwidth over {RING}: 25.00 GB/s (nccl, NCCL over NET/Socket): "
                              "NCCL used NET/Socket on a node with RDMA devices, not RDMA.")
    assert "NCCL_IB_HCA" in message and "/dev/infiniband" in message


def test_no_word_from_nccl_on_its_network_fails_a_node_with_rdma() -> None:
    ok, message = fb.verdict(25.0, 21.875, RING, "nccl", None, require_ib=True)
    assert not ok and "did not log its network (NET/IB expected)" in message


def test_sockets_pass_on_a_node_without_rdma_when_fast_enough() -> None:
    assert fb.verdict(25.0, 21.875, RING, "nccl", "Socket")[0]


def test_arguments_and_their_defaults() -> None:
    args = fb.parse_args(["--backend", "gloo", "--rank", "1", "--world-size", "2",
                          "--master-addr", "198.51.100.11", "--master-port", "29597"])
    assert (args.backend, args.rank, args.world_size, args.master_port) == ("gloo", 1, 2, 29597)
    assert args.sizes == [512 * 2**20, 1024 * 2**20, 2048 * 2**20, 4096 * 2**20]
    expected = (10, 3, None, None, False)
    assert (args.iterations, args.warmup, args.min_busbw, args.device_index, args.require_ib) == expected


@pytest.mark.parametrize("extra", [
    ["--rank", "2", "--world-size", "2"],
    ["--rank", "0", "--world-size", "2", "--iterations", "0"],
    ["--rank", "0", "--world-size", "2", "--sizes-mb", "0"],
    ["--rank", "0", "--world-size", "2", "--sizes-mb", "512,8192"],
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
                          "--master-port", "29597", "--min-busbw", "3", "--ring", RING])
    report = fb.Report(0, 2, "gloo", "spark1", sizes=[fb.SizeResult(1, 1.0, 2.0, 2.0), fb.SizeResult(2, 1.0, 4.5, 4.5)])
    fb.finish(report, args)
    assert (report.busbw, report.peak_bytes, report.ok, report.min_busbw) == (4.5, 2, True, 3.0)
    assert RING in report.message


def test_finish_fails_a_socket_fallback_when_rdma_is_required() -> None:
    args = fb.parse_args(["--backend", "nccl", "--rank", "1", "--world-size", "2", "--master-addr", "127.0.0.1",
                          "--master-port", "29597", "--min-busbw", "21.875", "--require-ib", "--ring", RING])
    report = fb.Report(1, 2, "nccl", "spark2", sizes=[fb.SizeResult(1, 1.0, 60.0, 30.0)],
                       nccl_net=fb.nccl_net_in_use(PLANTED_SOCKET_LOG))
    fb.finish(report, args)
    assert report.ok is False and "NCCL used NET/Socket" in report.message


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_a_failed_measurement_still_prints_one_json_line_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    status = fb.main(["--backend", "gloo", "--rank", "0", "--world-size", "2", "--master-addr", "127.0.0.1",
                      "--master-port", "29597", "--min-busbw", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1 and len(lines) == 1
    line = json.loads(lines[0])
    assert "torch" in line["error"] and line["ok"] is None and line["busbw"] == 0.0
