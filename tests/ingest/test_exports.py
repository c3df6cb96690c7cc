"""Real exports, each row of what a new user meets first (issue 37), through
`markerstore.ingest` and through the CLI, read back from the committed files: a Latin-1
file read without `encoding`, a header of bytes that are no UTF-8, header names as Spark
names them, grouping separators only where they group, codes with leading zeros, title
lines (`skip`) and short records (`null_padding`), a file of mostly `encoding` errors,
any single character as `sep`; and two of issue 38: files whose headers list the same
columns in other orders, and ISO timestamps with more than six digits of a second.

Each file is built here from the rule it tests (RFC 4180's records, Spark's
`CSVUtils.makeSafeHeader`, DuckDB's `read_csv` options, ISO 8601), not copied from an
export."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from markerstore import config
from markerstore.cli import cli
from markerstore.errors import SourceError
from markerstore.ingest.infer import infer_schema
from markerstore.ingest.pipeline import ingest
from markerstore.ingest.sources import list_tasks
from tests.support.ingest_run import reasons, run
from tests.support.readback import assert_records, data_rows, error_rows

SEADE = '"Localidades";"Popula\u00e7\u00e3o";"Raz\u00e3o de Sexos"\n'  # a Latin-1 export's header
SEADE_ROWS = ['"Adamantina";"33882";"93,28"', '"Adolfo";"3554";"101,5"',
              '"Agua\u00ed";"33580";"97,93"']


def _both(spark: Any, tmp_path: Path, source: Path, *args: str,
          options: dict[str, str] | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """The ingest of `source` through the API (into `api`) and through the CLI (into
    `cli`, with `args` and `options` as --option): (IngestResult, the CLI's JSON summary)."""
    result = ingest(str(source), str(tmp_path / "api"), spark=spark, markers="direct",
                    progress=False, options=options, **kwargs)
    flags = [a for k, v in (options or {}).items() for a in ("--option", f"{k}={v}")]
    out = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "cli"),
                                   "--markers", "direct", "--no-progress", "--json",
                                   *args, *flags])
    assert out.exit_code == 0, out.output
    return result, json.loads(out.stdout)


def _rows(table: Path, key: str = "id") -> list[dict[str, Any]]:
    return sorted(data_rows(str(table)).to_pylist(), key=lambda r: repr(r.get(key)))


# --- a Latin-1 file read without `encoding` --------------------------------------------
@pytest.mark.parametrize(("header", "named"), [
    (SEADE.encode("latin-1"), "encoding=iso-8859-1"),
    ('"Nom";"Pr\u00e9nom";"Co\u00fbt \u20ac"\n'.encode("cp1252"), "encoding=windows-1252")])
def test_a_header_not_utf8_stops_the_ingest_before_spark_in_one_line_naming_encoding(
        tmp_path: Path, header: bytes, named: str) -> None:
    """Read without `encoding`, a Latin-1 or Windows-1252 export's header is no UTF-8: the
    ingest stops before Spark starts (`spark` is no session here) in one line naming the
    `encoding` option that reads it and `encoding.errors=replace`; it never commits a
    table of no row. The CLI exits 2 with that line."""
    source = tmp_path / "export.csv"
    source.write_bytes(header + "\n".join(SEADE_ROWS).encode("latin-1") + b"\n")
    with pytest.raises(SourceError) as caught:
        ingest(str(source), str(tmp_path / "t"), spark=object(), options={"sep": ";"})
    line = str(caught.value)
    assert "\n" not in line and named in line
    assert f"{config.INGEST_ENCODING_ERRORS}=replace" in line
    out = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "c"),
                                   "--option", "sep=;", "--no-progress"])
    assert out.exit_code == 2 and named in out.output and len(out.output.splitlines()) == 1
    assert not (tmp_path / "t").exists() and not (tmp_path / "c" / ".markerstore").exists()


@pytest.mark.spark
def test_a_latin1_export_reads_every_record_with_its_encoding(spark: Any, tmp_path: Path
                                                               ) -> None:
    source = tmp_path / "export.csv"
    source.write_bytes((SEADE + "\n".join(SEADE_ROWS) + "\n").encode("latin-1"))
    options = {"sep": ";", "encoding": "iso-8859-1", "locale": "pt-BR"}
    result, summary = _both(spark, tmp_path, source, options=options)
    assert result.schema.names == ["Localidades", "Popula\u00e7\u00e3o", "Raz\u00e3o de Sexos"]
    assert summary["rows_written"] == 3 and summary["error_records"] == 0
    for table in ("api", "cli"):
        assert_records(str(tmp_path / table), 3, rows=3, errors={})
        rows = _rows(tmp_path / table, "Localidades")
        assert [r["Raz\u00e3o de Sexos"] for r in rows] == [
            Decimal("93.28"), Decimal("101.50"), Decimal("97.93")]
        assert rows[2]["Localidades"] == "Agua\u00ed"


# --- the header is the first non-empty record, whatever its bytes ----------------------
def test_the_header_is_the_first_non_empty_record_even_of_bytes_not_utf8(tmp_path: Path
                                                                          ) -> None:
    """Inference took the second line as the header when the first held bytes that are no
    UTF-8, and refused it ("duplicate columns"); the header is the first non-empty record:
    read with U+FFFD (`encoding.errors=replace`) it names the columns, and every task
    drops it alike, so the first data record is a row."""
    data = b"\n" + "id;caf\u00e9".encode("latin-1") + b"\n1;x\n2;y\n"
    source = tmp_path / "in.csv"
    source.write_bytes(data)
    options = {"sep": ";", config.INGEST_ENCODING_ERRORS: "replace"}
    schema = infer_schema(list_tasks(str(source)), None, options)
    assert schema.names == ["id", "caf\ufffd"]
    assert schema.field("id").type == pa.int64()
    rows, errors = run(tmp_path / "again.csv", data, "id BIGINT, `caf\ufffd` STRING",
                       options=options)
    assert errors == [] and rows == [{"id": 1, "caf\ufffd": "x"}, {"id": 2, "caf\ufffd": "y"}]
    with pytest.raises(SourceError, match="encoding=iso-8859-1"):
        infer_schema(list_tasks(str(source)), None, {"sep": ";"})


# --- header names as Spark names them -------------------------------------------------
HEADERS = ["id,,", "Response,Response,response,x,,x0", "a,A,b,NA", "a,b,B,b", ",,"]


def test_header_names_are_spark_safe_header_names() -> None:
    """CSVUtils.makeSafeHeader: an empty name (or nullValue) is `_c<index>`; a name given
    more than once, compared without case unless spark.sql.caseSensitive, is
    `<name><index>` each time."""
    from markerstore.ingest.header import safe_names
    from markerstore.ingest.pipeline import _case_sensitive

    assert safe_names(["id", "", ""]) == ["id", "_c1", "_c2"]
    assert safe_names(["Response", "Response", "response", "x", "", "x0"]) == [
        "Response0", "Response1", "response2", "x", "_c4", "x0"]
    assert safe_names(["a", "A", "b", "NA"], null_value="NA") == ["a0", "A1", "b", "_c3"]
    assert safe_names(["a", "b", "B", "b"], case_sensitive=True) == ["a", "b1", "B", "b3"]
    assert _case_sensitive(None, {"spark.sql.caseSensitive": "TRUE"})
    assert not _case_sensitive(None, None)


@pytest.mark.spark
@pytest.mark.parametrize("case_sensitive", [False, True])
def test_inferred_header_names_are_those_spark_infers(spark: Any, tmp_path: Path,
                                                      case_sensitive: bool) -> None:
    """Against Spark's own reader (header, inferSchema): the same names for every header,
    with spark.sql.caseSensitive either way."""
    from markerstore.ingest.pipeline import _case_sensitive

    previous = spark.conf.get("spark.sql.caseSensitive")
    spark.conf.set("spark.sql.caseSensitive", str(case_sensitive).lower())
    try:
        for i, header in enumerate(HEADERS):
            source = tmp_path / f"h{i}.csv"
            width = header.count(",") + 1
            source.write_text(f"{header}\n" + ",".join(str(n) for n in range(width)) + "\n")
            options = {"nullValue": "NA"} if "NA" in header else {}
            theirs = spark.read.options(header="true", **options).csv(str(source)).columns
            ours = infer_schema(list_tasks(str(source)), None, options,
                                case_sensitive=_case_sensitive(spark, None)).names
            assert ours == theirs, header
    finally:
        spark.conf.set("spark.sql.caseSensitive", previous)


@pytest.mark.spark
def test_empty_and_repeated_header_names_read_every_record(spark: Any, tmp_path: Path
                                                           ) -> None:
    """`id,,` and `Response,Response` were refused ("duplicate columns:" and nothing);
    they read, every record a row, under the names Spark gives them."""
    source = tmp_path / "survey.csv"
    source.write_text("id,Response,Response,,\n1,yes,no,a,b\n2,no,yes,c,d\n")
    result, summary = _both(spark, tmp_path, source)
    assert result.schema.names == ["id", "Response1", "Response2", "_c3", "_c4"]
    assert summary["rows_written"] == 2 and summary["error_records"] == 0
    for table in ("api", "cli"):
        assert _rows(tmp_path / table) == [
            {"id": 1, "Response1": "yes", "Response2": "no", "_c3": "a", "_c4": "b"},
            {"id": 2, "Response1": "no", "Response2": "yes", "_c3": "c", "_c4": "d"}]


# --- grouping separators only where they group ----------------------------------------
# A field the vectorized pass leaves to the reference parser (a control character: Arrow's
# reader and errortable's parser read it alike, but the clean pattern takes none).
REFERENCE = "a\x01b"
GROUPED = [("80,000.65", Decimal("80000.65")), ("1,234,567", Decimal("1234567.00")),
           ("-1,000.5", Decimal("-1000.50")), ("+1,000", Decimal("1000.00")),
           ("346,50", None), ("1,2,3.4", None), ("1,0000", None), (",5", None),
           ("1,000,00", None), ("12.345,6", None)]


def test_a_decimal_without_locale_takes_grouping_only_between_groups_of_three(
        tmp_path: Path) -> None:
    """`346,50` for a DECIMAL read as 34650.00 without a word (as Spark does); a comma is
    read only where it groups three digits, anything else is a `cast` error naming the
    value, in the vectorized pass and the reference parser alike (a record holding a
    control character goes to the reference)."""
    records = [f'{i},"{text}",{"x" if i % 2 else REFERENCE}' for i, (text, _) in
               enumerate(GROUPED)]
    data = ("id,m,s\n" + "\n".join(records) + "\n").encode()
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, m DECIMAL(12,2), s STRING")
    assert {r["id"]: r["m"] for r in rows} == {i: v for i, (_, v) in enumerate(GROUPED)
                                             if v is not None}
    bad = sorted(i for i, (_, v) in enumerate(GROUPED) if v is None)
    assert [e["context"]["reason"] for e in errors] == ["cast"] * len(bad)
    assert sorted(json.loads(e["record"])["id"] for e in errors) == [str(i) for i in bad]
    assert all("is no number as locale en-US writes one" in e["message"] for e in errors)


@pytest.mark.spark
def test_346_50_for_a_decimal_is_a_cast_error_never_34650(spark: Any, tmp_path: Path
                                                          ) -> None:
    source = tmp_path / "amounts.csv"
    source.write_text('id,amount\n1,"346,50"\n2,"80,000.65"\n3,"14,000"\n')
    _, summary = _both(spark, tmp_path, source, "--schema", "id BIGINT, amount DECIMAL(10,2)",
                       schema="id BIGINT, amount DECIMAL(10,2)")
    assert summary["error_records_by_reason"] == {"cast": 1}
    for table in ("api", "cli"):
        assert _rows(tmp_path / table) == [{"id": 2, "amount": Decimal("80000.65")},
                                          {"id": 3, "amount": Decimal("14000.00")}]
        assert error_rows(str(tmp_path / table), columns="source_line").to_pylist() == [
            {"source_line": 2}]


# --- codes with leading zeros ---------------------------------------------------------
def test_codes_with_leading_zeros_are_inferred_as_text(tmp_path: Path) -> None:
    """A column whose sampled values carry zeros before their first digit (a station id,
    a zip code, a commune code) is text: as a number the zeros would be lost without a
    word (Spark infers a number). `0`, `0.5` and `-0.25` keep their column numeric."""
    (tmp_path / "in.csv").write_text(
        "station,zip,n,x,both\n07005001,00501,0,0.5,08\n07005002,01234,7,-0.25,9\n")
    schema = infer_schema(list_tasks(str(tmp_path / "in.csv")), None)
    assert [str(f.type) for f in schema] == ["string", "string", "int64", "double", "string"]


@pytest.mark.spark
def test_leading_zeros_survive_the_ingest(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "stations.csv"
    source.write_text("NUM_POSTE;ALTI\n07005001;223\n07154005;110\n")
    result, summary = _both(spark, tmp_path, source, options={"sep": ";"})
    assert result.schema.field("NUM_POSTE").type == pa.string()
    assert summary["rows_written"] == 2
    for table in ("api", "cli"):
        assert sorted(r["NUM_POSTE"] for r in _rows(tmp_path / table, "ALTI")) == [
            "07005001", "07154005"]


# --- title lines (skip) and short records (null_padding), DuckDB's options -------------
TITLED = ("GENESIS-Tabelle: 61111-0002\n"
          'Verbraucherpreisindex: "Deutschland, Monate;;\n'  # a stray quote in a title
          "\n"
          "Jahr;Monat;Index\n"
          "1991;Januar;60,5\n"
          "1991;Februar\n"  # a spreadsheet dropped the empty last field
          '1991;"M\u00e4rz\n(1)";60,8\n')


@pytest.mark.parametrize("split_bytes", [None, 40, 70])
@pytest.mark.parametrize("block_bytes", [None, 16])
def test_skip_and_null_padding_read_a_statistics_export(tmp_path: Path, split_bytes: Any,
                                                        block_bytes: Any) -> None:
    """`skip` lines are no CSV (their quotes unread), then the header is the first
    non-empty record; `null_padding` reads a short record's missing last fields as null.
    Whole or in byte ranges, every record is one row, its line and offset in the file."""
    data = TITLED.encode()
    counts: dict[str, int] = {}
    options = {"sep": ";", "skip": "2", "null_padding": "true", "locale": "de-DE"}
    rows, errors = run(tmp_path / "vpi.csv", data, "Jahr BIGINT, Monat STRING, "
                       "Index DECIMAL(4,1)", options=options, split_bytes=split_bytes,
                       block_bytes=block_bytes, counts=counts)
    assert errors == [] and counts == {"records": 3, "lines": 8}
    assert rows == [{"Jahr": 1991, "Monat": "Februar", "Index": None},
                    {"Jahr": 1991, "Monat": "Januar", "Index": Decimal("60.5")},
                    {"Jahr": 1991, "Monat": "M\u00e4rz\n(1)", "Index": Decimal("60.8")}]
    rows, errors = run(tmp_path / "vpi.csv", data, "Jahr BIGINT, Monat STRING, Index STRING",
                       options={"sep": ";", "skip": "2"})
    assert reasons(errors) == [("parse", "6")] and errors[0]["context"]["sourceOffset"] == str(
        data.index(b"1991;Februar"))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16le", "windows-1252"])
def test_skip_counts_lines_of_the_text_in_its_encoding(tmp_path: Path, encoding: str) -> None:
    """UTF-16 lines end with two bytes, and a UTF-16 file's byte order mark belongs to its
    first line: the lines to skip are counted in the text the tasks read."""
    text = 'Titel "x\nZeile 2\nid;s\n1;\u00e9\n2;"a\nb"\n'
    codec = {"utf-16le": "utf-16-le", "windows-1252": "cp1252"}.get(encoding, encoding)
    rows, errors = run(tmp_path / "in.csv", text.encode(codec), "id BIGINT, s STRING",
                       options={"sep": ";", "skip": "2", "encoding": encoding})
    assert errors == [] and rows == [{"id": 1, "s": "\u00e9"}, {"id": 2, "s": "a\nb"}]


@pytest.mark.spark
def test_skip_and_null_padding_through_spark(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "vpi.csv"
    source.write_bytes(TITLED.encode("latin-1"))
    options = {"sep": ";", "skip": "2", "null_padding": "true", "locale": "de-DE",
               "encoding": "iso-8859-1"}
    result, summary = _both(spark, tmp_path, source, options=options)
    assert [str(f.type) for f in result.schema] == ["int64", "string", "decimal128(38, 1)"]
    assert summary["source_lines"] == 8 and summary["rows_written"] == 3
    for table in ("api", "cli"):
        assert_records(str(tmp_path / table), 3, rows=3, errors={})
    (tmp_path / "x.json").write_text('{"a": 1}\n')
    for option in ("skip", "null_padding"):
        with pytest.raises(SourceError, match=f"{option}: read for CSV files only"):
            ingest(str(tmp_path / "x.json"), str(tmp_path / "j"), spark=object(),
                   options={option: "1"})


# --- a file of mostly encoding errors says so --------------------------------------------
@pytest.mark.spark
def test_a_file_of_mostly_encoding_errors_says_which_options_read_it(spark: Any,
                                                                     tmp_path: Path) -> None:
    """An ASCII header over Latin-1 records. Without a schema the sample to infer it from
    is mostly records that are no UTF-8: the ingest stops before Spark starts (`spark` is
    no session there), in one line naming `encoding`. With a schema every record is an
    `encoding` error record (its bytes kept), and the summary and the CLI say in one line
    to give `encoding` or `encoding.errors=replace`."""
    source = tmp_path / "covid.csv"
    source.write_bytes(b"nome_munic;casos\n" + "\n".join(
        f"Agua\u00ed {i};{i}" for i in range(5)).encode("latin-1") + b"\n")
    with pytest.raises(SourceError) as caught:
        ingest(str(source), str(tmp_path / "x"), spark=object(), options={"sep": ";"})
    assert "5 of the first 5 records are not utf-8 text" in str(caught.value)
    assert "encoding=iso-8859-1" in str(caught.value)
    ddl = "nome_munic STRING, casos BIGINT"
    result, summary = _both(spark, tmp_path, source, "--schema", ddl, schema=ddl,
                            options={"sep": ";"})
    assert summary["error_records_by_reason"] == {"encoding": 5}
    for hint in (result.summary()["hint"], summary["hint"]):
        assert "encoding=iso-8859-1" in hint and f"{config.INGEST_ENCODING_ERRORS}=replace" \
            in hint and "\n" not in hint
    out = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "text"),
                                   "--markers", "direct", "--no-progress", "--option",
                                   "sep=;", "--schema", ddl])
    assert out.output.splitlines()[-1].startswith("hint") and "encoding" in out.output


# --- any single character as sep --------------------------------------------------------
THORN = 'id\u00fes\u00fed\n1\u00fea\u00fe1.5\n2\u00fe"x\u00fey\nz"\u00fe2\n3\u00fe\u00e9\u00fe3\n'


@pytest.mark.parametrize("encoding", ["utf-8", "iso-8859-1"])
@pytest.mark.parametrize("split_bytes", [None, 12])
@pytest.mark.parametrize("block_bytes", [None, 9])
def test_a_separator_beyond_ascii_reads_as_spark_reads_it(
        tmp_path: Path, encoding: str, split_bytes: Any, block_bytes: Any) -> None:
    """`sep=þ` (two bytes in UTF-8, one in Latin-1) was refused; Spark reads it. Quoted
    fields may hold it and line breaks, whole, in blocks and in byte ranges."""
    rows, errors = run(tmp_path / "in.csv", THORN.encode(encoding),
                       "id BIGINT, s STRING, d DOUBLE",
                       options={"sep": "\u00fe", "encoding": encoding},
                       split_bytes=split_bytes, block_bytes=block_bytes)
    assert errors == [] and rows == [{"id": 1, "s": "a", "d": 1.5},
                                     {"id": 2, "s": "x\u00fey\nz", "d": 2.0},
                                     {"id": 3, "s": "\u00e9", "d": 3.0}]


@pytest.mark.spark
def test_sep_thorn_through_spark(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "thorn.csv"
    source.write_text(THORN)
    _, summary = _both(spark, tmp_path, source, options={"sep": "\u00fe"})
    assert summary["rows_written"] == 3 and summary["error_records"] == 0
    theirs = spark.read.options(header="true", multiLine="true", sep="\u00fe",
                                escape='"').csv(str(source)).collect()
    for table in ("api", "cli"):
        assert [(r["id"], r["s"]) for r in _rows(tmp_path / table)] == [
            (int(r["id"]), r["s"]) for r in theirs]


# --- files whose headers list the columns in other orders (issue 38) ------------------
@pytest.mark.spark
def test_inference_types_columns_by_name_as_the_ingest_reads_them(spark: Any,
                                                                  tmp_path: Path) -> None:
    """Inference typed columns by position across files while the ingest reads them by
    name: half the sampled records failed the inferred schema. By name, the inferred
    schema reads every sampled record."""
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "1.csv").write_text("id,when,name\n1,2021-01-01,x\n2,2021-01-02,y\n")
    (folder / "2.csv").write_text("name,id,when\nz,3,2021-01-03\nw,4,2021-01-04\n")
    result, summary = _both(spark, tmp_path, folder)
    assert [(f.name, str(f.type)) for f in result.schema] == [
        ("id", "int64"), ("when", "date32[day]"), ("name", "string")]
    assert summary["error_records"] == 0 and summary["rows_written"] == 4
    for table in ("api", "cli"):
        assert [(r["id"], r["name"]) for r in _rows(tmp_path / table)] == [
            (1, "x"), (2, "y"), (3, "z"), (4, "w")]


# --- ISO timestamps past microseconds (issue 38) -----------------------------------------
NANOS = [("2021-01-01T00:00:00.123456789Z", "2021-01-01T00:00:00.1234567"),
         ("2021-06-30T23:59:59.9999999+02:00", "2021-06-30 23:59:59.999999999")]


def test_iso_timestamps_past_microseconds_read_cut_one_answer_for_one_text(
        tmp_path: Path) -> None:
    """7 or 9 digits of a second without a pattern were cast errors, and with a pattern
    read cut: read cut in both (as Spark reads them), in the vectorized pass and the
    reference parser (a record holding a control character) alike."""
    data = "id,t,n,s\n" + "".join(f'{i},{t},{n},{"x" if i else REFERENCE}\n'
                                  for i, (t, n) in enumerate(NANOS))
    expected = [dt.datetime(2021, 1, 1, 0, 0, 0, 123456, tzinfo=dt.timezone.utc),
                dt.datetime(2021, 6, 30, 21, 59, 59, 999999, tzinfo=dt.timezone.utc)]
    naive = [dt.datetime(2021, 1, 1, 0, 0, 0, 123456), dt.datetime(2021, 6, 30, 23, 59, 59,
                                                                   999999)]
    for options in ({}, {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSSSSXXX",
                         "timestampNTZFormat": "yyyy-MM-dd['T'][ ]HH:mm:ss.SSSSSSSSS"}):
        rows, errors = run(tmp_path / "in.csv", data.encode(),
                           "id BIGINT, t TIMESTAMP, n TIMESTAMP_NTZ, s STRING", options=options)
        assert errors == [], options
        assert [(r["t"], r["n"]) for r in sorted(rows, key=lambda r: r["id"])] == list(
            zip(expected, naive, strict=True)), options
    json_lines = "".join(json.dumps({"id": i, "t": t, "n": n}) + "\n"
                         for i, (t, n) in enumerate(NANOS))
    rows, errors = run(tmp_path / "in.json", json_lines.encode(),
                       "id BIGINT, t TIMESTAMP, n TIMESTAMP_NTZ")
    assert errors == [] and [(r["t"], r["n"]) for r in sorted(rows, key=lambda r: r["id"])] \
        == list(zip(expected, naive, strict=True))


@pytest.mark.spark
def test_iso_timestamps_past_microseconds_as_spark_reads_them(spark: Any, tmp_path: Path
                                                             ) -> None:
    source = tmp_path / "events.csv"
    source.write_text("id,t,n\n" + "".join(f"{i},{t},{n}\n" for i, (t, n) in enumerate(NANOS)))
    ddl = "id BIGINT, t TIMESTAMP, n TIMESTAMP_NTZ"
    _, summary = _both(spark, tmp_path, source, "--schema", ddl, schema=ddl)
    assert summary["error_records"] == 0
    theirs = spark.read.schema(ddl).options(header="true").csv(str(source)).collect()
    for table in ("api", "cli"):
        ours = _rows(tmp_path / table)
        assert [(r["t"].replace(tzinfo=None), r["n"]) for r in ours] == [
            (r["t"], r["n"]) for r in sorted(theirs, key=lambda r: r["id"])]
