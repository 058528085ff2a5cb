"""earlyoom's arguments as its Debian unit passes them: `ExecStart=/usr/bin/earlyoom $EARLYOOM_ARGS`
splits the variable at whitespace and quotes nothing, so each argument must be one word, and its
patterns must spare what keeps the node reachable while preferring vLLM's processes."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

VARS = Path(__file__).resolve().parents[2] / "roles/vllm_serve/vars/main.yml"


def earlyoom_args() -> list[str]:
    return [str(arg) for arg in yaml.safe_load(VARS.read_text())["__vllm_serve_earlyoom_args"]]


def option(name: str) -> str:
    args = earlyoom_args()
    return args[args.index(name) + 1]


def test_every_argument_survives_the_units_word_splitting() -> None:
    for arg in earlyoom_args():
        assert not re.search(r"[\s$'\"]", arg), arg


def test_it_never_picks_sshd_systemd_or_the_container_engine() -> None:
    avoid = re.compile(option("--avoid"))
    for name in ("sshd", "systemd", "systemd-journal", "dockerd", "containerd", "containerd-shim"):
        assert avoid.search(name), name
    assert not avoid.search("vllm")


def test_it_prefers_vllms_processes() -> None:
    prefer = re.compile(option("--prefer"))
    # vLLM names its engine processes VLLM::EngineCore, VLLM::Worker (15 characters of it).
    for name in ("vllm", "VLLM::EngineCor", "python3", "python", "raylet"):
        assert prefer.search(name), name
    assert not prefer.search("sshd")
