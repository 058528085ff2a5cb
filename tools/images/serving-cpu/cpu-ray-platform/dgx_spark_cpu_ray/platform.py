"""The CPU platform with a Ray device: Ray's logical GPU stands for a CPU worker."""

from __future__ import annotations

from vllm.platforms.cpu import CpuPlatform


class CpuRayPlatform(CpuPlatform):
    """vLLM's CPU platform, schedulable by vLLM's Ray executor.

    ray_device_key: the Ray resource one worker takes. The nodes of the test
        cluster declare one logical GPU each (``--num-gpus``, as a Spark does
        for its GB10), so the executor's placement group gets one bundle per
        node and one TP worker lands on each node, exactly as on Sparks.
    device_control_env_var: the executor writes each worker's Ray GPU IDs into
        it. The CPU platform's own variable (CPU_VISIBLE_MEMORY_NODES) would
        turn those IDs into NUMA node numbers and pin memory wrongly, so the
        IDs go where Ray itself puts them for a GPU actor,
        CUDA_VISIBLE_DEVICES, which the CPU kernels ignore.
    get_device_communicator_cls: a TP group across nodes must not take the CPU
        build's one-machine shared-memory path (communicator.py).
    """

    ray_device_key: str = "GPU"
    device_control_env_var: str = "CUDA_VISIBLE_DEVICES"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "dgx_spark_cpu_ray.communicator.MultiNodeCpuCommunicator"
