"""Helpers for the errortable tests: a small write that does what the Spark writer does."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import errortable
from errortable import ErrorCommit, ErrorFileStats, Validator
from markerstore import Table
from markerstore.table import DataFile

SCHEMA = pa.schema([("id", pa.string()), ("amount", pa.int64()), ("day", pa.string())])
CHECKS = {"positive_amount": "amount > 0"}


def validator(**kwargs: Any) -> Validator:
    return Validator(SCHEMA, key="id", partition_by=["day"], checks=CHECKS, **kwargs)


def batch(n_good: int = 3, bad: Mapping[str, int] | None = None, day: str = "2024-01-01"
          ) -> pa.Table:
    """A source batch (amount as text) with n_good good rows and bad rows by reason."""
    bad = dict(bad or {})
    ids, amounts, days = [], [], []
    for i in range(n_good):
        ids.append(f"k{uuid.uuid4().hex[:8]}-{i}")
        amounts.append(str(i + 1))
        days.append(day)
    for i in range(bad.get("cast", 0)):
        ids.append(f"c{i}")
        amounts.append(f"x{i}")
        days.append(day)
    for _ in range(bad.get("key", 0)):
        ids.append(None)
        amounts.append("5")
        days.append(day)
    for i in range(bad.get("check", 0)):
        ids.append(f"n{i}")
        amounts.append(str(-i - 1))
        days.append(day)
    for i in range(bad.get("partition", 0)):
        ids.append(f"p{i}")
        amounts.append("3")
        days.append("a/b")
    return pa.table({"id": ids, "amount": amounts, "day": days})


@dataclass
class Write:
    """One simulated write: its instants, error commit, and what each step produced."""

    target: Table
    instant: str
    commit: ErrorCommit
    stats: list[ErrorFileStats | None] = field(default_factory=list)
    data_files: list[DataFile] = field(default_factory=list)
    rows_in: int = 0
    rows_written: int = 0
    error_rows: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


def start(target: Table, options: Mapping[str, Any] | None = None) -> Write:
    options = dict(options or {})
    location = errortable.locate(target.storage.url(), options)
    instant = target.start_commit(extra={"error_table": location.url})
    commit = ErrorCommit.open(target, instant, options=options, location=location)
    commit.markers()
    return Write(target, instant, commit)


def run_task(write: Write, task: str, source: pa.Table, attempt: int = 0,
             check: Validator | None = None) -> tuple[ErrorFileStats | None, DataFile | None]:
    """One executor task attempt: split, write the good rows (marker first) and the error
    file. Returns (error stats, data file)."""
    spec = write.commit.task_spec()
    attempt_id = f"{task}-attempt{attempt}"
    good, errors = (check or validator()).split(source, spec.context(attempt_id))
    data_file = None
    if good.num_rows:
        name = f"{uuid.uuid4()}-{attempt_id}_{write.instant}.parquet"
        markers = write.target.markers(write.instant)
        markers.create("", name, "CREATE")
        with write.target.storage.open_write(write.target.storage.path(name)) as handle:
            pq.write_table(pa.Table.from_batches([good]).drop_columns([]), handle)
        data_file = DataFile(name, rows=good.num_rows)
    with spec.writer(attempt_id) as writer:
        writer.write(errors)
    return writer.stats, data_file


def full_write(target: Table, sources: list[pa.Table], options: Mapping[str, Any] | None = None,
               *, complete: bool = True,
               before_main: Callable[[Write], None] | None = None) -> Write:
    write = start(target, options)
    for i, source in enumerate(sources):
        stats, data_file = run_task(write, f"task{i}", source)
        write.stats.append(stats)
        if data_file is not None:
            write.data_files.append(data_file)
            write.rows_written += data_file.rows or 0
        write.rows_in += source.num_rows
        write.error_rows += stats.rows if stats else 0
    write.metadata = write.commit.prepare(write.stats)
    if before_main is not None:
        before_main(write)
    write.target.commit(write.instant, write.data_files, metadata=write.metadata)
    if complete:
        write.commit.complete()
    return write
