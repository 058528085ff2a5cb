"""Files in Prometheus' text format (what the node exporter's textfile collector reads): checked by
promtool's own parser and linter, and read back sample by sample for the tests' assertions."""
from __future__ import annotations

import re
from subprocess import run  # bound here: a test may replace subprocess.run for the code it tests

from support.role_files import REPO

Series = tuple[str, tuple[tuple[str, str], ...]]  # name, sorted (label, value) pairs

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\\n]|\\[\\"n])*)"(?:,|$)')
UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def promtool() -> str:
    """tools/ensure-promtool's promtool: a test that cannot get it fails."""
    found = run([str(REPO / "tools/ensure-promtool")], capture_output=True, text=True, check=False)
    assert found.returncode == 0, f"tools/ensure-promtool found no promtool: {found.stderr}"
    return found.stdout.strip()


def check_metrics(text: str) -> None:
    """promtool check metrics: parses the text format and lints it (names, HELP, counters' _total)."""
    result = run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"promtool check metrics: {result.stdout}{result.stderr}\n{text}"


def samples(text: str) -> dict[Series, float]:
    """Every sample of the text, strictly parsed: a line that is neither a comment nor a sample fails."""
    found: dict[Series, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        sample = SAMPLE.match(line)
        assert sample, f"not a sample line: {line!r}"
        labels, rest = [], sample.group("labels") or ""
        while rest:
            label = LABEL.match(rest)
            assert label, f"malformed labels in {line!r}"
            value = re.sub(r'\\[\\"n]', lambda escaped: UNESCAPE[escaped.group(0)], label.group("value"))
            labels.append((label.group("key"), value))
            rest = rest[label.end():]
        series = (sample.group("name"), tuple(sorted(labels)))
        assert series not in found, f"{series} twice"
        found[series] = float(sample.group("value"))
    return found
