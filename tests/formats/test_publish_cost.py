"""What a publish reads of each format does not grow with the table's history.

Each version/snapshot markerstore publishes carries the timeline's settled mark, so the
next publish reads the format once and looks up only the instants after the mark, instead
of every completed instant. Delta: the log this thread read before, with only the later
versions' files read (markerstore/formats/delta_state.py; delta-rs loads the table only to
write a checkpoint); Iceberg: pyiceberg loads the table's metadata. Counted here as calls
into delta-rs, the Delta log replay and pyiceberg during one write, early in a table's
life and after many commits: the same. (Time is measured in
``benchmarks/bench_formats.py``: 1,000 commits in a row.)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from markerstore.commit import WriteJob
from markerstore.formats import delta_state
from tests.support.commit_checks import batches, open_table, run_job_tasks

deltalake = pytest.importorskip("deltalake")
sql = pytest.importorskip("pyiceberg.catalog.sql")

COUNTED: list[tuple[Any, str]] = [
    (deltalake.DeltaTable, "__init__"), (deltalake.DeltaTable, "transaction_version"),
    (deltalake.DeltaTable, "history"), (sql.SqlCatalog, "load_table"),
    (delta_state, "_fresh"), (delta_state, "read_version")]


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
    for n in range(25):
        calls.clear()
        job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
        job.commit(run_job_tasks(job, {0: batches(6, start=n * 10, days=2)}))
        per_write.append(dict(calls))
    early, late = per_write[3], per_write[-2]  # neither writes a Delta checkpoint
    assert late == early, (early, late)
    # the log read once by this thread (the first write's start); then the new version's
    # file is read by each publish, and the next one looked for
    assert sum(1 for w in per_write if w.get("markerstore.formats.delta_state._fresh")) == 1
    assert late.get("markerstore.formats.delta_state.read_version", 0) <= 3
    assert "DeltaTable.__init__" not in late
    assert per_write[20].get("DeltaTable.__init__") == 1  # a checkpoint at version 20
