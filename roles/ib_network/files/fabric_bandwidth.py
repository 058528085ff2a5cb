"""Measure the fabric's all_reduce bus bandwidth with torch.distributed, one process per node.

Usage (one process per node, all started together; rank 0 on the head):

    python3 fabric_bandwidth.py --backend nccl --rank R --world-size N \\
        --master-addr HEAD_FABRIC_ADDRESS --master-port 29597 [--sizes-mb 16,64,256] \\
        [--iterations 10] [--warmup 3] [--device-index I] [--min-gbps 100 --ring "..."]

Each rank prints one JSON line: the backend, every size's time and bandwidth, the peak bus
bandwidth (``busbw_gbps``, Gb/s) and, for NCCL, the network transport it used (``IB`` or
``Socket``, from NCCL's own INIT/NET log). With ``--min-gbps`` the line also carries the
verdict against that figure and a message naming the ring (``--ring``) and likely causes.

Bus bandwidth follows nccl-tests: for all_reduce, busbw = size / time * 2(n-1)/n, the rate
each link carries whatever the number of ranks. Every rank reports the slowest rank's time.

Backends: ``nccl`` on GPU nodes (the GPU is --device-index, else LOCAL_RANK, else 0), ``gloo``
on CPU nodes. Keep the fabric interface in GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (the
collection sets both). Exit status 0 when measured (whatever the verdict), 2 on bad arguments,
1 when the measurement failed (the JSON line then has ``error``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

BITS_PER_BYTE = 8
GIGA = 1e9
FLOAT32_BYTES = 4
MIB = 1024 * 1024

LIKELY_CAUSES = (
    "MTU: both ends of the fabric need the same jumbo MTU (9000 on the CX7 ports)",
    "wrong interface: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME must name the fabric port, not the LAN",
    "link at a lower speed: `ethtool <interface>` should show 200000Mb/s on a DGX Spark CX7 port",
    "NCCL falling back to sockets (NET/Socket instead of NET/IB): RDMA devices missing from NCCL_IB_HCA, "
    "or the container lacks /dev/infiniband",
)


@dataclass
class SizeResult:
    """One message size: the slowest rank's mean time per all_reduce and the bandwidths."""

    bytes: int
    seconds: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass
class Report:
    """What one rank prints."""

    rank: int
    world_size: int
    backend: str
    host: str
    sizes: list[SizeResult] = field(default_factory=list)
    busbw_gbps: float = 0.0
    peak_bytes: int = 0
    nccl_net: str | None = None
    min_gbps: float | None = None
    ok: bool | None = None
    message: str = ""
    error: str = ""


def algorithm_bandwidth_gbps(size_bytes: int, seconds: float) -> float:
    """Bytes reduced per second, in Gb/s."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return size_bytes * BITS_PER_BYTE / seconds / GIGA


def bus_bandwidth_gbps(size_bytes: int, seconds: float, world_size: int) -> float:
    """all_reduce bus bandwidth in Gb/s: size/time * 2(n-1)/n (nccl-tests' definition)."""
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    return algorithm_bandwidth_gbps(size_bytes, seconds) * 2 * (world_size - 1) / world_size


def parse_sizes_mb(text: str) -> list[int]:
    """'1,16,256' (MiB) -> sizes in bytes, ascending, each a whole number of float32 elements."""
    sizes: list[int] = []
    for part in text.split(","):
        megabytes = float(part.strip())
        if megabytes <= 0:
            raise ValueError(f"sizes must be positive MiB, got {part.strip()!r}")
        elements = max(1, int(megabytes * MIB) // FLOAT32_BYTES)
        sizes.append(elements * FLOAT32_BYTES)
    return sorted(set(sizes))


def peak(sizes: list[SizeResult]) -> SizeResult:
    """The size with the highest bus bandwidth (the figure the gate compares)."""
    return max(sizes, key=lambda s: s.busbw_gbps)


def nccl_net_in_use(log_text: str) -> str | None:
    """NCCL's network transport from its INIT/NET log: 'IB', 'Socket', or None if unknown."""
    found = re.findall(r"NET/(IB|Socket)\b", log_text)
    if not found:
        return None
    return "IB" if "IB" in found else "Socket"


def verdict(busbw_gbps: float, min_gbps: float, ring: str, backend: str,
            nccl_net: str | None = None) -> tuple[bool, str]:
    """Whether the measured figure meets the expected one, and the sentence that says so."""
    transport = f", NCCL over NET/{nccl_net}" if nccl_net else ""
    measured = f"all_reduce bus bandwidth over {ring}: {busbw_gbps:.2f} Gb/s ({backend}{transport})"
    if busbw_gbps >= min_gbps:
        return True, f"{measured}, at least {min_gbps:g} Gb/s expected: pass"
    causes = list(LIKELY_CAUSES)
    if nccl_net == "Socket":
        causes.insert(0, "NCCL used NET/Socket, not RDMA: check NCCL_IB_HCA and /dev/infiniband in the container")
    return False, (f"{measured}, below the {min_gbps:g} Gb/s expected. Likely causes: "
                   + "; ".join(causes) + ".")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--backend", choices=["nccl", "gloo"], required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--sizes-mb", default="16,64,256", help="message sizes in MiB (default 16,64,256)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="seconds for the rendezvous and each step")
    parser.add_argument("--device-index", type=int, default=None, help="GPU for nccl (default LOCAL_RANK, else 0)")
    parser.add_argument("--min-gbps", type=float, default=None, help="expected bus bandwidth for the verdict")
    parser.add_argument("--ring", default="", help="how the verdict names the ring (hosts and addresses)")
    args = parser.parse_args(argv)
    if not 0 <= args.rank < args.world_size:
        parser.error(f"--rank {args.rank} is not in 0..{args.world_size - 1}")
    if args.iterations < 1 or args.warmup < 0:
        parser.error("--iterations must be at least 1 and --warmup at least 0")
    try:
        args.sizes = parse_sizes_mb(args.sizes_mb)
    except ValueError as error:
        parser.error(str(error))
    return args


def device_index(requested: int | None) -> int:
    """The GPU this process uses: --device-index, else LOCAL_RANK, else 0."""
    if requested is not None:
        return requested
    return int(os.environ.get("LOCAL_RANK", "0"))


def nccl_log_path() -> str | None:
    """Have NCCL log its INIT and NET lines to a file of ours (unless the caller set NCCL_DEBUG)."""
    if "NCCL_DEBUG" in os.environ:
        return None
    path = os.path.join(tempfile.gettempdir(), f"fabric-bandwidth-nccl-{os.getpid()}.log")
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=path)
    return path


def read_and_remove(path: str | None) -> str:
    if path is None or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    os.remove(path)
    return text


def time_all_reduce(torch: Any, dist: Any, size_bytes: int, args: argparse.Namespace, device: Any) -> SizeResult:
    """Mean time of one all_reduce of size_bytes, the slowest rank's, and its bandwidths."""
    tensor = torch.ones(size_bytes // FLOAT32_BYTES, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _round in range(args.warmup):
        dist.all_reduce(tensor)
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _round in range(args.iterations):
        dist.all_reduce(tensor)
    sync()
    elapsed = torch.tensor([(time.perf_counter() - started) / args.iterations], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = float(elapsed.item())
    return SizeResult(size_bytes, seconds, round(algorithm_bandwidth_gbps(size_bytes, seconds), 3),
                      round(bus_bandwidth_gbps(size_bytes, seconds, args.world_size), 3))


def measure(args: argparse.Namespace, report: Report) -> None:
    """Join the group, time every size, leave; fills report.sizes."""
    import torch
    import torch.distributed as dist

    if args.backend == "nccl":
        device = torch.device("cuda", device_index(args.device_index))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend, init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=args.timeout))
    try:
        report.sizes = [time_all_reduce(torch, dist, size, args, device) for size in args.sizes]
    finally:
        dist.destroy_process_group()


def finish(report: Report, args: argparse.Namespace) -> None:
    """Peak figure and, when an expected figure was given, the verdict."""
    best = peak(report.sizes)
    report.busbw_gbps, report.peak_bytes = best.busbw_gbps, best.bytes
    if args.min_gbps is not None:
        ring = args.ring or f"{args.world_size} ranks via {args.master_addr}:{args.master_port}"
        report.min_gbps = args.min_gbps
        report.ok, report.message = verdict(report.busbw_gbps, args.min_gbps, ring, args.backend, report.nccl_net)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    report = Report(args.rank, args.world_size, args.backend, socket.gethostname())
    log_path = nccl_log_path() if args.backend == "nccl" else None
    status = 0
    try:
        measure(args, report)
        report.nccl_net = nccl_net_in_use(read_and_remove(log_path)) if log_path else None
        finish(report, args)
    except Exception as error:  # noqa: BLE001 - reported as JSON, the caller names the ring
        report.error = f"{type(error).__name__}: {error}"
        status = 1
    print(json.dumps(asdict(report)), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
