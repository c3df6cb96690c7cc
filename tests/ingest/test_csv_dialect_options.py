"""Spark's CSV options for the structure of records (quote, comment, lineSep,
ignoreLeadingWhiteSpace, ignoreTrailingWhiteSpace): for any text and any dialect, the
vectorized record ends are errortable's quote scanner's, fed whole or in pieces; the block
reader cuts the same records as errortable's parser joins from lines; and every record
the vectorized pass reads as a row reads the same in errortable's parser."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errortable import parse_csv_lines
from markerstore import config
from markerstore.errors import ConfigError
from markerstore.ingest import csvsplit
from markerstore.ingest.blocks import ReadOptions, read_blocks, split_records
from markerstore.ingest.csvranges import lines_map
from markerstore.ingest.csvsplit import line_ends_of, parity_holds, record_ends
from markerstore.ingest.options import read_options
from markerstore.ingest.parse import csv_text
from markerstore.ingest.sources import SourceTask
from markerstore.values.csv import (
    ESCAPED,
    QUOTED,
    Dialect,
    QuoteScanner,
    join_records,
    split_record,
    strip_line_end,
)
from tests.support.ingest_run import ordered, reasons, run

# Pieces of CSV text: D the separator, Q the quote, E the escape, C the comment character.
_PIECES = st.sampled_from(["Q", "D", ",", "\n", "\r\n", "\r", "a", "bc", "QQ", "QxDyQ",
                           "Qx\nyQ", "Qx\ryQ", "DD", " ", "  ", "\t", "é", "E", "EQ", "EE",
                           "C", "Cz", "|", "'", '"', "\\"])
_DIALECTS = st.builds(
    Dialect, delimiter=st.sampled_from([",", ";", "\t"]), quote=st.sampled_from(['"', "'"]),
    escape=st.sampled_from(["Q", "\\"]), comment=st.sampled_from(["", "#"]),
    line_sep=st.sampled_from([None, "\n", "\r", "\r\n", "|"]),
    ignore_leading=st.booleans(), ignore_trailing=st.booleans())


def _resolve(dialect: Dialect) -> Dialect | None:
    """`dialect` with E as its quote (doubled), or None when its characters clash."""
    escape = dialect.quote if dialect.escape == "Q" else dialect.escape
    chars = [dialect.delimiter, dialect.quote, dialect.comment or "D0",
             dialect.line_sep or "L0"] + ([escape] if escape != dialect.quote else [])
    if len(set(chars)) != len(chars):
        return None
    return Dialect(dialect.delimiter, dialect.quote, escape, dialect.comment,
                   dialect.line_sep, dialect.ignore_leading, dialect.ignore_trailing)


def _text(dialect: Dialect, pieces: list[str]) -> str:
    return "".join(pieces).replace("D", dialect.delimiter).replace("Q", dialect.quote) \
        .replace("E", dialect.escape).replace("C", dialect.comment or "#")


def _options(dialect: Dialect) -> ReadOptions:
    return ReadOptions(delimiter=dialect.delimiter, escape=dialect.escape,
                       quote=dialect.quote, comment=dialect.comment,
                       line_sep=dialect.line_sep, ignore_leading=dialect.ignore_leading,
                       ignore_trailing=dialect.ignore_trailing)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DIALECTS, st.lists(_PIECES, max_size=30), st.lists(st.integers(1, 12), max_size=4))
def test_the_vectorized_ends_are_the_scanners_fed_whole_or_in_pieces(
        drawn: Dialect, pieces: list[str], cuts: list[int]) -> None:
    dialect = _resolve(drawn)
    if dialect is None:
        return
    data = _text(dialect, pieces).encode()
    for final in (False, True):
        ends = record_ends(data, final, dialect=dialect).tolist()
        scanner, fed, position = QuoteScanner(bytes, dialect=dialect), [], 0
        for size in [*cuts, len(data)]:  # the same text fed in pieces
            piece = data[position:position + size]
            fed += [position + end for end in scanner.feed(piece)]
            position += len(piece)
        if final and len(data) and (not fed or fed[-1] != len(data)):
            fed.append(len(data))  # the last record, without its line end
        assert ends == fed, (data, dialect)


# Fields as a CSV writer writes them (L: a line end), and a few that are not.
_FIELDS = st.sampled_from(["a", "bc", "", "QQ", "QxDyQ", "Qx\nyQ", "Qx\r\nyQ", "QxQQyQ",
                           "QxL", "LyQ", "QLQ", "x", "xQy", "EQ", "Cz"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DIALECTS, st.lists(st.lists(_FIELDS, min_size=1, max_size=4), max_size=10),
       st.booleans())
def test_the_quotes_parity_where_it_answers_is_the_scanners_state(
        drawn: Dialect, records: list[list[str]], inside: bool) -> None:
    """csvsplit's parity pass answers (the quotes' parity is the state) only where the
    quote scanner, started outside or inside a quoted field, is in that state: at every
    line end read from a record's start, and after whole lines read from either state;
    and the map of whole lines (csvranges.lines_map, which reads by the parity where it
    can) is the scanner's."""
    dialect = _resolve(drawn)
    if dialect is None:
        return
    end = dialect.line_sep or "\n"
    data = _text(dialect, ["D".join(r) + "L" for r in records]).replace("L", end).encode()
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(raw == ord(dialect.quote))
    newlines = line_ends_of(data, dialect.line_sep, True)
    scanners = [QuoteScanner(bytes, dialect=dialect) for _ in range(2)]
    scanners[1].state = QUOTED
    for scanner in scanners:
        scanner.feed(data)
    states = tuple(scanner.state in (QUOTED, ESCAPED) for scanner in scanners)
    if parity_holds(raw, quotes, newlines, dialect, inside):
        assert states[inside] == bool((len(quotes) + inside) & 1)
    assert lines_map(data, dialect) == states  # the first pass's map of these lines
    ends = csvsplit._by_parity(raw, quotes, newlines, dialect)
    if ends is not None:
        assert ends.tolist() == QuoteScanner(bytes, dialect=dialect).feed(data), data


@pytest.mark.parametrize(("line", "inside"), [
    ('{i},n{i},"text {i}\n",{i}\n', True),  # each line flips: either state reads by parity
    ('{i},n{i},"text {i}",{i}\n\n', False),
    ('"{i}","a ""q"" {i}",,"x\r\ny"\r\n', False)])
def test_csv_as_writers_write_it_is_read_by_the_quotes_parity(line: str,
                                                             inside: bool) -> None:
    """Quote-flip lines, their twin and doubled quotes: the parity pass answers (the
    lines are not read one by one), from a record's start (and quote-flip lines from
    inside a field too)."""
    data = "".join(line.format(i=i) for i in range(200)).encode()
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(raw == ord('"'))
    newlines = line_ends_of(data)
    assert csvsplit._by_parity(raw, quotes, newlines, Dialect()) is not None
    assert parity_holds(raw, quotes, newlines, Dialect(), inside)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DIALECTS, st.lists(_PIECES, max_size=30), st.integers(1, 9))
def test_blocks_parser_and_vectorized_pass_agree_for_any_dialect(
        drawn: Dialect, pieces: list[str], cut: int) -> None:
    """The block reader's records (comment lines dropped) are the parser's records joined
    from the same text; each row of the vectorized pass is the parser's row."""
    dialect = _resolve(drawn)
    if dialect is None:
        return
    text = _text(dialect, pieces)
    data = text.encode()
    block = split_records(data, "csv", options=_options(dialect))
    records = block.records.to_pylist()
    joined = [r.decode() for _, r in join_records([data], dialect=dialect)]
    assert [r for r in records if r] == [r for r in joined if r and not (
        dialect.comment and r.startswith(dialect.comment))]
    names = ["a", "b", "c"]
    schema = pa.schema([(n, pa.string()) for n in names])
    parsed = csv_text(block.records, schema, names, False, dialect=dialect)
    for row, i in zip(parsed.table.to_pylist(), parsed.rows.tolist(), strict=True):
        reference = parse_csv_lines([records[i]], header=names, dialect=dialect)
        assert reference.errors == [] and reference.records == [row], (records[i], dialect)
    # The block reader, a few bytes at a time, cuts the same records.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "in.csv"
        path.write_bytes(data)
        read = [r for b in read_blocks(SourceTask(str(path), "csv"), None, cut,
                                       _options(dialect)) for r in b.records.to_pylist()]
    assert read == records, (data, dialect)


def test_split_record_reads_white_space_around_values_as_spark_does() -> None:
    both = Dialect(ignore_leading=True, ignore_trailing=True)
    assert split_record(' a , "b c" ,c ', dialect=both) == [("a", False), ("b c", True),
                                                          ("c", False)]
    lead = Dialect(ignore_leading=True)
    assert split_record(' a , "b"', dialect=lead) == [("a ", False), ("b", True)]
    assert strip_line_end(b"x\r") == b"x" and strip_line_end(b"x\r", "\n") == b"x\r"


AB = "a BIGINT, b STRING"


@pytest.mark.parametrize(("options", "data", "rows", "failed"), [
    ({"comment": "#"}, b'# made by "x\n#\na,b\n1,x\n# 2,"y\n2,y\n#end', [(1, "x"), (2, "y")],
     []),
    ({}, b"a,b\n1,x\n#2,y\n", [(1, "x")], [("cast", "3")]),  # no comment by default
    ({"quote": "'"}, b"a,b\n1,'x, \"y\"'\n2,'it''s'\n", [(1, 'x, "y"'), (2, "it's")], []),
    ({"quote": "'", "escape": "\\"}, b"a,b\n1,'it\\'s'\n", [(1, "it's")], []),
    ({"lineSep": "|"}, b'a,b|1,"x|y"|2,y|', [(1, "x|y"), (2, "y")], []),
    ({"lineSep": "\\r"}, b"a,b\r1,x\r\r2,y\r", [(1, "x"), (2, "y")], []),
    ({"lineSep": "\\r\\n"}, b"a,b\r\n1,x\r\n2,y\ny\r\n", [(1, "x"), (2, "y\ny")], []),
    ({}, b"a,b\r1,x\r\n\r2,\"y\rz\"\n", [(1, "x"), (2, "y\rz")], []),
    ({"ignoreLeadingWhiteSpace": "true", "ignoreTrailingWhiteSpace": "true"},
     b'a , b\n 1 , x \n2,  " y "  \n', [(1, "x"), (2, " y ")], []),
    ({"ignoreLeadingWhiteSpace": "true"}, b"a,b\n 1, x \n", [(1, "x ")], []),
    ({}, b"a,b\n1, x \n 2,y\n", [(1, " x ")], [("cast", "3")]),  # Spark's reading default
])
@pytest.mark.parametrize("block_bytes", [None, 4])
def test_each_option_reads_as_spark_documents_it(tmp_path: Path, options: dict[str, str],
                                                 data: bytes, rows: list[tuple[int, str]],
                                                 failed: list[tuple[str, str]],
                                                 block_bytes: int | None) -> None:
    counts: dict[str, int] = {}
    got, errors = run(tmp_path / "in.csv", data, AB, options=options, counts=counts,
                      block_bytes=block_bytes)
    assert got == ordered([{"a": a, "b": b} for a, b in rows])
    assert reasons(errors) == failed
    assert counts["records"] == len(rows) + len(failed)


@pytest.mark.parametrize(("options", "words"), [
    ({"quote": ","}, "the quote ',' is the field separator"),
    ({"comment": '"'}, "the comment '\"' is the quote"),
    ({"quote": "'", "escape": "'", "comment": "'"}, "the comment \"'\" is the quote"),
    ({"lineSep": ";", "sep": ";"}, "the line separator ';' is the field separator"),
    ({"lineSep": "ab"}, "expected one ASCII character or \\r\\n"),
    ({"quote": ""}, "expected one ASCII character"),
])
def test_a_dialect_that_cannot_be_read_is_refused_in_one_line(options: dict[str, str],
                                                              words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_options(options)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_options_keep_sparks_names_and_defaults() -> None:
    resolved = config.resolve({})
    assert (resolved["quote"], resolved["comment"], resolved["lineSep"]) == ('"', "", None)
    assert resolved["ignoreLeadingWhiteSpace"] is False
    assert resolved["ignoreTrailingWhiteSpace"] is False
    assert resolved["mode"] == "PERMISSIVE"


@pytest.mark.spark
def test_the_cli_reads_a_file_written_in_another_dialect(spark: Any, tmp_path: Path) -> None:
    """Through the CLI, read back from the commit: comment lines, another quote, CR line
    ends and white space around values, each option with Spark's name, any case."""
    from click.testing import CliRunner

    from markerstore.cli import cli
    from tests.support.readback import assert_records, data_rows

    source = tmp_path / "export.csv"
    source.write_bytes(b"# exported\r\ra , b\r 1 , 'x, y' \r# note 'q\r2,'it''s'\r\r")
    table = str(tmp_path / "t")
    out = CliRunner().invoke(cli, [
        "ingest", str(source), table, "--schema", AB, "--no-progress", "--markers", "direct",
        "--option", "comment=#", "--option", "QUOTE='", "--option", "linesep=\\r",
        "--option", "ignoreLeadingWhiteSpace=true", "--option",
        "ignoretrailingwhitespace=true"])
    assert out.exit_code == 0, out.output
    assert ordered(data_rows(table).to_pylist()) == ordered([{"a": 1, "b": "x, y"},
                                                             {"a": 2, "b": "it's"}])
    assert_records(table, 2, rows=2, errors={})


@pytest.mark.spark
def test_the_cli_keeps_option_values_as_given(spark: Any, tmp_path: Path) -> None:
    """A literal tab as the separator and a one-space nullValue reach the reader as
    typed: the CLI stripped every value, so the tab was empty (refused) and the space the
    default nullValue (empty), the field then a one-space string."""
    from click.testing import CliRunner

    from markerstore.cli import cli
    from tests.support.readback import assert_records, data_rows

    source = tmp_path / "export.csv"  # .csv: the tab comes from the option alone
    source.write_bytes(b"a\tb\n1\t \n2\tx\n3\t\n")
    table = str(tmp_path / "t")
    out = CliRunner().invoke(cli, [
        "ingest", str(source), table, "--schema", AB, "--no-progress", "--markers", "direct",
        "--option", "sep=\t", "--option", "nullValue= "])
    assert out.exit_code == 0, out.output
    assert ordered(data_rows(table).to_pylist()) == ordered([
        {"a": 1, "b": None}, {"a": 2, "b": "x"}, {"a": 3, "b": None}])
    assert_records(table, 3, rows=3, errors={})
