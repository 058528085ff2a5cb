"""A steady client load through the test cluster's endpoint (nodes.API, the head's management
address), for the tests that change serving under it: one completion every 1/rate s, each on its
own thread, bounded in count and in time. It reports what a client saw: sent, answered (200),
failed (any other status or no answer), the slowest answer, and each failure's time and reason.

    with SteadyLoad(rate=2) as load:
        ...  # the update
    report = load.report()
    assert report.failed == 0, report.describe()
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from endpoint import COMPLETION, call


@dataclass
class LoadReport:
    sent: int = 0
    ok: int = 0
    failed: int = 0
    max_latency: float = 0.0
    seconds: float = 0.0
    # "<seconds into the load>s <status or error>: <detail>" of each failed request
    failures: list[str] = field(default_factory=list)
    # when each failed request was sent (seconds into the load), and what kind of failure it was:
    # "503 service_unavailable" (the front's own answer while no engine serves: Retry-After),
    # another status, or "no answer"
    failed_at: list[float] = field(default_factory=list)
    failure_kinds: Counter = field(default_factory=Counter)
    # the served model each 200 named
    answered_by: Counter = field(default_factory=Counter)

    def failing_seconds(self, interval: float) -> float:
        """From the first failed request to the last, plus one request's interval: the gap
        clients saw (0 when none failed)."""
        return max(self.failed_at) - min(self.failed_at) + interval if self.failed_at else 0.0

    def describe(self) -> str:
        shown = "; ".join(self.failures[:10]) + (" ..." if len(self.failures) > 10 else "")
        return (f"{self.sent} sent in {self.seconds:.0f} s, {self.ok} ok, {self.failed} failed, "
                f"slowest {self.max_latency:.1f} s{': ' + shown if shown else ''}")


def failure_kind(status: int, body: dict) -> str:
    """The status and the OpenAI-style error type of an answer ("503 service_unavailable")."""
    error = body.get("error")
    return f"{status} {error.get('type', '')}".strip() if isinstance(error, dict) else str(status)


class SteadyLoad:
    """Completions at `rate` per second until stopped, `max_requests` sent or `max_seconds` passed;
    each asks for `completion` (default: the inventory's model)."""

    def __init__(self, rate: float = 2.0, max_requests: int = 3000, max_seconds: float = 1800,
                 request_timeout: float = 120, completion: dict | None = None) -> None:
        self.completion = completion or COMPLETION
        self.interval = 1.0 / rate
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.request_timeout = request_timeout
        self._report = LoadReport()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pacer = threading.Thread(target=self._pace, daemon=True)
        self._started = 0.0

    def __enter__(self) -> SteadyLoad:
        self._started = time.monotonic()
        self._pacer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sending and wait for the requests in flight (each bounded by its own timeout)."""
        self._stop.set()
        self._pacer.join()
        for thread in self._threads:
            thread.join(self.request_timeout + 10)
        self._report.seconds = time.monotonic() - self._started

    def report(self) -> LoadReport:
        return self._report

    def _pace(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set() and len(self._threads) < self.max_requests \
                and time.monotonic() - self._started < self.max_seconds:
            thread = threading.Thread(target=self._one, daemon=True)
            thread.start()
            self._threads.append(thread)
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _one(self) -> None:
        sent = time.monotonic()
        try:
            status, body = call("/v1/completions", body=self.completion, timeout=self.request_timeout)
            reason = "" if status == 200 else f"{status}: {str(body)[:200]}"
            kind = failure_kind(status, body)
        except (OSError, ValueError) as error:
            status, body, reason, kind = 0, {}, f"no answer: {error}", "no answer"
        latency = time.monotonic() - sent
        with self._lock:
            report = self._report
            report.sent += 1
            report.max_latency = max(report.max_latency, latency)
            if reason:
                report.failed += 1
                report.failures.append(f"{sent - self._started:.1f}s {reason}")
                report.failed_at.append(sent - self._started)
                report.failure_kinds[kind] += 1
            else:
                report.ok += 1
                report.answered_by[body.get("model", "?")] += 1
