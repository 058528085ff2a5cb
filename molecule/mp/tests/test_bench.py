"""playbooks/bench.yml against the serving cluster, with a tiny load: the raw JSON of each
concurrency, the table and a real PNG on the controller, nothing changed on any node, and the
API key in none of its output (run with -v, so every command line and result is shown). Its
lengths fit the served context unless set (then refused when they do not fit, before anything is
sent), and a refused request shows the server's own words."""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from endpoint import call
from nodes import API_KEY, MODEL, NODES, node_host
from playbook_run import changed_per_node, failure, run_playbook

CONCURRENCY = [1, 4]
LOAD = {"bench_num_prompts": 8, "bench_input_len": 32, "bench_output_len": 16, "bench_concurrency": CONCURRENCY}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CONTAINERS = "docker ps --all --format '{{.Names}} {{.Image}}'"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk; AssertionError when it is no PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR", f"{path} has no IHDR chunk first"
    return struct.unpack(">II", data[16:24])


def test_bench_saves_results_table_and_chart_and_changes_no_node(tmp_path):
    hosts = {name: node_host(name) for name in NODES}
    containers_before = {n: h.check_output(CONTAINERS) for n, h in hosts.items()}
    out = tmp_path / "bench"

    result = run_playbook("playbooks/bench.yml", "-v", "-e", json.dumps({**LOAD, "bench_output_dir": str(out)}))
    output = result.stdout + result.stderr

    assert result.returncode == 0, failure(output)
    assert changed_per_node(output) == {name: 0 for name in NODES}, failure(output)
    assert API_KEY not in output
    assert {n: h.check_output(CONTAINERS) for n, h in hosts.items()} == containers_before

    runs = sorted(out.glob("tiny-llama/tp2-pp1-2nodes-mp/*"))
    assert len(runs) == 1, f"one dated folder per run expected under {out}: {runs}"
    folder = runs[0]
    assert re.fullmatch(r"\d{8}T\d{6}Z", folder.name)
    for concurrency in CONCURRENCY:
        data = json.loads((folder / f"concurrency-{concurrency}.json").read_text())
        assert data["max_concurrency"] == concurrency
        assert data["completed"] == LOAD["bench_num_prompts"]
        assert data["output_throughput"] > 0
        assert data["layout"] == "tp2-pp1-2nodes-mp"
        print(f"concurrency {concurrency}: {data['request_throughput']:.2f} req/s, "
              f"{data['output_throughput']:.1f} output tok/s, TTFT p50 {data['p50_ttft_ms']:.1f} ms")

    width, height = png_size(folder / "bench.png")
    assert width >= 600 and height >= 300
    from PIL import Image  # matplotlib's own dependency, in the controller venv

    with Image.open(folder / "bench.png") as image:
        image.verify()

    summary = (folder / "summary.txt").read_text()
    assert "TTFT p99 ms" in summary and "ITL p50 ms" in summary
    rows = [line.split() for line in summary.splitlines() if re.match(r"\s*\d+\s+\d", line)]
    assert [int(row[0]) for row in rows] == CONCURRENCY
    assert "output tok/s" in output, "the table is printed"
    print(summary)


def served_max_model_len() -> int:
    status, body = call("/v1/models")
    assert status == 200, body
    return int(next(m for m in body["data"] if m["id"] == MODEL)["max_model_len"])


def test_unset_lengths_fit_the_served_context(tmp_path):
    out = tmp_path / "bench"
    result = run_playbook("playbooks/bench.yml", "-e", json.dumps({"bench_num_prompts": 4, "bench_concurrency": [2],
                                                                   "bench_output_dir": str(out)}))
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    data = json.loads(next(out.glob("*/*/*/concurrency-2.json")).read_text())
    assert data["completed"] == 4, data.get("errors")
    lengths = re.search(r"concurrency 2, (\d+) prompt \+ (\d+) answer tokens", output)
    assert lengths, output[-3000:]
    prompt, answer = int(lengths.group(1)), int(lengths.group(2))
    assert prompt + answer <= served_max_model_len() and data["total_output_tokens"] == 4 * answer


def test_set_lengths_that_do_not_fit_are_refused_before_any_request(tmp_path):
    out = tmp_path / "bench"
    result = run_playbook("playbooks/bench.yml", "-e", json.dumps({"bench_input_len": 100000, "bench_output_len": 16,
                                                                   "bench_concurrency": [1],
                                                                   "bench_output_dir": str(out)}))
    flat = re.sub(r"\s+", " ", result.stdout + result.stderr)
    assert result.returncode != 0
    assert (f"bench_input_len=100000 + bench_output_len=16 = 100016 tokens, more than the served model's "
            f"max_model_len {served_max_model_len()}") in flat, flat[-3000:]
    assert "Run vllm bench serve at each concurrency" not in flat and not out.exists()


def test_a_refused_request_shows_the_server_s_own_words(tmp_path):
    """vLLM refuses a negative temperature (400); its client alone would record "Bad Request"."""
    result = run_playbook("playbooks/bench.yml", "-e", json.dumps({
        "bench_num_prompts": 2, "bench_input_len": 16, "bench_output_len": 4, "bench_concurrency": [1],
        "bench_extra_args": ["--temperature", "-1"], "bench_output_dir": str(tmp_path / "bench")}))
    flat = re.sub(r"\s+", " ", result.stdout + result.stderr)
    assert result.returncode != 0
    assert re.search(r"Bad Request: [^\"]*temperature", flat), flat[-3000:]
