"""Rendezvous over the Ray cluster: one task per node, torch.distributed + gloo.

Run inside the head's Ray container: docker exec -i ray-head python - [MASTER] [SECONDS]

A STRICT_SPREAD placement group of one {CPU: 1} bundle per node puts one task
on every node (CPU, not GPU: vLLM's workers hold the GPUs while it serves).
Each task joins a gloo process group at MASTER (default: the MASTER_ADDR the
units gave the task's node) and all-reduces rank + 1. Prints
one JSON line with each rank's node, interface and sum; exits 1 with the error
when the rendezvous fails (e.g. MASTER is the head's management address).
"""
import datetime
import json
import sys
import time

import ray
from ray.util.placement_group import placement_group, placement_group_table
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

PORT = 29511  # not vLLM's 29501


# max_calls=1: the worker process exits after the task, so a failed rendezvous
# cannot leave its TCPStore listening for the next run.
@ray.remote(num_cpus=1, max_calls=1)
def join_and_reduce(rank: int, world: int, master: str, seconds: int) -> dict:
    import os

    import torch
    import torch.distributed as dist

    address = master or os.environ["MASTER_ADDR"]
    dist.init_process_group("gloo", init_method=f"tcp://{address}:{PORT}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=seconds))
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    dist.destroy_process_group()
    return {"rank": rank, "node": ray.util.get_node_ip_address(), "master": address,
            "vllm_host_ip": os.environ.get("VLLM_HOST_IP"),
            "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"), "sum": total.item()}


def main() -> int:
    master = sys.argv[1] if len(sys.argv) > 1 else ""
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    ray.init(address="auto", log_to_driver=False)
    world = len([n for n in ray.nodes() if n["Alive"]])
    group = placement_group([{"CPU": 1}] * world, strategy="STRICT_SPREAD")
    ray.get(group.ready(), timeout=60)
    # Rank 0 hosts the TCPStore at MASTER_ADDR, the head's address: give rank 0
    # to the bundle Ray placed on this (the head's) node, whatever its index.
    head = ray.get_runtime_context().get_node_id()
    bundles = placement_group_table(group)["bundles_to_node_id"]
    order = sorted(bundles, key=lambda index: (bundles[index] != head, index))
    started = time.monotonic()
    refs = [join_and_reduce.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        group, placement_group_bundle_index=index)).remote(rank, world, master, seconds)
        for rank, index in enumerate(order)]
    try:
        results = ray.get(refs, timeout=seconds * 3)
    except Exception as error:  # report any failure of the rendezvous as data
        print(json.dumps({"ok": False, "seconds": round(time.monotonic() - started, 1),
                          "error": str(error)[-2000:]}))
        return 1
    print(json.dumps({"ok": True, "seconds": round(time.monotonic() - started, 1),
                      "world": world, "ranks": results}))
    return 0


sys.exit(main())
