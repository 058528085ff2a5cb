"""The four-node cluster of the scale scenario (molecule/scale/molecule.yml)."""
from __future__ import annotations

import json

FABRIC = {"spark1": "198.51.100.11", "spark2": "198.51.100.12",
          "spark3": "198.51.100.13", "spark4": "198.51.100.14"}
# vllm_serve's node rank: the head 0, then the workers in inventory order.
RANK = {name: rank for rank, name in enumerate(FABRIC)}


def serve_args(host) -> tuple[list[str], dict[str, str]]:
    """The serving container's arguments, and each --flag's value."""
    args = json.loads(host.check_output("docker inspect --format '{{json .Args}}' vllm-serve"))
    return args, {flag: args[i + 1] for i, flag in enumerate(args[:-1]) if flag.startswith("--")}
