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
from errortable.csvtext import QuoteScanner
from markerstore import config
from markerstore.cli import cli
from markerstore.errors import ConfigError
from markerstore.ingest.blocks import ReadOptions
from markerstore.ingest.csvsplit import record_ends
from markerstore.ingest.infer import infer_schema
from markerstore.ingest.pipeline import ingest
from markerstore.ingest.reader import parse_csv
from markerstore.ingest.sources import SourceError, implied_separator, list_tasks
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
    schema = infer_schema(tasks, None, options=ReadOptions(delimiter=";"), header=False)
    assert schema.names == ["_c0", "_c1", "_c2"]
    assert schema.field("_c0").type == pa.int64() and schema.field("_c2").type == pa.float64()
    schema = infer_schema(tasks, None, options=ReadOptions(delimiter=";"))
    assert schema.names == ["1", "x", "2.5"]


@pytest.mark.parametrize("value", ["", ";;", '"', "\n", "\r", "é", "\\x"])
def test_a_separator_that_cannot_be_one_is_refused_in_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.resolve({"sep": value})
    message = str(caught.value)
    assert message.startswith("option sep: expected one ASCII character") and "\n" not in message


def test_the_cli_refuses_a_bad_separator_before_anything_runs(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"a,b\n1,2\n")
    result = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "t"),
                                      "--option", "sep=;;"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert "option sep: expected one ASCII character" in line
    assert not (tmp_path / "t").exists()


# Pieces of CSV text, with the separator as a placeholder.
_PIECES = st.sampled_from(['"', "D", ",", "\n", "\r\n", "a", "bc", '""', '"xDy"', '"x\ny"',
                           "DD", " ", "é"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([",", ";", "\t", "|", "."]), st.lists(_PIECES, max_size=30))
def test_the_vectorized_pass_agrees_with_the_parser_for_any_separator(
        sep: str, pieces: list[str]) -> None:
    """For any text and separator: the vectorized record ends are errortable's scanner's,
    and every record the vectorized pass reads as a row reads the same in errortable's
    parser (the rest go to the parser, which decides them)."""
    text = "".join(pieces).replace("D", sep)
    data = text.encode()
    assert record_ends(data, False, sep).tolist() == QuoteScanner(bytes, sep).feed(data)
    records = [r for r in text.replace("\r\n", "\n").split("\n") if r]
    if not records:
        return
    width = 3
    names = ["a", "b", "c"]
    schema = pa.schema([(n, pa.string()) for n in names])
    parsed = parse_csv(pa.array(records, pa.large_string()), schema, names, False,
                       delimiter=sep)
    for row, i in zip(parsed.table.to_pylist(), parsed.rows.tolist(), strict=True):
        reference = parse_csv_lines([records[i]], header=names, delimiter=sep)
        assert reference.errors == [] and reference.records == [row], (records[i], width)


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
