"""Wide records cost time linear in their columns: a Validator for 50,000 columns, and a
file of 10,000 columns read with the same number of values as one of 1,000, take no more
than a few times what the narrower one takes per value (CPU time, side by side in one
test; the quadratic steps made it tens of times). Before: the Validator found duplicate
names with ``names.count`` per name, the text casts looked every column up in a list of
names, the CSV pattern of a record grew with its fields (refused past 20,000, every record
then a suspect cast one column at a time), DuckDB's JSON pass looked up each column in each
line by a scan of its members, and every column was cast on its own in every block."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

import errortable
from tests.support.ingest_run import run

VALUES = 1_000_000  # values per file, at every width


def _cpu(work: Callable[[], object], repeat: int = 2) -> float:
    """The least CPU time of `repeat` runs of `work` (CPU time: others' load on a shared
    machine does not count)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def test_a_validator_checks_a_wide_schema_in_linear_time() -> None:
    def build(width: int) -> Callable[[], object]:
        schema = pa.schema([(f"c{i}", pa.int64()) for i in range(width)])
        return lambda: errortable.Validator(schema, "c0", ["c1"])

    narrow, wide = _cpu(build(5_000), 3), _cpu(build(50_000), 3)
    assert wide < 30 * max(narrow, 1e-3), (narrow, wide)  # linear: 10x; quadratic: 100x


def _csv(width: int) -> bytes:
    rows = VALUES // width
    header = ",".join(f"c{i}" for i in range(width))
    return "\n".join([header] + [",".join(str(r * width + i) for i in range(width))
                                 for r in range(rows)]).encode() + b"\n"


def _json(width: int, values: int) -> bytes:
    rows = values // width
    return b"".join(json.dumps({f"c{i}": r * width + i for i in range(width)}).encode()
                    + b"\n" for r in range(rows))


def _ddl(width: int) -> str:
    return ", ".join(f"c{i} BIGINT" for i in range(width))


def test_a_wide_csv_file_reads_in_time_linear_in_its_columns(tmp_path: Path) -> None:
    def read(width: int) -> Callable[[], object]:
        data, ddl = _csv(width), _ddl(width)

        def work() -> None:
            rows, errors = run(tmp_path / f"w{width}.csv", data, ddl)
            assert errors == [] and len(rows) == VALUES // width
            assert max(r[f"c{width - 1}"] for r in rows) == VALUES - 1
        return work

    narrow, wide = _cpu(read(1_000)), _cpu(read(10_000))
    assert wide < 4 * narrow, (narrow, wide)  # the same values: linear is 1x


def test_a_wide_json_file_reads_in_time_linear_in_its_columns(tmp_path: Path) -> None:
    """Past markerstore.ingest.parse.JSON_QUERY_COLUMNS (1,000) the lines go to the
    reference parser, linear in the columns (DuckDB's pass looks each column up by a scan
    of the line's members)."""
    values = VALUES // 2

    def read(width: int) -> Callable[[], object]:
        data, ddl = _json(width, values), _ddl(width)

        def work() -> None:
            rows, errors = run(tmp_path / f"w{width}.jsonl", data, ddl)
            assert errors == [] and len(rows) == values // width
        return work

    narrow, wide = _cpu(read(2_000)), _cpu(read(20_000))
    assert wide < 4 * narrow, (narrow, wide)


def test_checks_read_only_the_columns_they_name() -> None:
    """A block is registered with DuckDB with the columns the checks name (DuckDB binds a
    table of 30,000 columns in seconds, per block); a check that reads ``*`` or
    ``COLUMNS`` gets them all."""
    from errortable.capture.checks import check_columns

    names = ["id", "Amount", "day", "My Col", "value", "other"]
    assert check_columns({"a": "amount > 0 AND \"My Col\" <> 'id'", "b": "day IS NOT NULL"},
                         names) == ["Amount", "day", "My Col"]
    assert check_columns({"a": "value + 1 > 0"}, names) == ["value"]
    assert check_columns({"a": "1 = 1"}, names) == []
    assert check_columns({"a": "COLUMNS('c.*') > 0"}, names) == names

    width, rows = 20_000, 5
    schema = pa.schema([(f"c{i}", pa.int64()) for i in range(width)])
    table = pa.table({f"c{i}": pa.array(range(rows), pa.int64()) for i in range(width)})

    def split(checks: dict[str, str]) -> Callable[[], object]:
        validator = errortable.Validator(schema, checks=checks)

        def work() -> None:
            good, errors = validator.split_typed(table, None, None, lambda r: ["{}"] * len(r))
            assert good.num_rows + errors.num_rows == rows
            assert errors.num_rows == (1 if checks else 0)
        return work

    plain, checked = _cpu(split({})), _cpu(split({"positive": "c1 > 0"}))
    assert checked < 3 * plain, (plain, checked)  # registering 20,000 columns: 10 times


def test_wide_json_records_hold_a_few_blocks(tmp_path: Path) -> None:
    """JSON records wider than the vectorized pass takes go to the reference parser,
    8,192 at a time: the task's peak grows within the bound of tests/reliability (4 times
    the input and 128 MiB), measured in a subprocess."""
    import subprocess
    import sys

    from tests.reliability.test_task_memory import _TASK, MIB, _bound

    width = 2_000
    line = json.dumps({f"c{i}": i for i in range(width)}).encode() + b"\n"
    data = line * (4 * MIB // len(line))
    path, warm = tmp_path / "wide.json", tmp_path / "warm.json"
    path.write_bytes(data)
    warm.write_bytes(b'{"c0": 1}\nx\n')
    task = _TASK.replace('ddl_to_arrow("a BIGINT, b STRING")', f"ddl_to_arrow({_ddl(width)!r})")
    assert task != _TASK
    out = subprocess.run([sys.executable, "-c", task, str(path), "0", str(warm)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    found, grown = map(int, out.stdout.split())
    assert found == 0 and grown < _bound(data), grown
