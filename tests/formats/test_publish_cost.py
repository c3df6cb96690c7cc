"""What a publish reads of each format does not grow with the table's history.

Each version/snapshot markerstore publishes carries the timeline's settled mark, so the
next publish reads the format once (delta-rs loads the log from its last checkpoint and
reads its latest commit; pyiceberg loads the table's metadata) and looks up only the
instants after the mark, instead of every completed instant. Counted here as calls into
delta-rs and pyiceberg during one write, early in a table's life and after many commits:
the same. (Time is measured in ``benchmarks/bench_formats.py``: 1,000 commits in a row.)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from markerstore.commit import WriteJob
from tests.support.commit_checks import batches, open_table, run_job_tasks

deltalake = pytest.importorskip("deltalake")
sql = pytest.importorskip("pyiceberg.catalog.sql")

COUNTED: list[tuple[Any, str]] = [
    (deltalake.DeltaTable, "__init__"), (deltalake.DeltaTable, "transaction_version"),
    (deltalake.DeltaTable, "history"), (sql.SqlCatalog, "load_table")]


def _counting(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    calls: Counter[str] = Counter()

    def wrap(owner: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[f"{owner.__name__}.{name}"] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    for owner, name in COUNTED:
        wrap(owner, name)
    return calls


def test_a_publish_reads_each_format_the_same_after_many_commits(
        local_where: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    table = open_table(local_where, markerstore__table__formats="delta,iceberg")
    calls = _counting(monkeypatch)
    per_write = []
    for n in range(24):
        calls.clear()
        job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
        job.commit(run_job_tasks(job, {0: batches(6, start=n * 10, days=2)}))
        per_write.append(dict(calls))
    early, late = per_write[3], per_write[-1]
    assert late == early, (early, late)
    assert late["DeltaTable.transaction_version"] <= 4
