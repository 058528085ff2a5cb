"""roles/vllm_serve/files/check_serve_command.py in the serving test image (real vLLM, on CPU), on a
tiny generated model: the command a unit would run is accepted, and the mistakes the issue measured
(a flag's value of the wrong type, an impossible max_model_len) are refused with vLLM's own words,
as role vllm_serve runs it (`docker run -i ... python3 - serve ...`, the script on stdin)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.images import REPO, TEST_IMAGES

IMAGE = TEST_IMAGES["SERVING_IMAGE"]
CHECK = REPO / "roles/vllm_serve/files/check_serve_command.py"

pytestmark = pytest.mark.images(IMAGE)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama of the container cluster, generated offline in the serving image."""
    out = tmp_path_factory.mktemp("model")
    subprocess.run(["docker", "run", "--rm", "--network", "none",
                    "--volume", f"{REPO / 'tools/make-tiny-model.py'}:/make-tiny-model.py:ro",
                    "--volume", f"{out}:/out", IMAGE, "python", "/make-tiny-model.py", "/out/tiny-llama"],
                   check=True, capture_output=True, timeout=600)
    return out / "tiny-llama"


def check(model: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", "--volume", f"{model}:{model}:ro",
                           "--entrypoint", "python3", IMAGE, "-", "serve", str(model),
                           "--served-model-name", "tiny-llama", "--tensor-parallel-size", "1", *flags],
                          input=CHECK.read_text(), capture_output=True, text=True, timeout=600, check=False)


def test_a_command_vllm_accepts_passes(model: Path) -> None:
    result = check(model, "--max-model-len", "256", "--max-num-seqs", "4")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "vLLM accepts the command" in result.stdout


@pytest.mark.parametrize("flags, says", [
    (("--max-num-seqs", "$HOME"), "argument --max-num-seqs: invalid int value: '$HOME'"),
    (("--no-such-flag", "1"), "unrecognized arguments: --no-such-flag"),
    (("--max-model-len", "-5"), "max_model_len"),
    (("--max-model-len", "99999"), "max_model_len"),
])
def test_a_command_vllm_refuses_fails_with_vllms_words(model: Path, flags: tuple[str, ...], says: str) -> None:
    result = check(model, *flags)
    assert result.returncode not in (0, 3), result.stdout
    assert says in result.stderr, result.stderr[-3000:]
