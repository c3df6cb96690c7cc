"""A small metrics registry rendered in the Prometheus text format (version 0.0.4).

No client library is needed for a handful of counters, gauges and histograms. Each marker
server keeps its own :class:`Registry`; the process-wide :data:`REGISTRY` is the hook
other packages increment (errortable counts failed records with it) and every server's
``/metrics`` shows it too::

    from markerstore import metrics
    metrics.counter("markerstore_failed_records_total", {"table": "t", "reason": "cast"},
                    help="Records written to an error table.").inc(3)
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from markerstore.config import FAILED_RECORDS_HELP, FAILED_RECORDS_METRIC

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

FAILED_RECORDS = FAILED_RECORDS_METRIC
DEFAULT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2,
                   0.25, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)

LabelKey = tuple[tuple[str, str], ...]


def _label_key(labels: Mapping[str, Any] | None) -> LabelKey:
    if not labels:
        return ()
    for name in labels:
        if not _LABEL.match(name) or name.startswith("__"):
            raise ValueError(f"invalid metric label name {name!r}")
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels_text(key: LabelKey, extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = list(key) + list(extra)
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class Counter:
    """A value that only goes up."""

    def __init__(self) -> None:
        self._value = 0.0
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        with self._lock:
            self._value += amount

    @property
    def value(self) -> float:
        return self._value


class Gauge:
    """A value that goes up and down, or is read from a function when rendered."""

    def __init__(self) -> None:
        self._value = 0.0
        self._fn: Callable[[], float] | None = None
        self._lock = threading.Lock()

    def set(self, value: float) -> None:
        self._value = float(value)

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:
            self._value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.inc(-amount)

    def set_function(self, fn: Callable[[], float]) -> None:
        self._fn = fn

    @property
    def value(self) -> float:
        return float(self._fn()) if self._fn is not None else self._value


class Histogram:
    """Observations counted into cumulative buckets, with their sum and count."""

    def __init__(self, buckets: Iterable[float] = DEFAULT_BUCKETS) -> None:
        self.buckets = tuple(sorted(float(b) for b in buckets))
        self._counts = [0] * (len(self.buckets) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        index = len(self.buckets)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                index = i
                break
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    @property
    def count(self) -> int:
        return sum(self._counts)

    @property
    def sum(self) -> float:
        return self._sum

    def cumulative(self) -> list[tuple[float, int]]:
        with self._lock:
            counts = list(self._counts)
        result, running = [], 0
        for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
            running += n
            result.append((bound, running))
        return result


_KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}


class _Family:
    def __init__(self, name: str, kind: str, help: str, buckets: Iterable[float] | None):
        self.name = name
        self.kind = kind
        self.help = help
        self.buckets = tuple(buckets) if buckets is not None else DEFAULT_BUCKETS
        self.children: dict[LabelKey, Any] = {}


class Registry:
    """Metric families by name; each family holds one child per label set."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}
        self._lock = threading.Lock()

    def _child(self, kind: str, name: str, labels: Mapping[str, Any] | None, help: str,
               buckets: Iterable[float] | None = None) -> Any:
        if not _NAME.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        key = _label_key(labels)
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = self._families[name] = _Family(name, kind, help, buckets)
            elif family.kind != kind:
                raise ValueError(f"metric {name} is a {family.kind}, not a {kind}")
            if help and not family.help:
                family.help = help
            child = family.children.get(key)
            if child is None:
                child = family.children[key] = (
                    Histogram(family.buckets) if kind == "histogram" else _KINDS[kind]())
            return child

    def counter(self, name: str, labels: Mapping[str, Any] | None = None, help: str = ""
                ) -> Counter:
        child: Counter = self._child("counter", name, labels, help)
        return child

    def gauge(self, name: str, labels: Mapping[str, Any] | None = None, help: str = ""
              ) -> Gauge:
        child: Gauge = self._child("gauge", name, labels, help)
        return child

    def histogram(self, name: str, labels: Mapping[str, Any] | None = None, help: str = "",
                  buckets: Iterable[float] | None = None) -> Histogram:
        child: Histogram = self._child("histogram", name, labels, help, buckets)
        return child

    def values(self, name: str) -> dict[LabelKey, float]:
        """The value of each child of the counter or gauge `name`, by its labels (sorted
        name, value pairs); empty when there is no such family."""
        with self._lock:
            family = self._families.get(name)
            children = list(family.children.items()) if family is not None else []
        return {key: child.value for key, child in children}

    def forget(self, name: str) -> None:
        """Drop every child of the family `name` (a test's fresh start)."""
        with self._lock:
            family = self._families.get(name)
            if family is not None:
                family.children.clear()

    def render(self) -> str:
        """Every family in the Prometheus text exposition format."""
        with self._lock:
            families = [(f, list(f.children.items())) for f in self._families.values()]
        lines: list[str] = []
        for family, children in sorted(families, key=lambda item: item[0].name):
            if family.help:
                lines.append(f"# HELP {family.name} {_escape(family.help)}")
            lines.append(f"# TYPE {family.name} {family.kind}")
            for key, child in sorted(children, key=lambda item: item[0]):
                if isinstance(child, Histogram):
                    for bound, running in child.cumulative():
                        le = _labels_text(key, [("le", _number(bound))])
                        lines.append(f"{family.name}_bucket{le} {running}")
                    lines.append(f"{family.name}_sum{_labels_text(key)} {_number(child.sum)}")
                    lines.append(f"{family.name}_count{_labels_text(key)} {child.count}")
                else:
                    lines.append(f"{family.name}{_labels_text(key)} {_number(child.value)}")
        return "\n".join(lines) + "\n" if lines else ""


REGISTRY = Registry()
"""The process-wide registry: hooks for other packages; shown by every server."""


def counter(name: str, labels: Mapping[str, Any] | None = None, help: str = "") -> Counter:
    """A counter in the process-wide registry (created on first use)."""
    return REGISTRY.counter(name, labels, help)


def gauge(name: str, labels: Mapping[str, Any] | None = None, help: str = "") -> Gauge:
    return REGISTRY.gauge(name, labels, help)


def histogram(name: str, labels: Mapping[str, Any] | None = None, help: str = "",
              buckets: Iterable[float] | None = None) -> Histogram:
    return REGISTRY.histogram(name, labels, help, buckets)


def failed_records(table: str, reason: str, amount: int = 1) -> None:
    """Count records that went to an error table (the RFC-20 failed-record metric)."""
    counter(FAILED_RECORDS, {"table": table, "reason": reason},
            help=FAILED_RECORDS_HELP).inc(amount)


def failed_record_totals() -> dict[tuple[str, str], int]:
    """The failed-record counter of this process: rows by (table, reason)."""
    totals: dict[tuple[str, str], int] = {}
    for key, value in REGISTRY.values(FAILED_RECORDS).items():
        labels = dict(key)
        totals[(labels.get("table", ""), labels.get("reason", ""))] = int(value)
    return totals
