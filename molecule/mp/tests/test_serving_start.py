"""The floor of restarting serving: both nodes' units restarted at once by hand, to the first completion.

The figure restart-serving (playbooks/serve.yml) is compared with, and the mp executor's
counterpart of the ray scenario's start-to-first-completion figure.
"""
from __future__ import annotations

import threading
import time

from endpoint import seconds_to_first_completion
from nodes import NODES, node_host


def test_units_restarted_by_hand_to_the_first_completion(record_property):
    hosts = [node_host(name) for name in NODES]
    started = time.monotonic()
    restarts = [threading.Thread(target=host.check_output, args=("systemctl restart vllm-serve",)) for host in hosts]
    for restart in restarts:
        restart.start()
    for restart in restarts:
        restart.join()
    seconds = seconds_to_first_completion(started, deadline=300)
    record_property("mp_units_start_to_first_completion_seconds", seconds)
    print(f"mp executor: both vllm-serve units restarted by hand to the first completion: {seconds} s")
    assert seconds is not None
