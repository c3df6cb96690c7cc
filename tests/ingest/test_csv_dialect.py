"""CSV dialects with Spark's reader options: `sep` (the field separator) and `header`
(whether a file's first record names the columns). Any separator reads as RFC 4180 reads
a comma: a quoted field may hold it, commas are then ordinary characters, and the
vectorized pass and errortable's parser agree on every record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errortable import parse_csv_lines
from markerstore import config
from markerstore.cli import cli
from markerstore.errors import ConfigError, SchemaError, SourceError
from markerstore.ingest.csvsplit import record_ends
from markerstore.ingest.infer import infer_schema
from markerstore.ingest.parse import csv_text
from markerstore.ingest.pipeline import ingest
from markerstore.ingest.sources import implied_separator, list_tasks
from markerstore.values.csv import Dialect, QuoteScanner, strip_line_end
from tests.support.ingest_run import ordered, reasons, run
from tests.support.readback import assert_records, data_rows

ABC = "a STRING, b STRING, c STRING"


@pytest.mark.parametrize("sep", [";", "\t", "|", " ", "\\t"])
def test_a_separator_reads_as_a_comma_does(tmp_path: Path, sep: str) -> None:
    """Quoted fields hold the separator, quotes and line breaks; a comma is an ordinary
    character; a record with the wrong count of fields is one parse error naming it."""
    d = "\t" if sep == "\\t" else sep
    text = (f"a{d}b{d}c\n1{d}x,y{d}3\n\"4{d}4\"{d}\"q\"\"\nr\"{d}\n"
            f"5{d}only_two\n7{d}8{d}9\n")
    rows, errors = run(tmp_path / "in.csv", text.encode(), ABC, options={"sep": sep})
    assert rows == ordered([{"a": "1", "b": "x,y", "c": "3"},
                            {"a": f"4{d}4", "b": 'q"\nr', "c": None},
                            {"a": "7", "b": "8", "c": "9"}])
    assert reasons(errors) == [("parse", "5")]
    assert "expected 3 fields, got 2" in errors[0]["message"]
    assert json.loads(errors[0]["record"]) == f"5{d}only_two"


def test_a_comma_file_read_with_another_separator_is_one_field_per_record(
        tmp_path: Path) -> None:
    """The separator is the option's, never guessed: a comma-separated file read with
    sep=';' has a one-column header, so a one-column schema reads each line whole."""
    rows, errors = run(tmp_path / "in.csv", b"a,b\n1,2\n", "`a,b` STRING",
                       options={"sep": ";"})
    assert rows == [{"a,b": "1,2"}] and errors == []


def test_without_a_header_every_record_is_data_by_position(tmp_path: Path) -> None:
    data = b'1,"x\ny",2.5\n2,,\nthree,z,1\n4,w\n'
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, s STRING, d DOUBLE",
                       options={"header": "false"})
    assert rows == ordered([{"id": 1, "s": "x\ny", "d": 2.5},
                            {"id": 2, "s": None, "d": None}])
    assert reasons(errors) == [("cast", "4"), ("parse", "5")]
    # The same file with a header (the default) loses its first record to the header.
    rows, errors = run(tmp_path / "with.csv", b"id,s,d\n" + data,
                       "id BIGINT, s STRING, d DOUBLE")
    assert len(rows) == 2 and reasons(errors) == [("cast", "5"), ("parse", "6")]


def test_an_inferred_schema_without_a_header_names_columns_as_spark_does(
        tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b"1;x;2.5\n2;y;3.5\n")
    tasks = list_tasks(str(path))
    schema = infer_schema(tasks, None, {"sep": ";", "header": "false"})
    assert schema.names == ["_c0", "_c1", "_c2"]
    assert schema.field("_c0").type == pa.int64() and schema.field("_c2").type == pa.float64()
    schema = infer_schema(tasks, None, {"sep": ";"})
    assert schema.names == ["1", "x", "2.5"]


@pytest.mark.parametrize("value", ["", ";;", '"', "\n", "\r", "\\x", "\ud800"])
def test_a_separator_that_cannot_be_one_is_refused_in_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.resolve({"sep": value})
    message = str(caught.value)
    assert message.startswith("option sep: expected one character") and "\n" not in message


def test_the_cli_refuses_a_bad_separator_before_anything_runs(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"a,b\n1,2\n")
    result = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "t"),
                                      "--option", "sep=;;"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert "option sep: expected one character" in line
    assert not (tmp_path / "t").exists()


# Pieces of CSV text, with the separator (D) and the escape (E) as placeholders.
_PIECES = st.sampled_from(['"', "D", ",", "\n", "\r\n", "a", "bc", '""', '"xDy"', '"x\ny"',
                           "DD", " ", "é", "E", 'E"', "EE", '"xE"y"', "\\"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([",", ";", "\t", "|", "."]), st.sampled_from(['"', "\\", "^"]),
       st.lists(_PIECES, max_size=30), st.lists(st.integers(1, 12), max_size=4))
def test_the_vectorized_pass_agrees_with_the_parser_for_any_dialect(
        sep: str, escape: str, pieces: list[str], cuts: list[int]) -> None:
    """For any text, separator and escape: the vectorized record ends are errortable's
    scanner's, fed whole or in pieces, and every record the vectorized pass reads as a row
    reads the same in errortable's parser (the rest go to the parser, which decides)."""
    text = "".join(pieces).replace("D", sep).replace("E", escape)
    data = text.encode()
    ends = record_ends(data, False, sep, escape=escape).tolist()
    assert ends == QuoteScanner(bytes, sep, escape).feed(data)
    scanner, fed, position = QuoteScanner(bytes, sep, escape), [], 0
    for size in [*cuts, len(data)]:  # the same text fed in pieces
        piece = data[position:position + size]
        fed += [position + end for end in scanner.feed(piece)]
        position += len(piece)
    assert fed == ends
    starts = [0, *ends]
    records = [r for r in (strip_line_end(data[a:b]).decode() for a, b in
                           zip(starts, [*ends, len(data)])) if r]
    if not records:
        return
    names = ["a", "b", "c"]
    schema = pa.schema([(n, pa.string()) for n in names])
    parsed = csv_text(pa.array(records, pa.large_string()), schema, names, False,
                      dialect=Dialect(delimiter=sep, escape=escape))
    for row, i in zip(parsed.table.to_pylist(), parsed.rows.tolist(), strict=True):
        reference = parse_csv_lines([records[i]], header=names, delimiter=sep,
                                    escape=escape)
        assert reference.errors == [] and reference.records == [row], records[i]


# What Spark's CSV writer wrote (PySpark 4.3, default options: escape \, quote ") for these
# values, and the values: read with escape=\, every one comes back as it was written.
SPARK_WRITTEN = (b'id,s\n0,plain\n1,"a\\"b"\n2,a\\b\n3,"a\\\\\\"b"\n4,"a,b"\n5,"a\nb"\n'
                 b'6,""\n7,\n8,"\\"q\\""\n9,end\\\n10,"x,y\\\\"\n11,"a\\\\\\\\\\"b"\n'
                 b'12,"a\\\\\\\\b,c"\n13,\\\n14,"\\\\\\""\n15,"a\\\\,b"\n16,\\\\\n'
                 b'17,"q\\""\n18,"\\""\n19,"x\\\\\ny"\n')
SPARK_VALUES = ["plain", 'a"b', "a\\b", 'a\\"b', "a,b", "a\nb", None, None, '"q"', "end\\",
                "x,y\\", 'a\\\\"b', "a\\\\b,c", "\\", '\\"', "a\\,b", "\\\\", 'q"', '"',
                "x\\\ny"]


def test_csv_that_spark_wrote_reads_back_exactly_with_its_escape(tmp_path: Path) -> None:
    rows, errors = run(tmp_path / "spark.csv", SPARK_WRITTEN, "id BIGINT, s STRING",
                       options={"escape": "\\"})
    assert errors == []
    assert [r["s"] for r in sorted(rows, key=lambda r: r["id"])] == SPARK_VALUES
    # Read as RFC 4180 (the default), an escaped quote ends its field: those records are
    # errors, never rows with a value cut short.
    rows, errors = run(tmp_path / "rfc.csv", SPARK_WRITTEN, "id BIGINT, s STRING")
    escaped_quotes = {1, 3, 8, 11, 14, 17, 18}
    assert not {r["id"] for r in rows} & escaped_quotes
    failed = {int(json.loads(e["record"]).split(",", 1)[0]) for e in errors}
    # 17's last quote opens a field that the next line's closes: 17 and 18 are one record.
    assert failed == escaped_quotes - {18}


def test_an_escape_that_is_the_separator_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="escape ';' is the field separator"):
        run(tmp_path / "in.csv", b"a\n1\n", "a STRING", options={"sep": ";", "escape": ";"})
    with pytest.raises(ConfigError, match="option escape: expected one ASCII character"):
        config.resolve({"escape": "\\\\\\"})


def test_tab_separated_files_are_named_so(tmp_path: Path) -> None:
    for name in ("a.tsv", "b.TAB", "c.tsv.gz", "d.csv"):
        (tmp_path / name).write_bytes(b"")
    tasks = list_tasks(str(tmp_path))
    assert sorted(t.url.rsplit("/", 1)[-1] for t in tasks if t.format == "csv") == [
        "a.tsv", "b.TAB", "c.tsv.gz", "d.csv"]
    with pytest.raises(SourceError, match="mixes tab-separated"):
        implied_separator(tasks)
    tsv = [t for t in tasks if not t.url.endswith(".csv")]
    assert implied_separator(tsv) == "\t"
    assert implied_separator([t for t in tasks if t.url.endswith(".csv")]) is None


@pytest.mark.spark
def test_a_tsv_source_reads_with_tabs_unless_told_otherwise(spark: Any, tmp_path: Path
                                                            ) -> None:
    """Through Spark, read back from the commit: a .tsv file is tab-separated by its
    name; a separator given says otherwise (here each line is one field, and the quote
    inside the first makes it a parse error)."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "people.tsv").write_bytes(b'id\tname\n1\t"Ann, Lee"\n2\tBo\n3\n')
    table = str(tmp_path / "t")
    result = ingest(str(source), table, schema="id BIGINT, name STRING", spark=spark,
                    markers="direct", progress=False)
    rows = sorted(data_rows(table).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "Ann, Lee"}, {"id": 2, "name": "Bo"}]
    assert result.error_records == {"parse": 1}
    assert_records(table, 3, rows=2, errors={"parse": 1})
    other = str(tmp_path / "o")
    result = ingest(str(source), other, schema="`id\tname` STRING", spark=spark,
                    markers="direct", progress=False, options={"sep": "|"})
    assert sorted(r["id\tname"] for r in data_rows(other).to_pylist()) == ["2\tBo", "3"]
    assert result.error_records == {"parse": 1}


def test_a_schema_is_inferred_with_the_dialect_or_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b'id;s\n1;"a\\";b"\n2;x\n')
    tasks = list_tasks(str(path))
    schema = infer_schema(tasks, None, {"sep": ";", "escape": "\\"})
    assert schema == pa.schema([("id", pa.int64()), ("s", pa.string())])
    # a record of another width is left out (it is an error record when read) ...
    path.write_bytes(b"id,s\n1,x,y,z\n2,3\n")
    assert infer_schema(list_tasks(str(path)), None) == pa.schema(
        [("id", pa.int64()), ("s", pa.int64())])
    # ... and with none of the header's width left, the schema is refused in one line
    path.write_bytes(b"id,s\n1,x,y,z\n2\n")
    with pytest.raises(SchemaError, match="pass --schema") as caught:
        infer_schema(list_tasks(str(path)), None)
    assert "x,y" not in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("header", "sep"), [(b"id;s", ";"), (b"id\ts", "\t"), (b"id|s", "|")])
def test_a_header_that_looks_separated_otherwise_is_refused_before_spark_starts(
        tmp_path: Path, header: bytes, sep: str) -> None:
    """Without a separator given, a header that reads as one column and holds another
    common separator stops the ingest in one line naming the option (every record would
    fail, or an inferred schema be one column): nothing starts, nothing is written."""
    source = tmp_path / "in.csv"
    source.write_bytes(header + b"\n" + header.replace(b"id", b"1").replace(b"s", b"x") + b"\n")
    table = tmp_path / "t"
    with pytest.raises(SourceError) as caught:
        ingest(str(source), str(table), spark=object(), progress=False)  # never used
    message = str(caught.value)
    assert "reads as one column" in message and f"--option sep={sep!r}" in message
    assert "\n" not in message and not table.exists()
    result = CliRunner().invoke(cli, ["ingest", str(source), str(table), "--no-progress"])
    assert result.exit_code == 2 and f"sep={sep!r}" in result.output, result.output
    assert not table.exists()
