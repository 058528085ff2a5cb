"""Print, as one JSON line, vLLM's live Ray workers as Ray's GCS sees them.

Run inside the head's Ray container (`docker exec -i ray-head python -`): for
each live vLLM Ray worker actor (RayWorkerProc, or RayWorkerWrapper of the v1
executor), the address it advertises, the address of
the Ray node it runs on, and its process ID on that node's container.
"""
import json
import logging

import ray
from ray._private import state

ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
node_address = {node["NodeID"]: node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
workers = [
    {
        "address": actor["Address"]["IPAddress"],
        "node": node_address.get(actor["Address"]["NodeID"], "dead node " + actor["Address"]["NodeID"]),
        "pid": actor["Pid"],
    }
    for actor in state.actors().values()
    if actor["State"] == "ALIVE" and actor["ActorClassName"].startswith("RayWorker")
]
print(json.dumps(sorted(workers, key=lambda worker: worker["node"])))
