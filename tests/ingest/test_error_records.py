"""The error records of the ingest task's suspect lines, built as Arrow columns, are the
records errortable's per-record path builds (parse_json_lines / parse_csv_lines and
Validator.split_records): every field but uid and ts, the context as ordered pairs."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import errortable
from errortable import parse_csv_lines, parse_json_lines
from errortable.capture.parsing import parse_csv_block, parse_json_block
from markerstore.commit import TaskSpec
from markerstore.ingest.blocks import split_records
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.task import IngestTask, _Timer
from tests.ingest.test_differential import CHECKS, CSV_DDL, DDL, _csv_text, _good, _variants
from tests.support.ingest_reference import LONE_CR


def _plain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records without uid and ts, the context as pairs; without sourceOffset, which only
    the block path knows (tests/ingest/test_parsing_csv.py checks it)."""
    out = []
    for r in records:
        context = r["context"]
        pairs = list(context.items()) if isinstance(context, dict) else list(context)
        pairs = [(k, v) for k, v in pairs if k != "sourceOffset"]
        out.append({**{k: v for k, v in r.items() if k not in ("uid", "ts", "reason")},
                    "context": pairs})
    return out


def _per_record(data: bytes, first: int, fmt: str, validator: Any, ctx: Any,
                header: list[str] | None, options: Any) -> list[dict[str, Any]]:
    """The per-record path over the physical lines of `data` (it joins CSV records)."""
    lines = data.split(b"\n")
    if fmt == "csv":  # a lone CR ends a CSV line too (Spark's default lineSep)
        lines = [line + b"\n" for line in lines[:-1]] + lines[-1:]
        lines = [piece for line in lines for piece in LONE_CR.split(line)]
        parsed = parse_csv_lines(lines, ctx,
                                 header=header, first_line=first, options=options)
    else:
        parsed = parse_json_lines([line.removesuffix(b"\r") for line in lines], ctx,
                                  first_line=first, options=options)
    _, errors = validator.split_records(parsed.records, ctx, line_numbers=parsed.line_numbers)
    return list(parsed.errors) + list(errors)


def _both(data: bytes, fmt: str, validator: Any, header: list[str] | None = None,
          extra: dict[str, str] | None = None, every_line_suspect: bool = False
          ) -> tuple[list[Any], list[Any]]:
    block = split_records(data, fmt, first_line=7, offset=100)
    ctx = errortable.CaptureContext(task_attempt="t-1", source_file="s3://in/x",
                                    commit_time="20261122000000000", extra=extra or {})
    task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"), validator,
                      errortable.CaptureContext)
    if every_line_suspect:  # all through the parser and split_records
        _, table = task._reference(block, np.arange(len(block), dtype=np.int64), fmt, header,
                                   ctx)
        raw = task._raw(block.raw, ctx)
        if raw is not None:
            table = raw if table is None else pa.concat_tables([raw, table])
    else:  # the vectorized pass, split_typed for its rows, the parser for its suspects
        _, table = task._block(block, fmt, header, ctx, _Timer({}))
    new = [] if table is None else table.to_pylist()
    old = _per_record(data, 7, fmt, validator, ctx, header, task.parse_options)
    assert table is None or table.column("reason").to_pylist() == [
        dict(r["context"])["reason"] for r in new]
    if every_line_suspect:  # the same records in the same order (the raw ones first)
        def line(r: dict[str, Any]) -> int:
            return int(dict(r["context"])["sourceLine"])

        return _plain(sorted(old, key=line)), _plain(sorted(new, key=line))
    if fmt == "csv":  # a CSV parse error's `schema` is known once a line of the same
        # parser call parsed (the per-record path sees every line, the task its suspects)
        old = [{**r, "schema": None} if dict(r["context"])["reason"] == "parse" else r
               for r in old]
        new = [{**r, "schema": None} if dict(r["context"])["reason"] == "parse" else r
               for r in new]
    return sorted(_plain(old), key=repr), sorted(_plain(new), key=repr)


@pytest.mark.parametrize("every_line_suspect", [True, False])
@pytest.mark.parametrize("extra_columns", ["error", "ignore"])
def test_json_error_records_are_the_per_record_ones(extra_columns: str,
                                                    every_line_suspect: bool) -> None:
    rng = random.Random(11)
    lines = [v for i in range(3) for v in _variants(_good(i, rng))]
    validator = errortable.Validator(ddl_to_arrow(DDL), "id", ["day"], CHECKS,
                                     extra_columns=extra_columns)
    old, new = _both(b"\n".join(lines), "json", validator,
                     every_line_suspect=every_line_suspect)
    assert len(old) > 100
    assert new == old
    reasons = {dict(r["context"])["reason"] for r in new}
    assert {"parse", "cast", "key", "partition", "check"} <= reasons


@pytest.mark.parametrize("every_line_suspect", [True, False])
def test_csv_error_records_are_the_per_record_ones(every_line_suspect: bool) -> None:
    validator = errortable.Validator(ddl_to_arrow(CSV_DDL), "id", [], {"pos": "score >= 0"})
    data = _csv_text(400, 3).split(b"\n", 1)[1]
    old, new = _both(data, "csv", validator, ["id", "name", "score", "ok", "day"],
                     every_line_suspect=every_line_suspect)
    assert len(old) > 20
    assert new == old
    if every_line_suspect:
        assert any(r["schema"] is None for r in new) and any(r["schema"] for r in new)


def test_a_context_key_the_record_sets_is_built_one_by_one() -> None:
    """A base context holding a key the parse-error record sets again keeps the key's
    first position (a dict update): the record is built one by one, as before."""
    validator = errortable.Validator(ddl_to_arrow("id BIGINT"))
    old, new = _both(b'{"id": 1}\n{"id": \n[2]\n', "json", validator,
                     extra={"sourceLine": "x", "other": "y"})
    assert len(new) == 2 and new == old


def test_parse_blocks_match_the_line_parsers() -> None:
    texts: list[str | bytes] = ['{"a": 1}', '{"a": 1', "[1]", "", "  ", '{"a": "\\ud800"}',
                                'x"y\\z', '{"a":1}{', b'\xff{"a":1}', "\x01bad", "1,2"]
    ctx = errortable.CaptureContext(source_file="f")
    numbers = list(range(3, 3 + len(texts)))
    old = parse_json_lines(texts, ctx, line_numbers=numbers)
    new = parse_json_block(texts, ctx, line_numbers=numbers)
    assert _plain(new.errors.to_pylist()) == _plain(old.errors)
    assert (new.records, new.line_numbers) == (old.records, old.line_numbers)
    csv_old = parse_csv_lines(texts, ctx, header=["a", "b"], line_numbers=numbers)
    csv_new = parse_csv_block(texts, ctx, header=["a", "b"], line_numbers=numbers)
    assert _plain(csv_new.errors.to_pylist()) == _plain(csv_old.errors)
    assert csv_new.records == csv_old.records


@pytest.mark.parametrize("policy", [{"redact": ("s", "day")}, {"drop_payload": True}])
def test_a_pii_policy_gives_the_per_record_records(policy: dict[str, Any]) -> None:
    from errortable.config import ErrorTableConfig

    rng = random.Random(12)
    lines = [v for i in range(2) for v in _variants(_good(i, rng))]
    validator = errortable.Validator(ddl_to_arrow(DDL), "id", ["day"], CHECKS,
                                     config=ErrorTableConfig(**policy))
    old, new = _both(b"\n".join(lines), "json", validator)
    assert len(old) > 50 and new == old
    raw = ("parse", "encoding")  # built as raw text; the task writer applies the policy
    assert not any("name 1" in str(r["record"]) for r in new if
                   dict(r["context"])["reason"] not in raw)
    builder = errortable.RecordBuilder(ErrorTableConfig(**policy))
    stored = [builder.protect({**r, "context": dict(r["context"])}) for r in new
              if dict(r["context"])["reason"] in raw]
    assert stored and not any(r["record"] or "recordBase64" in r["context"] for r in stored)
