"""Test-image patch: pipeline parallel on the CPU build of vLLM (0.32) in eager mode.

A pipeline stage after the first receives the previous stage's activations into
a buffer (GPUModelRunner.intermediate_tensors) that the engine's warm-up
allocates. The CPU worker skips that warm-up when nothing is compiled
(--enforce-eager, or TORCH_COMPILE_DISABLE, which this image needs for want of
a C++ compiler), so the first request on a layout with pipeline parallel > 1
fails with `assert self.intermediate_tensors is not None` and the engine dies.
The GPU build always warms up. This allocates the buffer on first use, the way
the warm-up's dummy run does; nothing else changes. The build fails here when
vLLM's code no longer matches, so a newer vLLM never goes unpatched silently.

Usage: python pipeline-stage-buffer.py  (with the image's venv Python)
"""
from __future__ import annotations

import pathlib

import vllm

RUNNER = pathlib.Path(vllm.__file__).parent / "v1" / "worker" / "gpu_model_runner.py"
ASSERTION = "        assert self.intermediate_tensors is not None\n"
ALLOCATION = (
    "        if self.intermediate_tensors is None:  # dgx-spark-vllm test image: see pipeline-stage-buffer.py\n"
    "            self.intermediate_tensors = self.model.make_empty_intermediate_tensors(\n"
    "                batch_size=self.max_num_tokens, dtype=self.model_config.dtype, device=self.device)\n"
)


def main() -> None:
    source = RUNNER.read_text()
    if source.count(ASSERTION) != 1:
        raise SystemExit(f"pipeline-stage-buffer: {RUNNER} no longer has the one assertion this patch replaces")
    RUNNER.write_text(source.replace(ASSERTION, ALLOCATION))


if __name__ == "__main__":
    main()
