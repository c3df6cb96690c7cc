"""The ingest against Spark's own CSV reader for the options of the structure of records,
each corpus built here from Spark's documentation of the option (the CSV data source
page): the empty lines around a header and the default line ends ("\\r, \\r\\n and \\n"),
`comment` ("skipping lines beginning with this character"), `quote` ("a single character
used for escaping quoted values where the separator can be part of the value"),
`lineSep` ("the line separator that should be used for parsing"), and
`ignoreLeadingWhiteSpace` / `ignoreTrailingWhiteSpace` ("whether or not leading /
trailing whitespaces from values being read should be skipped"). Per record: the same row
where Spark is right, and where not, the difference documented with both outcomes in
docs/INGEST.md's section below (exactly those, so the docs cannot drift); per
corpus, every source record is one committed row or one committed error record."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ingest.test_spark_differential import (
    Outcomes,
    differences,
    documented_in,
    run_corpora,
    undocumented,
)
from tests.support.spec_corpus import DDL, HEADER, Corpus, _Builder

pytestmark = pytest.mark.spark

SECTION = "## Where the ingest and Spark's readers differ: the structure of CSV records"
ROW = "{id},1,1.5,x,true"


def structure_corpora() -> list[Corpus]:
    """One corpus per option (Spark's names, given to both readers), and the default line
    ends and empty lines."""
    lines = Corpus("csv_empty_lines_and_line_ends", "csv", DDL, head=HEADER + b"\n")
    add = _Builder(lines, 10_000_001).add
    add("file_empty_line_before_header", ROW, head=b"\n" + HEADER + b"\n")
    add("file_crlf_empty_lines_before_header", ROW, ROW, head=b"\r\n\r\n" + HEADER + b"\r\n",
        sep=b"\r\n", tail=b"\r\n")
    add("file_empty_lines_between_and_after", ROW, ROW, sep=b"\n\n\n", tail=b"\n\n")
    add("file_cr_line_ends_empty_line_first", ROW, ROW, head=b"\r" + HEADER + b"\r",
        sep=b"\r\r", tail=b"\r")
    add("file_mixed_line_ends", ROW, ROW, ROW, sep=b"\r", tail=b"\r\n")
    add("file_cr_inside_quotes", '{id},,,"a\rb",', "{id},,,c,", sep=b"\r", tail=b"\r",
        head=HEADER + b"\r")
    add("file_lone_cr_in_a_value", "{id},,,a\rb,", records=2)
    comments = Corpus("csv_comment", "csv", DDL, head=HEADER + b"\n", options={"comment": "#"})
    add = _Builder(comments, 11_000_001).add
    add("record_plain", ROW)
    add("string_hash_inside", "{id},,,a#b,")
    add("file_comment_lines", ROW, "# a note", ROW, "#", records=2)
    add("file_comment_before_header", ROW, head=b"# made by hand\n" + HEADER + b"\n")
    add("file_comment_with_quote", ROW, '# say "hi', ROW, records=2)
    add("string_hash_starting_a_quoted_line", '{id},,,"a\n#b",', alone=True)
    add("string_hash_first_in_a_later_field", "{id},,,#b,")
    quotes = Corpus("csv_quote", "csv", DDL, head=HEADER + b"\n",
                    options={"quote": "'", "escape": "'"})
    add = _Builder(quotes, 12_000_001).add
    add("string_quoted_sep", "{id},,,'a,b',")
    add("string_doubled_quote", "{id},,,'it''s',")
    add("string_double_quotes_plain", '{id},,,"a",')
    add("string_quoted_line_break", "{id},,,'a\nb',", alone=True)
    add("string_quoted_empty", "{id},,,'',")
    seps = Corpus("csv_line_sep", "csv", DDL, options={"lineSep": "|"})
    add = _Builder(seps, 13_000_001).add
    add("file_pipe_ends", ROW, ROW, head=HEADER + b"|", sep=b"|", tail=b"|")
    add("file_quoted_pipe", '{id},,,"a|b",', head=HEADER + b"|", tail=b"|")
    add("file_lf_in_a_value", "{id},,,a\nb,", head=HEADER + b"|", tail=b"|")
    white = Corpus("csv_ignore_white_space", "csv", DDL, head=HEADER + b"\n",
                   options={"ignoreLeadingWhiteSpace": "true",
                            "ignoreTrailingWhiteSpace": "true"})
    add = _Builder(white, 14_000_001).add
    add("record_spaces_around_values", "{id}, 1 , 1.5 ,  x  , true ")
    add("string_spaces_around_quotes", '{id},,,  "a b"  ,')
    add("string_tabs_around", "{id},,,\tx\t,")
    add("string_spaces_only", "{id},,,   ,")
    add("record_spaces_before_id", "  {id},2,,,")
    lead = Corpus("csv_ignore_leading_white_space", "csv", DDL, head=HEADER + b"\n",
                  options={"ignoreLeadingWhiteSpace": "true"})
    add = _Builder(lead, 15_000_001).add
    add("string_spaces_around", "{id},,,  x  ,")
    add("bigint_space_before", "{id}, 7,,,")
    add("string_space_before_quote", '{id},,, "q",')
    return [lines, comments, quotes, seps, white, lead]


@pytest.fixture(scope="module")
def outcomes(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Outcomes]:
    return run_corpora(spark, structure_corpora(),
                       tmp_path_factory.mktemp("differential_dialect"))


def documented() -> dict[str, tuple[str, str]]:
    """The table of this section of docs/INGEST.md: case -> (Spark, ingest)."""
    return documented_in(SECTION, "\n## ")


def test_every_difference_from_spark_in_the_structure_of_records_is_documented(
        outcomes: list[Outcomes]) -> None:
    missing, stale = undocumented(differences(outcomes), documented(), outcomes)
    assert not missing and not stale, (
        "docs/INGEST.md's table of differences in the structure of records is out of "
        "date.\nCases that differ as follows and are not documented so:\n"
        + "\n".join(missing) + "\nDocumented cases that no longer differ: " + ", ".join(stale))


def test_every_record_is_one_row_or_one_error_record(outcomes: list[Outcomes]) -> None:
    for out in outcomes:
        assert out.unattributed == [], f"{out.corpus.name}: rows of no source record"
        wrong = {c.name: (c.records, len(out.ours[c.name])) for c in out.corpus.cases
                 if len(out.ours[c.name]) != c.records}
        assert not wrong, f"{out.corpus.name}: (source records, outcomes) {wrong}"
        assert out.result.source_records == out.corpus.records
    # an empty line, a comment line and a line end are no record: no error record at all
    first = next(o for o in outcomes if o.corpus.name == "csv_empty_lines_and_line_ends")
    assert all(o[0] == "row" for name, found in first.ours.items() for o in found
               if name != "file_lone_cr_in_a_value")
