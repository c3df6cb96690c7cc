"""The structure of CSV records: an empty line is no record, before the header as anywhere
else, so the header is the first record that is not empty (on the driver, in schema
inference, in every task); option names match without case, as Spark's do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from markerstore import config
from markerstore.cli import cli
from markerstore.errors import ConfigError
from markerstore.ingest.blocks import ReadOptions
from markerstore.ingest.infer import csv_header, infer_schema
from markerstore.ingest.pipeline import ingest
from markerstore.ingest.sources import list_tasks
from tests.support.ingest_run import ordered, run
from tests.support.readback import assert_records, data_rows

AB = "a BIGINT, b STRING"
ROWS = ordered([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])


def _file(end: str, before: int, between: int, after: int) -> bytes:
    """A header and two records with `before`, `between` and `after` empty lines."""
    lines = [""] * before + ["a,b", "1,x"] + [""] * between + ["2,y"] + [""] * after
    return "".join(line + end for line in lines).encode()


@pytest.mark.parametrize("end", ["\n", "\r\n"])
@pytest.mark.parametrize(("before", "between", "after"), [(1, 0, 0), (3, 2, 1), (0, 1, 4)])
@pytest.mark.parametrize("block_bytes", [None, 3])
def test_empty_lines_are_no_records_before_the_header_between_and_at_the_end(
        tmp_path: Path, end: str, before: int, between: int, after: int,
        block_bytes: int | None) -> None:
    data = _file(end, before, between, after)
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "in.csv", data, AB, counts=counts, block_bytes=block_bytes)
    assert (rows, errors) == (ROWS, [])
    assert counts == {"records": 2, "lines": before + between + after + 3}
    assert csv_header(list_tasks(str(tmp_path / "in.csv"))[0], None) == "a,b"


def test_a_byte_order_mark_before_an_empty_first_line(tmp_path: Path) -> None:
    rows, errors = run(tmp_path / "in.csv", b"\xef\xbb\xbf\r\na,b\r\n1,x\r\n2,y\r\n", AB)
    assert (rows, errors) == (ROWS, [])


def test_a_file_of_empty_lines_has_no_header_and_no_record(tmp_path: Path) -> None:
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "in.csv", b"\n\r\n\n", AB, counts=counts, block_bytes=1)
    assert (rows, errors, counts["records"]) == ([], [], 0)
    assert csv_header(list_tasks(str(tmp_path / "in.csv"))[0], None) == ""


def test_a_record_that_is_not_text_before_the_header_takes_its_place(tmp_path: Path) -> None:
    """The first record that is not empty is the header, text or not: a record whose bytes
    are not UTF-8 there leaves the file without a header, so its records are errors."""
    rows, errors = run(tmp_path / "in.csv", b"\n\xff,b\n1,x\n", AB)
    assert rows == [] and [e["context"]["reason"] for e in errors] == ["parse"]


def test_an_inferred_schema_reads_the_header_after_empty_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b"\r\n\nyear,make\n2012,Tesla\n\n1997,Ford\n")
    schema = infer_schema(list_tasks(str(path)), None)
    assert schema == pa.schema([("year", pa.int64()), ("make", pa.string())])


@pytest.mark.spark
def test_a_file_starting_with_an_empty_line_loses_no_record(spark: Any, tmp_path: Path
                                                             ) -> None:
    """Through Spark and the CLI, read back from the commit: Spark's own sample files start
    with an empty line; every record is a row, and the source count is the records'."""
    source = tmp_path / "cars.csv"
    source.write_bytes(b"\nyear,make,model\n2012,Tesla,S\n\n1997,Ford,E350\n2015,Chevy,Volt\n")
    table = str(tmp_path / "t")
    result = ingest(str(source), table, spark=spark, markers="direct", progress=False)
    assert result.error_records == {}
    assert sorted(data_rows(table).column("year").to_pylist()) == [1997, 2012, 2015]
    assert_records(table, 3, rows=3, errors={})
    other = str(tmp_path / "cli")
    out = CliRunner().invoke(cli, ["ingest", str(source), other, "--no-progress", "--json",
                                   "--markers", "direct", "--option", "HEADER=true"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert summary["rows_written"] == 3 and summary["error_records"] == 0, summary
    assert_records(other, 3, rows=3, errors={})


@pytest.mark.parametrize(("given", "key"), [
    ("multiline", config.INGEST_JSON_MULTILINE), ("MULTILINE", config.INGEST_JSON_MULTILINE),
    ("Sep", config.INGEST_CSV_SEP), ("nullvalue", config.INGEST_NULL_VALUE),
    ("MARKERSTORE.INGEST.CSV.HEADER", config.INGEST_CSV_HEADER)])
def test_option_names_match_without_case_as_spark_matches_them(given: str, key: str) -> None:
    value = {config.INGEST_CSV_SEP: ";", config.INGEST_NULL_VALUE: "NA"}.get(key, "true")
    resolved = config.resolve({given: value})
    assert resolved.given == {key: config.OPTIONS[key].parse(value)}


def test_an_option_given_twice_in_two_cases_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="given twice") as caught:
        config.resolve({"multiLine": "true", "multiline": "false"})
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="did you mean"):
        config.resolve({"multilines": "true"})


@pytest.mark.spark
def test_failfast_allows_no_malformed_record_and_rolls_the_write_back(spark: Any,
                                                                       tmp_path: Path) -> None:
    """Spark's mode=FAILFAST: a file with one bad record fails the write in one line naming
    the reason, and nothing of it is committed; a clean file commits as in PERMISSIVE."""
    from markerstore.errors import ErrorBudgetExceeded

    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\n1,x\ntwo,y\n3,z\n")
    table = str(tmp_path / "t")
    with pytest.raises(ErrorBudgetExceeded) as caught:
        ingest(str(bad), table, schema=AB, spark=spark, markers="direct", progress=False,
               options={"MODE": "failfast"})
    message = str(caught.value)
    assert "FAILFAST: 1 of 3 records are malformed (cast 1)" in message, message
    assert "\n" not in message and "rolled back" in message
    assert data_rows(table).num_rows == 0
    out = CliRunner().invoke(cli, ["ingest", str(bad), str(tmp_path / "c"), "--schema", AB,
                                   "--no-progress", "--markers", "direct",
                                   "--option", "mode=FAILFAST"])
    assert out.exit_code == 1 and "FAILFAST" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1
    good = tmp_path / "good.csv"
    good.write_bytes(b"a,b\n1,x\n3,z\n")
    result = ingest(str(good), table, schema=AB, spark=spark, markers="direct",
                    progress=False, options={"mode": "FAILFAST"})
    assert result.error_records == {} and data_rows(table).num_rows == 2


@pytest.mark.parametrize(("option", "words"), [
    ("mode=DROPMALFORMED", "the error table"), ("mode=dropMalformed", "the error table"),
    ("mode=LENIENT", "PERMISSIVE or FAILFAST"),
    ("columnNameOfCorruptRecord=_corrupt_record", "the error table holds")])
def test_what_cannot_be_meant_here_is_refused_in_one_line_before_anything_runs(
        tmp_path: Path, option: str, words: str) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"a,b\n1,x\n")
    out = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "t"),
                                   "--option", option])
    assert out.exit_code == 2, out.output
    (line,) = out.output.strip().splitlines()
    assert words in line and option.split("=")[0] in line
    assert not (tmp_path / "t").exists()


def test_reading_a_header_is_linear_whatever_the_line_ends(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The header is read a block at a time by the quote scanner, whose state carries over:
    every byte is scanned once, even when no line end comes for megabytes (a file whose
    lines end with CR alone read with lineSep=\\n, one long line)."""
    from markerstore.values import csv as csvtext

    fed: list[int] = []
    feed = csvtext.QuoteScanner.feed

    def counting(self: Any, data: Any) -> list[int]:
        fed.append(len(data))
        return feed(self, data)

    monkeypatch.setattr(csvtext.QuoteScanner, "feed", counting)
    path = tmp_path / "cr.csv"
    path.write_bytes(b"a,b\r" + b"1,x\r" * 1_000_000)  # 4 MB, no LF
    task = list_tasks(str(path))[0]
    assert csv_header(task, None) == "a,b" and sum(fed) <= 64 * 1024
    fed.clear()
    options = ReadOptions(line_sep="\n", max_record_bytes=8 * 1024 * 1024)
    assert csv_header(task, None, options) == "a,b\r" + "1,x\r" * 1_000_000
    assert sum(fed) <= path.stat().st_size
    fed.clear()
    small = ReadOptions(line_sep="\n", max_record_bytes=1024 * 1024)
    assert csv_header(task, None, small) == ""  # larger than a record may be
    assert sum(fed) <= 1024 * 1024 + 64 * 1024


def test_a_file_of_lines_ending_with_cr_alone_reads_every_record(tmp_path: Path) -> None:
    counts: dict[str, int] = {}
    data = b"a,b\r" + b"".join(b"%d,x%d\r" % (i, i) for i in range(5000))
    rows, errors = run(tmp_path / "cr.csv", data, AB, counts=counts, block_bytes=1000)
    assert errors == [] and len(rows) == 5000 and counts == {"records": 5000, "lines": 5001}


def test_a_header_of_20000_columns_reads_through_the_reference_path() -> None:
    """Too wide for the vectorized pass's expression (RE2 refuses so large a pattern): a
    record of plain fields is read by counting its delimiters, the same values as
    errortable's parser reads; one with a quoted field, or another number of fields, is
    a suspect for errortable's parser, which reads it; never an exception."""
    from errortable.capture.parsing import parse_csv_block
    from markerstore.ingest.parse import csv_text
    from markerstore.values.csv import Dialect

    names = [f"c{i}" for i in range(20_000)]
    schema = pa.schema([(n, pa.string()) for n in names])
    records = [",".join(str(r * 7 + i % 5) for i in range(20_000)) for r in range(3)]
    quoted = '"q",' + records[0].partition(",")[2]
    texts = records + ["not,a,row", quoted]
    parsed = csv_text(pa.array(texts, pa.large_string()), schema, names, False,
                      dialect=Dialect())
    assert parsed.suspects.tolist() == [3, 4] and parsed.table.num_rows == 3
    reference = parse_csv_block(texts, header=names)
    assert [r["c0"] for r in reference.records] == ["0", "7", "14", "q"]
    assert reference.records[2]["c19999"] == str(14 + 19_999 % 5)
    assert parsed.table.to_pylist() == reference.records[:3]
    assert reference.errors.num_rows == 1


def test_line_sep_for_json_files_is_refused_in_one_line(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_bytes(b'{"a": 1}\n')
    from markerstore.errors import SourceError

    with pytest.raises(SourceError, match="lineSep: read for CSV files only") as caught:
        ingest(str(source), str(tmp_path / "t"), spark=object(), progress=False,
               options={"lineSep": "\\r"})
    assert "\n" not in str(caught.value) and not (tmp_path / "t").exists()
