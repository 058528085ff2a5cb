"""The tests that run real containers: what they need, and a failure (never a skip) without it.

tools/test builds the test images in the background while the other tests run, then runs these
(``-m images``). A suite that passed without running them would hide a broken pull or download,
so a missing Docker engine or image fails the test, with the command that provides it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The image names of tools/test-images.env (NAME=value lines).
TEST_IMAGES = dict(line.split("=", 1) for line in (REPO / "tools/test-images.env").read_text().splitlines()
                   if "=" in line and not line.startswith("#"))


def require_docker_images(*images: str, root: bool = False) -> None:
    """Fail the calling test unless Docker answers here and holds every one of ``images``."""
    if root and os.geteuid() != 0:
        pytest.fail("this test runs as root (it starts containers with published ports): run it as root")
    if shutil.which("docker") is None:
        pytest.fail("no docker command: tools/ensure-docker installs and starts the Docker engine")
    missing = [image for image in images
               if subprocess.run(["docker", "image", "inspect", image], capture_output=True,
                                 check=False).returncode != 0]
    if missing:
        pytest.fail(f"Docker does not answer or lacks {', '.join(missing)}: "
                    "tools/ensure-docker, then tools/build-test-images all")
