"""The bench_report module's functions on real `vllm bench serve` results (tests/fixtures/bench:
the CPU stand-in serving the tiny model, concurrency 1 and 4, and a run whose requests were all
refused): parsing, the table, the chart, and what it refuses."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ansible_collections.dgx_spark.vllm.plugins.modules.bench_report import (
    Row,
    check_row,
    format_table,
    parse_result,
    partial_failure,
    percentile,
    write_report,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "bench"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def results() -> list[dict]:
    return [{"concurrency": c, "json": fixture(f"concurrency-{c}.json")} for c in (4, 1)]


def test_a_result_becomes_its_row() -> None:
    data = json.loads(fixture("concurrency-4.json"))
    row = parse_result(4, fixture("concurrency-4.json"))
    assert row.concurrency == 4
    assert row.request_throughput == data["request_throughput"]
    assert row.output_throughput == data["output_throughput"] > 0
    assert (row.ttft_p50_ms, row.ttft_p99_ms) == (data["p50_ttft_ms"], data["p99_ttft_ms"])
    assert (row.itl_p50_ms, row.itl_p99_ms) == (data["p50_itl_ms"], data["p99_itl_ms"])
    assert (row.completed, row.num_prompts) == (8, 8)


def test_p50_falls_back_to_the_median_and_p99_must_be_there() -> None:
    assert percentile({"median_ttft_ms": 12.5}, "ttft", 50) == 12.5
    with pytest.raises(ValueError, match="no p99_itl_ms.*--metric-percentiles"):
        percentile({"median_itl_ms": 1.0}, "itl", 99)


@pytest.mark.parametrize("text", ["not json", "{}", '{"request_throughput": 1}', "[]"])
def test_what_is_no_result_is_refused_naming_the_concurrency(text: str) -> None:
    with pytest.raises(ValueError, match="concurrency 2: not a vllm bench serve result"):
        parse_result(2, text)


def test_a_run_where_no_request_succeeded_is_refused() -> None:
    text = fixture("no-request-succeeded.json")
    with pytest.raises(ValueError, match="concurrency 1: none of the 4 requests succeeded.*API key"):
        check_row(parse_result(1, text), text)


SERVER_TEXT = "Bad Request: This model's maximum context length is 256 tokens. However, your request has 1152 tokens."


def with_errors(name: str, completed: int, errors: list[str]) -> str:
    result = json.loads(fixture(name))
    result.update(completed=completed, errors=errors)
    return json.dumps(result)


def test_a_run_where_no_request_succeeded_shows_the_first_error_and_no_guess() -> None:
    text = with_errors("no-request-succeeded.json", 0, ["", SERVER_TEXT, "Bad Request"])
    with pytest.raises(ValueError) as refused:
        check_row(parse_result(1, text), text)
    assert str(refused.value) == ("concurrency 1: none of the 4 requests succeeded; the first failed with: "
                                  + SERVER_TEXT)


def test_a_run_where_some_requests_failed_warns_with_the_first_error() -> None:
    text = with_errors("concurrency-4.json", 6, ["", "", SERVER_TEXT])
    row = check_row(parse_result(4, text), text)
    assert partial_failure(row, text) == ("concurrency 4: 2 of the 8 requests failed; its figures are those of the 6 "
                                          "that succeeded; the first failed with: " + SERVER_TEXT)


def test_a_run_where_every_request_succeeded_warns_nothing() -> None:
    text = fixture("concurrency-4.json")
    assert partial_failure(parse_result(4, text), text) is None


def test_table_is_aligned_one_line_per_concurrency_ascending() -> None:
    rows = [parse_result(r["concurrency"], r["json"]) for r in results()]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["concurrency", "requests/s", "output", "tok/s", "TTFT", "p50", "ms", "TTFT", "p99",
                                "ms", "ITL", "p50", "ms", "ITL", "p99", "ms", "completed"]
    assert [line.split()[0] for line in lines[1:]] == ["1", "4"]
    assert len({len(line) for line in lines}) == 1
    assert lines[1].split()[-1] == "8/8"


def test_table_formats_figures_with_two_decimals() -> None:
    row = Row(2, 1.0, 123.456, 1.0, 2.0, 3.0, 4.0, 5, 6)
    assert format_table([row]).splitlines()[1].split() == ["2", "1.00", "123.46", "1.00", "2.00", "3.00", "4.00", "5/6"]


def test_report_writes_raw_json_table_and_a_png(tmp_path: Path) -> None:
    dest = tmp_path / "tiny-llama" / "tp2-pp1-2nodes-mp" / "20261130T104500Z"
    rows, table, files = write_report(results(), str(dest), "tiny-llama, tp2-pp1-2nodes-mp")
    assert [r.concurrency for r in rows] == [1, 4]
    assert sorted(Path(f).name for f in files) == ["bench.png", "concurrency-1.json", "concurrency-4.json",
                                                   "summary.txt"]
    assert json.loads((dest / "concurrency-4.json").read_text()) == json.loads(fixture("concurrency-4.json"))
    assert (dest / "summary.txt").read_text() == f"tiny-llama, tp2-pp1-2nodes-mp\n\n{table}\n"
    png = (dest / "bench.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (1100, 420)
    from matplotlib.image import imread

    assert imread(dest / "bench.png").shape[:2] == (420, 1100)
