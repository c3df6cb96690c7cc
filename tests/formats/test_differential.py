"""The formats never diverge from the timeline, whatever a table goes through: random
sequences of appends, replaces, schema changes (a new column, a null where every row had
a value), empty commits, expires, another tool's commits and kills (a
writer SIGKILLed at a step of job commit, in a process of its own), on a table that
publishes Delta and Iceberg at once. After each step both formats' rows (delta-rs's
reader and pyiceberg's scan, never markerstore's) equal markerstore's snapshot, and
``verify`` reports exactly the drift the step made: nothing after a step markerstore
finished, the unpublished instant after a writer killed between its completed instant
and its publish, the other tool's version or snapshot after a foreign commit.

``make test`` runs a few sequences; the campaign (``make soak-test``) many.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from markerstore import ForeignCommitError, Table
from markerstore.commit import recover
from markerstore.commit.retention import expire
from markerstore.commit.verify import verify
from tests.support.commit_checks import commit_all, day_batches, split
from tests.support.crash_writer import crash_write
from tests.support.formats import BOTH, delta_table, iceberg_table, snapshot_rows

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

FORMAT_KINDS = ("format_",)
# The columns a schema change may add, each with its type (a later change may add the
# same column again: the same type, as a format requires).
NEW_COLUMNS = {"note": pa.string(), "score": pa.float64()}


def _rows(data: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    """A format's rows over markerstore's columns. A format keeps a column once added (a
    Delta ``metaData`` action, Iceberg's ``union_by_name``) after a replace removed every
    file that held it, where markerstore's snapshot reads the live files' columns: such a
    column holds only nulls."""
    got = pa.table(data)
    extra = sorted(set(got.column_names) - set(columns))
    assert set(columns) <= set(got.column_names) and set(extra) <= set(NEW_COLUMNS)
    assert all(got.column(c).null_count == got.num_rows for c in extra)
    return sorted((tuple(r[c] for c in columns) for r in got.to_pylist()), key=repr)


class Sequences(RuleBasedStateMachine):
    """One table of both formats, and the steps a table goes through."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="markerstore-differential-"))
        self.table = Table(str(self.folder / "t"), None, BOTH)
        self.next_id = 0
        self.added: dict[str, pa.DataType] = {}  # the columns schema changes added

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _ids(self, count: int) -> int:
        start, self.next_id = self.next_id, self.next_id + count
        return start

    # -- what markerstore does --------------------------------------------------------------
    @rule(rows=st.integers(1, 40), tasks=st.integers(1, 2))
    def append(self, rows: int, tasks: int) -> None:
        commit_all(self.table, split(rows * tasks, tasks, start=self._ids(rows * tasks)),
                   partition_by=["day"], conflict_mode="append")

    @rule(day=st.integers(0, 2), rows=st.integers(1, 20))
    def replace(self, day: int, rows: int) -> None:
        commit_all(self.table, {0: day_batches(rows, day, start=self._ids(rows))},
                   partition_by=["day"], conflict_mode="replace")

    @rule(column=st.sampled_from(sorted(NEW_COLUMNS)), rows=st.integers(1, 10),
          null_id=st.booleans())
    def change_schema(self, column: str, rows: int, null_id: bool) -> None:
        """A write with a column the table did not have (Delta: a ``metaData`` action;
        Iceberg: ``union_by_name``), and with `null_id` a null id, where every earlier
        row had one (nullability widened)."""
        start = self._ids(rows)
        ids = [None if null_id and n == 0 else start + n for n in range(rows)]
        kind = NEW_COLUMNS[column]
        values = [f"n{start + n}" if kind == pa.string() else (start + n) / 4
                  for n in range(rows)]
        batch = pa.record_batch({"id": pa.array(ids, pa.int64()),
                                 "day": pa.array([n % 3 for n in range(rows)], pa.int64()),
                                 "payload": pa.array([f"row-{i}" for i in ids]),
                                 column: pa.array(values, kind)})
        commit_all(self.table, {0: [batch]}, partition_by=["day"], conflict_mode="append",
                   schema=batch.schema)
        self.added[column] = kind

    @rule()
    def empty_commit(self) -> None:
        commit_all(self.table, {}, partition_by=["day"], conflict_mode="append")

    @rule(retention=st.sampled_from(["0", "7d"]))
    def expire(self, retention: str) -> None:
        expire(self.table, retention=retention, snapshots=True)

    # -- what happens to it -------------------------------------------------------------------
    @rule(step=st.sampled_from(["after_reconcile", "publish", "after_complete"]),
          mode=st.sampled_from(["append", "replace"]))
    def kill(self, step: str, mode: str) -> None:
        """A writer SIGKILLed at `step`; verify names exactly what it left unpublished,
        and the next writer's recovery publishes it."""
        before, published = self._drift(), self._published()
        crashed = crash_write(self.table, step, partition_by=["day"], mode=mode)
        completed = self.table.state(crashed["instant"]) == "completed"
        assert completed == (step == "after_complete")
        made = sorted(set(self._drift()) - set(before))
        if not completed:
            assert made == []
        elif published:  # the instant the formats lack
            assert made == [("format_missing_instant", name, crashed["instant"])
                            for name in ("delta", "iceberg")]
        else:  # the formats have no table yet: none of the commits with files
            assert made == [("format_lost", "_delta_log/", None),
                            ("format_lost", "metadata/", None)]
        recover(self.table)

    def _drift(self) -> list[tuple[str, str, str | None]]:
        """verify's findings about the formats (before the formats have a table, the
        empty commits it cannot hold yet are among them)."""
        return sorted((f.kind, f.path, f.instant) for f in verify(self.table).findings
                      if f.kind.startswith(FORMAT_KINDS))

    @rule(format_name=st.sampled_from(["delta", "iceberg"]), overwrite=st.booleans())
    def foreign_commit(self, format_name: str, overwrite: bool) -> None:
        """Another tool commits to one format: verify names exactly that commit, the next
        write refuses to publish over it, repair gives the format the timeline's files,
        and the other tool's files are deleted, as their owner would."""
        if not self._published():
            return  # no format table yet
        before = {p for p in self._files()}
        data = {"id": pa.array([-1, -2], pa.int64()), "day": pa.array([0, 1], pa.int64()),
                "payload": pa.array(["other", "tool"]),
                **{name: pa.nulls(2, kind) for name, kind in self.added.items()}}
        if format_name == "delta":
            from deltalake import write_deltalake

            columns = [f.name for f in delta_table(self.table).schema().fields]
            write_deltalake(self.table.storage.root, pa.table(data).select(columns),
                            mode="overwrite" if overwrite else "append", partition_by=["day"])
        else:
            iceberg = iceberg_table(self.table)
            frame = pa.table(data).select(iceberg.schema().column_names)
            operation = iceberg.overwrite if overwrite else iceberg.append
            operation(frame.cast(iceberg.schema().as_arrow()))
        found = [(f.kind, f.path.split()[0]) for f in verify(self.table).findings]
        assert found == [("format_foreign_commit", format_name)]
        with pytest.raises(ForeignCommitError, match=f"^{format_name}: "):
            commit_all(self.table, split(3, 1, start=self._ids(3)), partition_by=["day"],
                       conflict_mode="append")
        verify(self.table, repair=True, grace="0")
        for path in self._files() - before:  # the other tool's files, deleted by their owner
            (self.folder / "t" / path).unlink()

    def _published(self) -> bool:
        """Whether the formats have a table (a commit with files was published)."""
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(self.table.storage.root))

    def _files(self) -> set[str]:
        root = self.folder / "t"
        return {str(p.relative_to(root)) for p in root.rglob("*.parquet")
                if not str(p.relative_to(root)).startswith((".markerstore", "_delta_log",
                                                           "metadata"))}

    # -- after every step ---------------------------------------------------------------------
    @invariant()
    def formats_read_the_snapshot_and_verify_finds_nothing(self) -> None:
        if not self._published():
            return
        columns, expected = snapshot_rows(self.table)
        assert _rows(delta_table(self.table).to_pyarrow_table(), columns) == expected
        assert _rows(iceberg_table(self.table).scan().to_arrow(), columns) == expected
        assert [(f.kind, f.path, f.action) for f in verify(self.table).findings] == []


def _run(examples: int, steps: int, derandomize: bool) -> None:
    run_state_machine_as_test(Sequences, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None,
        derandomize=derandomize, suppress_health_check=list(HealthCheck)))


# One sequence with every kind of step, the checks after each (what `make test` runs for
# sure, besides a few random sequences).
EVERY_STEP: list[tuple[str, dict[str, Any]]] = [
    ("empty_commit", {}),
    ("kill", {"step": "after_complete", "mode": "append"}),
    ("append", {"rows": 20, "tasks": 2}),
    ("replace", {"day": 1, "rows": 5}),
    ("change_schema", {"column": "note", "rows": 4, "null_id": True}),
    ("foreign_commit", {"format_name": "delta", "overwrite": True}),
    ("foreign_commit", {"format_name": "iceberg", "overwrite": False}),
    ("expire", {"retention": "0"}),
    ("append", {"rows": 3, "tasks": 1}),
]


def test_a_sequence_of_every_step_keeps_the_formats_on_the_timeline() -> None:
    machine = Sequences()
    try:
        for name, arguments in EVERY_STEP:
            getattr(machine, name)(**arguments)
            machine.formats_read_the_snapshot_and_verify_finds_nothing()
    finally:
        machine.teardown()


def test_a_few_sequences_keep_the_formats_on_the_timeline() -> None:
    _run(examples=2, steps=3, derandomize=True)


@pytest.mark.campaign
@pytest.mark.timeout(1200)  # 60 sequences of 15 steps: five to ten minutes on two cores
def test_many_sequences_keep_the_formats_on_the_timeline() -> None:
    _run(examples=60, steps=15, derandomize=False)
