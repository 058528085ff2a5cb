#!/usr/bin/python
# Copyright: dgx_spark.vllm maintainers
# Apache License 2.0 (see LICENSE)
"""Save `vllm bench serve` results on the controller: raw JSON, a table and a chart."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_report
short_description: Save vllm bench serve results on the controller, with a table and a PNG chart
version_added: "0.1.0"
description:
  - Takes the JSON that C(vllm bench serve --save-result) wrote, one per concurrency, and saves each verbatim
    as C(concurrency-<N>.json) under O(dest), with C(summary.txt) (a table of concurrency, requests/s, output
    tokens/s, TTFT p50/p99 and ITL p50/p99) and C(bench.png) (throughput and latency against concurrency).
  - Runs on the controller (a play on C(localhost)); needs matplotlib there (requirements.txt), drawn with the
    Agg backend (no display).
  - playbooks/bench.yml runs it with what the head's benchmark containers printed.
options:
  results:
    description:
      - One entry per concurrency.
    type: list
    elements: dict
    required: true
    suboptions:
      concurrency:
        description: The C(--max-concurrency) of that run.
        type: int
        required: true
      json:
        description: The result JSON text that vllm bench serve saved for that run.
        type: str
        required: true
  dest:
    description: Folder to write into (created); an absolute path after C(~) expansion.
    type: path
    required: true
  title:
    description: Chart title, e.g. model, layout and date.
    type: str
    default: vllm bench serve
author:
  - dgx_spark.vllm maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Save the results of every concurrency, the table and the chart
  dgx_spark.vllm.bench_report:
    results:
      - concurrency: 1
        json: "{{ run_c1.stdout }}"
      - concurrency: 4
        json: "{{ run_c4.stdout }}"
    dest: /home/me/dgx-spark-vllm-bench/tiny-llama/tp2-pp1-2nodes-mp/20261130T104500Z
    title: tiny-llama, tp2-pp1-2nodes-mp, 2026-11-30 10:45 UTC
  register: report

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ report.table }}"
"""

RETURN = r"""
table:
  description: The summary table, as printed and saved in summary.txt.
  returned: success
  type: str
  sample: |
    concurrency  requests/s  output tok/s  TTFT p50 ms  TTFT p99 ms  ITL p50 ms  ITL p99 ms  completed
              1        3.10         49.60        20.12        31.50       18.40       25.10        8/8
rows:
  description: One row per concurrency, ascending, with the figures of the table.
  returned: success
  type: list
  elements: dict
  sample:
    - concurrency: 1
      request_throughput: 3.1
      output_throughput: 49.6
      ttft_p50_ms: 20.12
      ttft_p99_ms: 31.5
      itl_p50_ms: 18.4
      itl_p99_ms: 25.1
      completed: 8
      num_prompts: 8
files:
  description: Every file written, absolute paths.
  returned: success
  type: list
  elements: str
dest:
  description: The folder written into (absolute).
  returned: success
  type: str
"""

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from ansible.module_utils.basic import AnsibleModule

COLUMNS: tuple[tuple[str, str, str], ...] = (
    # header, Row attribute, format
    ("concurrency", "concurrency", "{:d}"),
    ("requests/s", "request_throughput", "{:.2f}"),
    ("output tok/s", "output_throughput", "{:.2f}"),
    ("TTFT p50 ms", "ttft_p50_ms", "{:.2f}"),
    ("TTFT p99 ms", "ttft_p99_ms", "{:.2f}"),
    ("ITL p50 ms", "itl_p50_ms", "{:.2f}"),
    ("ITL p99 ms", "itl_p99_ms", "{:.2f}"),
)


@dataclass(frozen=True)
class Row:
    """The figures of one concurrency that the table and the chart show."""

    concurrency: int
    request_throughput: float
    output_throughput: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    completed: int
    num_prompts: int


def percentile(result: dict[str, Any], metric: str, p: int) -> float:
    """p<P>_<metric>_ms of a result; p50 falls back to median_<metric>_ms (always saved)."""
    key = f"p{p}_{metric}_ms"
    if key in result:
        return float(result[key])
    if p == 50 and f"median_{metric}_ms" in result:
        return float(result[f"median_{metric}_ms"])
    raise ValueError(f"the result has no {key}: run vllm bench serve with --percentile-metrics including "
                     f"{metric} and --metric-percentiles including {p}")


def parse_result(concurrency: int, text: str) -> Row:
    """One vllm bench serve result JSON -> its Row; ValueError naming the concurrency if malformed."""
    try:
        result = json.loads(text)
        return Row(concurrency=concurrency,
                   request_throughput=float(result["request_throughput"]),
                   output_throughput=float(result["output_throughput"]),
                   ttft_p50_ms=percentile(result, "ttft", 50), ttft_p99_ms=percentile(result, "ttft", 99),
                   itl_p50_ms=percentile(result, "itl", 50), itl_p99_ms=percentile(result, "itl", 99),
                   completed=int(result["completed"]), num_prompts=int(result.get("num_prompts", 0)))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"concurrency {concurrency}: not a vllm bench serve result ({error})") from error


def first_error(text: str) -> str:
    """The first failed request's error as the result saved it (with bench_serve.py: the server's own text)."""
    errors = [str(e).strip() for e in json.loads(text).get("errors", []) or [] if e and str(e).strip()]
    return errors[0][:600] if errors else ""


def check_row(row: Row, text: str) -> Row:
    """A run in which no request succeeded measured nothing: ValueError with the first request's error."""
    if row.completed > 0:
        return row
    error = first_error(text)
    if error:
        raise ValueError(f"concurrency {row.concurrency}: none of the {row.num_prompts} requests succeeded; the first "
                         f"failed with: {error}")
    raise ValueError(f"concurrency {row.concurrency}: none of the {row.num_prompts} requests succeeded, and the result "
                     "names no error. Is serving up (playbooks/serve.yml), the API key in the head's secrets file, the "
                     "model name the served one?")


def partial_failure(row: Row, text: str) -> str | None:
    """A run in which some requests failed measured the others only: a warning with the first error."""
    if row.num_prompts <= row.completed or row.completed == 0:
        return None
    error = first_error(text)
    return (f"concurrency {row.concurrency}: {row.num_prompts - row.completed} of the {row.num_prompts} requests "
            f"failed; its figures are those of the {row.completed} that succeeded"
            + (f"; the first failed with: {error}" if error else ""))


def format_table(rows: list[Row]) -> str:
    """A fixed-width table, one line per concurrency, ascending."""
    headers = [column[0] for column in COLUMNS] + ["completed"]
    cells = [[fmt.format(getattr(row, attr)) for _header, attr, fmt in COLUMNS] + [f"{row.completed}/{row.num_prompts}"]
             for row in sorted(rows, key=lambda r: r.concurrency)]
    widths = [max(len(line[i]) for line in [headers, *cells]) for i in range(len(headers))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in [headers, *cells])


def draw_chart(rows: list[Row], title: str, path: str) -> None:
    """Throughput (left) and latency (right) against concurrency, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: r.concurrency)
    x = [row.concurrency for row in rows]
    figure, (throughput, latency) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100)
    throughput.plot(x, [r.output_throughput for r in rows], "o-", label="output tokens/s")
    throughput.set_ylabel("output tokens/s")
    requests = throughput.twinx()
    requests.plot(x, [r.request_throughput for r in rows], "s--", color="tab:orange", label="requests/s")
    requests.set_ylabel("requests/s")
    throughput.set_title("Throughput")
    throughput.legend(handles=throughput.get_lines() + requests.get_lines(), loc="best")
    for label, attr, style in (("TTFT p50", "ttft_p50_ms", "o-"), ("TTFT p99", "ttft_p99_ms", "o--"),
                               ("ITL p50", "itl_p50_ms", "s-"), ("ITL p99", "itl_p99_ms", "s--")):
        latency.plot(x, [getattr(r, attr) for r in rows], style, label=label)
    latency.set_ylabel("ms")
    latency.set_title("Latency")
    latency.legend(loc="best")
    for axes in (throughput, requests, latency):
        axes.set_ylim(bottom=0)
    for axes in (throughput, latency):
        axes.set_xlabel("concurrency (max concurrent requests)")
        axes.set_xticks(x)
        axes.grid(True, alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def write_report(results: list[dict[str, Any]], dest: str, title: str) -> tuple[list[Row], str, list[str]]:
    """Parse every result, then write the raw JSON, summary.txt and bench.png into dest."""
    rows = [check_row(parse_result(int(item["concurrency"]), item["json"]), item["json"]) for item in results]
    os.makedirs(dest, exist_ok=True)
    files: list[str] = []
    for item in results:
        path = os.path.join(dest, f"concurrency-{int(item['concurrency'])}.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(item["json"].strip() + "\n")
        files.append(path)
    table = format_table(rows)
    summary = os.path.join(dest, "summary.txt")
    with open(summary, "w", encoding="utf-8") as handle:
        handle.write(f"{title}\n\n{table}\n")
    chart = os.path.join(dest, "bench.png")
    draw_chart(rows, title, chart)
    return sorted(rows, key=lambda r: r.concurrency), table, files + [summary, chart]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "results": {"type": "list", "elements": "dict", "required": True, "options": {
                "concurrency": {"type": "int", "required": True},
                "json": {"type": "str", "required": True},
            }},
            "dest": {"type": "path", "required": True},
            "title": {"type": "str", "default": "vllm bench serve"},
        },
        supports_check_mode=True,
    )
    dest = module.params["dest"]
    if not os.path.isabs(dest):
        module.fail_json(msg=f"dest must be an absolute path (or start with ~), got {dest!r}")
    try:
        rows = [check_row(parse_result(int(i["concurrency"]), i["json"]), i["json"]) for i in module.params["results"]]
    except ValueError as error:
        module.fail_json(msg=str(error))
    for item, row in zip(module.params["results"], rows):
        warning = partial_failure(row, item["json"])
        if warning:
            module.warn(warning)
    if module.check_mode:
        module.exit_json(changed=True, table=format_table(rows), rows=[asdict(r) for r in rows], files=[], dest=dest)
    try:
        rows, table, files = write_report(module.params["results"], dest, module.params["title"])
    except ImportError as error:
        module.fail_json(msg=f"matplotlib is needed on the controller for the chart ({error}): "
                             "pip install -r requirements.txt")
    module.exit_json(changed=True, table=table, rows=[asdict(r) for r in rows], files=files, dest=dest)


if __name__ == "__main__":
    main()
