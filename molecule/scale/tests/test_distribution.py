"""The distribution chain on four nodes (controller side): the head sent the image once.

The head's fabric interface counts every byte the head sent since its container started: the
first converge's image and model, along the chain to three workers, and a few MB of fabric gate
and rendezvous traffic. Sending to each worker itself, the head would have sent the image three
times. Runs before the layout change (test_layouts.py), which sends nothing new.
"""
from __future__ import annotations

from nodes import FABRIC, HEAD, interface_of, node_host

IMAGE = "dgx-spark-vllm-test/serving-cpu:latest"
MODEL_DIR = "/var/lib/dgx-spark-vllm/models/tiny-llama"


def test_the_head_sent_the_image_once_for_three_workers():
    head = node_host(HEAD)
    interface = interface_of(head, FABRIC[HEAD])
    sent = int(head.check_output(f"cat /sys/class/net/{interface}/statistics/tx_bytes"))
    image = int(head.check_output("docker image inspect --format '{{.Size}}' %s", IMAGE))
    model = int(head.check_output(f"du -sb {MODEL_DIR} | cut -f1"))
    ratio = (sent - model) / image
    print(f"head sent on the fabric {sent / 1e9:.2f} GB for an image of {image / 1e9:.2f} GB and a model of "
          f"{model / 1e6:.1f} MB to 3 workers: {ratio:.2f} x the image")
    assert ratio <= 1.1, f"the head sent {ratio:.2f} x the image"
