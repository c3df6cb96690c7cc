"""The columnar fast path: split_arrow, write_arrow, and Avro blocks built with Arrow."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

import errortable
import errortable.writing.commit
from errortable import schema as S
from errortable.writing import avroblock
from markerstore import Table
from tests.support.errortable_writes import batch, start, validator

ROWS = [
    {"uid": "a", "ts": "1.000", "schema": None, "record": None, "message": None,
     "context": None},
    {"uid": "b" * 300, "ts": "2.000", "schema": "s", "record": '{"x":"ü"}',
     "message": "m" * 20_000, "context": {}},
    {"uid": "c", "ts": "3.000", "schema": None, "record": "", "message": "",
     "context": {"k": "v", "ü": "é" * 300, "": ""}},
]


def test_block_encoding_is_byte_identical_to_fastavro() -> None:
    table = S.records_to_arrow(ROWS)
    for i, row in enumerate(ROWS):
        expected = io.BytesIO()
        fastavro.schemaless_writer(expected, S.parsed_schema(), row)
        assert avroblock.encode_rows(table.slice(i, 1)) == expected.getvalue()
    assert avroblock.encode_rows(table.slice(0, 0)) == b""


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_blocks_make_a_file_fastavro_reads(codec: str) -> None:
    table = S.records_to_arrow(ROWS * 50).slice(7, 100)
    sync = b"0123456789abcdef"
    handle = io.BytesIO()
    fastavro.write.Writer(handle, S.parsed_schema(), codec=codec, sync_marker=sync)
    handle.write(avroblock.block(table, codec, sync))
    handle.seek(0)
    assert list(fastavro.reader(handle)) == S.arrow_to_records(table)


def test_records_and_arrow_convert_both_ways() -> None:
    table = S.records_to_arrow(ROWS)
    assert S.arrow_to_records(table) == ROWS
    assert S.arrow_to_records(table.slice(1, 2)) == ROWS[1:]
    assert table.schema == S.arrow_schema()


def test_split_arrow_matches_split() -> None:
    source = batch(3, {"cast": 2, "key": 1, "check": 2, "partition": 1})
    v = validator()
    good, errors = v.split_arrow(source, {"commit_time": "20240101000000000",
                                          "first_offset": 10})
    assert errors.schema == S.arrow_schema()
    assert good.num_rows + errors.num_rows == source.num_rows
    as_dicts = S.arrow_to_records(errors)
    good2, dicts = v.split(source, {"commit_time": "20240101000000000", "first_offset": 10})
    assert good2.equals(good)
    strip = [{k: v for k, v in d.items() if k not in ("uid", "ts")} for d in dicts]
    assert strip == [{k: v for k, v in d.items() if k not in ("uid", "ts")}
                     for d in as_dicts]
    check = next(d for d in as_dicts if d["context"]["reason"] == "check")
    assert json.loads(check["record"])["amount"].startswith("-")
    assert check["context"]["commitTime"] == "20240101000000000"
    assert len({d["uid"] for d in as_dicts}) == len(as_dicts)


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_write_arrow_end_to_end(tmp_table: Table, fmt: str) -> None:
    write = start(tmp_table, {"markerstore.write.error.table.format": fmt})
    spec = write.commit.task_spec()
    v = spec.validator(validator().target_schema, key="id", partition_by=["day"],
                       checks={"positive_amount": "amount > 0"})
    with spec.writer("t-0") as writer:
        _, first = v.split_arrow(batch(2, {"check": 3}), spec.context("t-0"))
        writer.write_arrow(first)
        _, second = v.split(batch(1, {"cast": 2}), spec.context("t-0"))
        writer.write(second)  # dicts and tables mix in one file
    assert writer.stats is not None and writer.stats.rows == 5
    assert writer.stats.counts == {"cast": 2, "check": 3}
    metadata = write.commit.prepare([writer.stats])
    tmp_table.commit(write.instant, [], metadata=metadata)
    write.commit.complete()
    rows = errortable.read(write.commit.url).aggregate("reason, count(*)").fetchall()
    assert dict(rows) == {"cast": 2, "check": 3}


def test_write_arrow_applies_the_pii_policy(tmp_table: Table) -> None:
    write = start(tmp_table, {"markerstore.write.error.table.payload.drop": "true"})
    spec = write.commit.task_spec()
    _, errors = validator().split_arrow(batch(1, {"check": 2}))
    with spec.writer("t-0") as writer:
        writer.write_arrow(errors)
    tmp_table.commit(write.instant, [], metadata=write.commit.prepare([writer.stats]))
    write.commit.complete()
    assert errortable.read(write.commit.url).filter("record IS NOT NULL").fetchall() == []


@pytest.mark.parametrize("policy", [{"markerstore.write.error.table.payload.drop": "true"},
                                    {"markerstore.write.error.table.payload.redact": "id,x"}])
def test_rows_the_policy_was_applied_to_are_written_as_columns(
        tmp_table: Table, monkeypatch: pytest.MonkeyPatch, policy: dict[str, str]) -> None:
    """Rows built under the error table's own policy are written as they are, as columns
    (they were converted to dicts, each handed back unchanged by protect, and written one
    by one); rows built without it still go through protect."""
    from errortable.writing import taskwriter

    write = start(tmp_table, policy)
    spec = write.commit.task_spec()
    converted: list[int] = []
    real = taskwriter.schema_module.arrow_to_records

    def counting(table: pa.Table) -> list[dict[str, object]]:
        converted.append(table.num_rows)
        return real(table)

    monkeypatch.setattr(taskwriter.schema_module, "arrow_to_records", counting)
    protected = spec.validator(validator().target_schema, key="id", partition_by=["day"],
                               checks={"positive_amount": "amount > 0"})
    _, built = protected.split_arrow(batch(1, {"check": 3}), spec.context("t-0"))
    _, plain = validator().split_arrow(batch(1, {"cast": 2}), spec.context("t-0"))
    with spec.writer("t-0") as writer:
        writer.write_arrow(built)
        assert converted == []
        writer.write_arrow(plain)
        assert converted == [2]
    tmp_table.commit(write.instant, [], metadata=write.commit.prepare([writer.stats]))
    write.commit.complete()
    kept = "record IS NOT NULL AND record NOT LIKE '%\"id\":\"[REDACTED]\"%'"
    assert errortable.read(write.commit.url).filter(kept).fetchall() == []
    assert len(errortable.read(write.commit.url).fetchall()) == 5


def test_write_arrow_refuses_other_rows(tmp_table: Table) -> None:
    write = start(tmp_table)
    writer = write.commit.task_spec().writer("t-0")
    with pytest.raises(errortable.writing.commit.ErrorTableError, match="not ErrorRecord rows"):
        writer.write_arrow(pa.table({"x": [1]}))


def test_the_columnar_builder_matches_the_per_record_builder() -> None:
    """The PII path builds one dict per record; the fast path builds columns. With a policy
    that changes nothing, both give the same rows (apart from the policy's own notes)."""
    # (no invalid partition values: with any redaction on, a partition path that cannot be
    # split into name=value parts is hidden whole, on purpose)
    source = batch(4, {"cast": 3, "key": 2, "check": 3})
    context = {"commit_time": "20240101000000000", "table_name": "events",
               "task_attempt": "t-9", "source_file": "in.parquet", "first_offset": 100}
    fast = validator()
    per_record = validator(config=errortable.ErrorTableConfig(redact=("no_such_field",)))
    good_a, a = fast.split(source, context)
    good_b, b = per_record.split(source, context)
    assert good_a.equals(good_b) and len(a) == len(b) == 8
    notes = {"payload", "redactedFields"}
    for x, y in zip(a, b, strict=True):
        assert {k: v for k, v in x["context"].items() if k not in notes} == \
            {k: v for k, v in y["context"].items() if k not in notes}
        assert json.loads(x["record"]) == json.loads(y["record"])
        assert x["message"] == y["message"] and x["schema"] == y["schema"]
