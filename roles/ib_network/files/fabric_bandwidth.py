"""Measure the fabric's all_gather bus bandwidth with torch.distributed, one process per node.

Usage (one process per node, all started together; rank 0 on the head):

    python3 fabric_bandwidth.py --backend nccl --rank R --world-size N \\
        --master-addr HEAD_FABRIC_ADDRESS --master-port 29597 [--sizes-mb 512,1024,2048,4096] \\
        [--iterations 10] [--warmup 3] [--device-index I] [--min-busbw 21.875 --ring "..."] [--require-ib]

Each rank prints one JSON line: the backend, every size's time and bandwidths (GB/s, 10^9 bytes
per second, as nccl-tests prints them), the peak bus bandwidth (``busbw``) and, for NCCL, the
network transport it used (``IB`` or ``Socket``, from NCCL's own INIT/NET log, always captured).
With ``--min-busbw`` the line also carries the verdict against that figure and a message naming
the ring (``--ring``) and likely causes; with ``--require-ib`` (a node with RDMA devices) NCCL on
anything but NET/IB fails the verdict whatever the figure.

Bandwidths follow nccl-tests: a size is the gathered (output) buffer, each rank contributing
size/n; algbw = size / time and, for all_gather, busbw = algbw * (n-1)/n, the rate each link
carries whatever the number of ranks. Every rank reports the slowest rank's time. Sizes are
bounded (at most MAX_SIZE_MIB each): a larger buffer can exhaust a GB10's unified memory.

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

GIGA = 1e9
FLOAT32_BYTES = 4
MIB = 1024 * 1024
MAX_SIZE_MIB = 4096

LIKELY_CAUSES = (
    "MTU: both ends of the fabric need the same jumbo MTU (9000 on the CX7 ports)",
    "wrong interface: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME must name the fabric port, not the LAN",
    "link at a lower speed: `ethtool <interface>` should show 200000Mb/s on a DGX Spark CX7 port",
    "NCCL falling back to sockets (NET/Socket instead of NET/IB): RDMA devices missing from NCCL_IB_HCA, "
    "or the container lacks /dev/infiniband",
)


@dataclass
class SizeResult:
    """One message size: the slowest rank's mean time per all_gather and the bandwidths (GB/s)."""

    bytes: int
    seconds: float
    algbw: float
    busbw: float


@dataclass
class Report:
    """What one rank prints."""

    rank: int
    world_size: int
    backend: str
    host: str
    sizes: list[SizeResult] = field(default_factory=list)
    unit: str = "GB/s"
    busbw: float = 0.0
    peak_bytes: int = 0
    nccl_net: str | None = None
    min_busbw: float | None = None
    ok: bool | None = None
    message: str = ""
    error: str = ""


def algorithm_bandwidth(size_bytes: int, seconds: float) -> float:
    """Bytes gathered per second, in GB/s."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return size_bytes / seconds / GIGA


def bus_bandwidth(size_bytes: int, seconds: float, world_size: int) -> float:
    """all_gather bus bandwidth in GB/s: size/time * (n-1)/n (nccl-tests' definition)."""
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    return algorithm_bandwidth(size_bytes, seconds) * (world_size - 1) / world_size


def parse_sizes_mb(text: str, world_size: int = 1) -> list[int]:
    """'512,4096' (MiB) -> gathered sizes in bytes, ascending, each world_size equal float32 parts."""
    sizes: list[int] = []
    for part in text.split(","):
        megabytes = float(part.strip())
        if not 0 < megabytes <= MAX_SIZE_MIB:
            raise ValueError(f"sizes must be more than 0 and at most {MAX_SIZE_MIB} MiB, got {part.strip()!r}")
        elements = max(1, int(megabytes * MIB) // FLOAT32_BYTES // world_size)
        sizes.append(elements * world_size * FLOAT32_BYTES)
    return sorted(set(sizes))


def peak(sizes: list[SizeResult]) -> SizeResult:
    """The size with the highest bus bandwidth (the figure the gate compares)."""
    return max(sizes, key=lambda s: s.busbw)


def nccl_net_in_use(log_text: str) -> str | None:
    """NCCL's network transport from its INIT/NET log: 'IB', 'Socket', or None if it did not say.

    What NCCL chose ("Using network X"), else what its channels run over ("via NET/X/0"), else
    which transport announced its devices ("NET/X : Using [0]..."); any Socket among the first
    two counts as Socket: a ring is as fast as its slowest hop."""
    for pattern in (r"Using network (IB|Socket)\b", r"via NET/(IB|Socket)\b", r"NET/(IB|Socket) : Using \["):
        found = set(re.findall(pattern, log_text))
        if found:
            return "Socket" if "Socket" in found else "IB"
    return None


def verdict(busbw: float, min_busbw: float, ring: str, backend: str,
            nccl_net: str | None = None, require_ib: bool = False) -> tuple[bool, str]:
    """Whether the measured figure (GB/s) meets the expected one, and the sentence that says so.

    With require_ib (NCCL on a node with RDMA devices) anything but NET/IB fails, whatever the figure."""
    transport = f", NCCL over NET/{nccl_net}" if nccl_net else ""
    measured = f"all_gather bus bandwidth over {ring}: {busbw:.2f} GB/s ({backend}{transport})"
    if require_ib and nccl_net != "IB":
        said = "used NET/Socket" if nccl_net == "Socket" else "did not log its network (NET/IB expected)"
        return False, (f"{measured}: NCCL {said} on a node with RDMA devices, not RDMA. Check NCCL_IB_HCA "
                       "(dgx_spark_rdma_devices), that the container has /dev/infiniband, and the image's NCCL.")
    if busbw >= min_busbw:
        return True, f"{measured}, at least {min_busbw:g} GB/s expected: pass"
    return False, (f"{measured}, below the {min_busbw:g} GB/s expected. Likely causes: "
                   + "; ".join(LIKELY_CAUSES) + ".")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--backend", choices=["nccl", "gloo"], required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--sizes-mb", default="512,1024,2048,4096",
                        help=f"gathered sizes in MiB, at most {MAX_SIZE_MIB} each (default 512,1024,2048,4096)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="seconds for the rendezvous and each step")
    parser.add_argument("--device-index", type=int, default=None, help="GPU for nccl (default LOCAL_RANK, else 0)")
    parser.add_argument("--min-busbw", type=float, default=None, help="expected bus bandwidth (GB/s) for the verdict")
    parser.add_argument("--require-ib", action="store_true", help="fail unless NCCL used NET/IB (RDMA)")
    parser.add_argument("--ring", default="", help="how the verdict names the ring (hosts and addresses)")
    args = parser.parse_args(argv)
    if not 0 <= args.rank < args.world_size:
        parser.error(f"--rank {args.rank} is not in 0..{args.world_size - 1}")
    if args.iterations < 1 or args.warmup < 0:
        parser.error("--iterations must be at least 1 and --warmup at least 0")
    try:
        args.sizes = parse_sizes_mb(args.sizes_mb, args.world_size)
    except ValueError as error:
        parser.error(str(error))
    return args


def device_index(requested: int | None) -> int:
    """The GPU this process uses: --device-index, else LOCAL_RANK, else 0."""
    if requested is not None:
        return requested
    return int(os.environ.get("LOCAL_RANK", "0"))


def nccl_log_path() -> str:
    """Have NCCL log its INIT and NET lines to a file of ours (the gate reads its transport there)."""
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


def time_all_gather(torch: Any, dist: Any, size_bytes: int, args: argparse.Namespace, device: Any) -> SizeResult:
    """Mean time of one all_gather into size_bytes, the slowest rank's, and its bandwidths."""
    output = torch.empty(size_bytes // FLOAT32_BYTES, dtype=torch.float32, device=device)
    parts = list(output.chunk(args.world_size))
    mine = torch.ones_like(parts[args.rank])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def gather() -> None:
        # NCCL gathers into one buffer; gloo only into a list of tensors (views of the same buffer).
        if args.backend == "nccl":
            dist.all_gather_into_tensor(output, mine)
        else:
            dist.all_gather(parts, mine)

    for _round in range(args.warmup):
        gather()
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _round in range(args.iterations):
        gather()
    sync()
    elapsed = torch.tensor([(time.perf_counter() - started) / args.iterations], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = float(elapsed.item())
    return SizeResult(size_bytes, seconds, round(algorithm_bandwidth(size_bytes, seconds), 3),
                      round(bus_bandwidth(size_bytes, seconds, args.world_size), 3))


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
        report.sizes = [time_all_gather(torch, dist, size, args, device) for size in args.sizes]
    finally:
        dist.destroy_process_group()


def finish(report: Report, args: argparse.Namespace) -> None:
    """Peak figure and, when an expected figure was given, the verdict."""
    best = peak(report.sizes)
    report.busbw, report.peak_bytes = best.busbw, best.bytes
    if args.min_busbw is not None:
        ring = args.ring or f"{args.world_size} ranks via {args.master_addr}:{args.master_port}"
        report.min_busbw = args.min_busbw
        report.ok, report.message = verdict(report.busbw, args.min_busbw, ring, args.backend, report.nccl_net,
                                            args.require_ib and args.backend == "nccl")


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
