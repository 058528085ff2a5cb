"""vLLM platform plugin of the test serving image: the CPU build under Ray.

A stand-in, like the CPU build of vLLM itself. On a DGX Spark the serving image
runs vLLM's CUDA platform, and vLLM's Ray executor places one worker on each
Ray node's GPU (``ray start --num-gpus=1``). vLLM's CPU platform has no Ray
device key, so its Ray executor refuses it ("current platform cpu does not
support ray"), and the Ray path the collection deploys could not serve in the
container cluster. This plugin activates exactly where vLLM would pick its CPU
platform and hands it the one thing missing (see ``platform.py``); every other
line of the Ray executor, the placement group and the workers is upstream code.

Loaded by vLLM through the ``vllm.platform_plugins`` entry point.
"""

from __future__ import annotations


def register() -> str | None:
    """Return the platform's qualified name where vLLM would use its CPU platform."""
    from vllm.platforms import cpu_platform_plugin

    if cpu_platform_plugin() is None:
        return None
    return "dgx_spark_cpu_ray.platform.CpuRayPlatform"
