"""The CPU communicator for a tensor-parallel group that spans nodes."""

from __future__ import annotations

import torch.distributed
from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator
from vllm.utils.network_utils import get_ip


class MultiNodeCpuCommunicator(CpuCommunicator):
    """vLLM's CPU communicator, with its shared-memory shortcut kept to one node.

    The CPU build all-reduces through shared memory when every rank of a group
    agrees on one group name, which it derives from the rendezvous port alone:
    it assumes the group lives on one machine. Under the Ray executor the ranks
    of a group are on different nodes, agree on that name, and the remote rank
    fails to open the shared memory ("open shm in SHMManager failed"). So the
    group also has to share a host address (each worker's VLLM_HOST_IP, the
    node's fabric address); otherwise vLLM's own fallback, torch.distributed
    over the fabric (gloo), carries the traffic, as NCCL does between Sparks.
    """

    def _all_group_ranks_share_shm_group_name(self) -> bool:
        hosts: list[str] = [""] * self.world_size
        torch.distributed.all_gather_object(hosts, get_ip(), group=self.device_group)
        return len(set(hosts)) == 1 and super()._all_group_ranks_share_shm_group_name()
