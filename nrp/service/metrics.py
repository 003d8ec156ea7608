"""Counters, gauges and histograms in the Prometheus text exposition format (version 0.0.4).

Written here rather than taken from ``prometheus_client``, which is not among the project's
dependencies: the service needs a handful of metrics, and the format is a few lines of text.
All updates happen under one lock; gauges that describe the store (jobs per status, queued
units) are read when scraped.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()):
        self.name = name
        self.help = help_text
        self.label_names = tuple(labels)
        self.lock = threading.Lock()

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()):
        super().__init__(name, help_text, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        with self.lock:
            self.values[labels] = self.values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self.lock:
            return self.values.get(labels, 0.0)

    def lines(self) -> list[str]:
        with self.lock:
            items = sorted(self.values.items())
        if not items and not self.label_names:
            items = [((), 0.0)]
        return self.header() + [
            f"{self.name}{_labels(self.label_names, k)} {_number(v)}" for k, v in items
        ]


class Gauge(_Metric):
    """A gauge whose samples come from a callback at scrape time."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_text: str,
        read: Callable[[], Iterable[tuple[tuple[str, ...], float]]],
        labels: Sequence[str] = (),
    ):
        super().__init__(name, help_text, labels)
        self.read = read

    def lines(self) -> list[str]:
        try:
            samples = list(self.read())
        except Exception:  # a failing source must not break the scrape
            return []
        return self.header() + [
            f"{self.name}{_labels(self.label_names, k)} {_number(v)}" for k, v in samples
        ]


class Histogram(_Metric):
    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        buckets: Sequence[float] = LATENCY_BUCKETS,
        labels: Sequence[str] = (),
    ):
        super().__init__(name, help_text, labels)
        self.buckets = tuple(sorted(buckets))
        self.series: dict[tuple[str, ...], list[float]] = {}  # counts per bucket, +Inf, sum

    def observe(self, value: float, *labels: str) -> None:
        with self.lock:
            series = self.series.setdefault(labels, [0.0] * (len(self.buckets) + 2))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    series[i] += 1
            series[-2] += 1  # +Inf: the count
            series[-1] += value

    def count(self, *labels: str) -> int:
        with self.lock:
            series = self.series.get(labels)
            return int(series[-2]) if series else 0

    def lines(self) -> list[str]:
        with self.lock:
            items = sorted((k, list(v)) for k, v in self.series.items())
        out = self.header()
        for labels, series in items:
            plain = _labels(self.label_names, labels)
            for bound, count in zip(self.buckets, series, strict=False):
                le = _labels(self.label_names, labels, f'le="{_number(bound)}"')
                out.append(f"{self.name}_bucket{le} {_number(count)}")
            inf = _labels(self.label_names, labels, 'le="+Inf"')
            out.append(f"{self.name}_bucket{inf} {_number(series[-2])}")
            out.append(f"{self.name}_sum{plain} {_number(series[-1])}")
            out.append(f"{self.name}_count{plain} {_number(series[-2])}")
        return out


class Registry:
    def __init__(self) -> None:
        self.metrics: list[_Metric] = []

    def add(self, metric: _Metric) -> _Metric:
        self.metrics.append(metric)
        return metric

    def exposition(self) -> str:
        lines: list[str] = []
        for metric in self.metrics:
            lines.extend(metric.lines())  # type: ignore[attr-defined]
        return "\n".join(lines) + "\n"
