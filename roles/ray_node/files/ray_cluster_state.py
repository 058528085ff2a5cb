"""Print, as one JSON line, the live Ray nodes and the GPUs they offer.

Run inside the head's container (`docker exec -i ray-head python3 -`): it joins
the local cluster as a short-lived driver and reads the node table.
"""
import json
import logging

import ray

ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
alive = [node for node in ray.nodes() if node["Alive"]]
print(json.dumps({
    "addresses": sorted(node["NodeManagerAddress"] for node in alive),
    "gpus": sum(node["Resources"].get("GPU", 0) for node in alive),
}))
