"""The failed-record count has one Prometheus name, whichever registry shows it."""

from __future__ import annotations

import re

from errortable import metrics
from markerstore import config
from markerstore import metrics as server_metrics


def _counter_lines(lines: list[str], table: str) -> dict[str, str]:
    """Metric name -> sample line of the counter of `table` with reason cast."""
    found = {}
    for line in lines:
        match = re.match(r"^([a-z_]+)\{(.*)\} (\d+)$", line)
        if match and f'table="{table}"' in match.group(2) and 'reason="cast"' in match.group(2):
            found[match.group(1)] = match.group(3)
    return found


def test_one_name_for_the_failed_record_count() -> None:
    metrics.reset()
    table = "memory://metric-name-test"
    metrics.record_commit(table, "20240101000000000", {"cast": 2})
    mine = _counter_lines(metrics.prometheus_lines(), table)
    servers = _counter_lines(server_metrics.REGISTRY.render().splitlines(), table)
    assert mine == {config.FAILED_RECORDS_METRIC: "2"}
    assert set(servers) == {config.FAILED_RECORDS_METRIC}
    assert server_metrics.FAILED_RECORDS == config.FAILED_RECORDS_METRIC
    help_lines = [line for line in metrics.prometheus_lines()
                  if line.startswith(f"# HELP {config.FAILED_RECORDS_METRIC} ")]
    assert help_lines == [f"# HELP {config.FAILED_RECORDS_METRIC} {config.FAILED_RECORDS_HELP}"]
    assert f"# HELP {config.FAILED_RECORDS_METRIC} {config.FAILED_RECORDS_HELP}" in \
        server_metrics.REGISTRY.render().splitlines()
