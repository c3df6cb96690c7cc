"""A corpus of JSON-lines and CSV files built from the specifications (RFC 8259 for JSON,
RFC 4180 for CSV) and from the input table of the ingest's correctness issue: one small
file per case, each record tagged with an `id` unique in its corpus, so a committed row
names its case and an error record names its file.

Read by tests/ingest/test_spark_differential.py, which runs Spark's own readers and the
ingest over it. ``python -m tests.support.spec_corpus FOLDER`` writes the corpora."""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DDL = "id BIGINT, n BIGINT, d DOUBLE, s STRING, b BOOLEAN"
COLUMNS = ("id", "n", "d", "s", "b")
WIDE_COLUMNS = 300
WIDE_DDL = "id BIGINT, " + ", ".join(f"c{i} BIGINT" for i in range(1, WIDE_COLUMNS))


@dataclass(frozen=True)
class Case:
    """Records of a corpus and how many source records they are (a JSON line that is not
    blank; a CSV record after the header, which may span lines). A case `alone` is a file
    of its own (header included); the others are one record each, in the corpus's
    shared file :data:`SHARED`, in order."""

    name: str
    data: bytes
    records: int
    ids: tuple[int, ...] = ()  # the ids its records carry (where they parse)
    alone: bool = False


SHARED = "records"


@dataclass
class Corpus:
    """The cases of one format, schema and set of reader options."""

    name: str
    fmt: str
    ddl: str
    cases: list[Case] = field(default_factory=list)
    head: bytes = b""  # the shared file's first line (the CSV header)
    options: dict[str, str] = field(default_factory=dict)  # the ingest's and Spark's
    first_lines: dict[str, int] = field(default_factory=dict)  # shared cases: first line

    def file_name(self, case: Case | None) -> str:
        return f"{case.name if case is not None and case.alone else SHARED}.{self.fmt}"

    @property
    def shared(self) -> list[Case]:
        return [c for c in self.cases if not c.alone]

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        line = 1 + self.line_ends(self.head)
        for case in self.shared:
            self.first_lines[case.name] = line
            line += self.line_ends(case.data)
        (folder / self.file_name(None)).write_bytes(
            self.head + b"".join(c.data for c in self.shared))
        for case in self.cases:
            if case.alone:
                (folder / self.file_name(case)).write_bytes(case.data)
        return folder

    def case_at(self, path: str, line: int | None) -> Case:
        """The case of a record: its file, and in the shared file its line (any of its
        lines; the line numbers of the shared file once :meth:`write` has run)."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name != self.file_name(None):
            return {self.file_name(c): c for c in self.cases if c.alone}[name]
        assert line is not None, f"a record of {name} without its line"
        found = [c for c in self.shared if self.first_lines[c.name] <= line]
        return found[-1]

    def case_of_id(self) -> dict[int, Case]:
        return {i: c for c in self.cases for i in c.ids}

    @property
    def records(self) -> int:
        return sum(c.records for c in self.cases)

    @property
    def lines(self) -> int:
        """Physical lines of its files: line feeds, plus a last line without one."""
        files = [self.head + b"".join(c.data for c in self.shared)]
        files += [c.data for c in self.cases if c.alone]
        return sum(self.line_ends(d) + (1 if d and not d.endswith(self.ends) else 0)
                   for d in files)

    @property
    def ends(self) -> tuple[bytes, ...]:
        """What ends a line: LF, and in CSV a lone CR too (Spark's default lineSep)."""
        return (b"\n", b"\r") if self.fmt == "csv" else (b"\n",)

    def line_ends(self, data: bytes) -> int:
        """The line ends in `data`."""
        return data.count(b"\n") + (data.count(b"\r") - data.count(b"\r\n")
                                     if self.fmt == "csv" else 0)


class _Builder:
    """Collects cases; `{id}` in a record template becomes the next id."""

    def __init__(self, corpus: Corpus, start: int) -> None:
        self.corpus = corpus
        self.ids = itertools.count(start)

    def add(self, name: str, *templates: str | bytes, records: int | None = None,
            head: bytes | None = None, sep: bytes = b"\n", tail: bytes = b"\n",
            alone: bool | None = None) -> None:
        """A case of `templates` (one record each, unless `records` says otherwise)
        joined by `sep`, ending with `tail`; a case of its own file (after `head`, by
        default the corpus's header) if `alone`, or if it is not one plain record."""
        ids: list[int] = []
        parts = []
        for template in templates:
            raw = template if isinstance(template, bytes) else template.encode("utf-8")
            while b"{id}" in raw:
                ids.append(next(self.ids))
                raw = raw.replace(b"{id}", str(ids[-1]).encode(), 1)
            parts.append(raw)
        count = len(templates) if records is None else records
        plain = len(templates) == count == 1 and head is None and (sep, tail) == (b"\n",) * 2
        alone = not plain if alone is None else alone
        data = sep.join(parts) + (tail if parts else b"")
        if alone:
            data = (self.corpus.head if head is None else head) + data
        assert name not in {c.name for c in self.corpus.cases}, name
        self.corpus.cases.append(Case(name, data, count, tuple(ids), alone))


# --- JSON (RFC 8259), one object per line ------------------------------------------------
_JSON_STRINGS = {  # the `s` member, as written in the line
    "plain": '"hello"', "empty": '""', "escape_quote": r'"a\"b"',
    "escape_backslash": r'"a\\b"', "escape_solidus": r'"a\/b"', "escape_b": r'"a\bb"',
    "escape_f": r'"a\fb"', "escape_n": r'"a\nb"', "escape_r": r'"a\rb"', "escape_t": r'"a\tb"',
    "escape_u_ascii": r'"\u0041"', "escape_u_latin": r'"\u00e9"', "escape_u_euro": r'"\u20AC"',
    "escape_u_nul": r'"a\u0000b"', "escape_u_pair": r'"\ud83d\ude00"',
    "escape_u_lone_high": r'"\ud800"', "escape_u_lone_low": r'"\udc00"',
    "escape_u_high_then_text": r'"\ud800x"', "escape_u_pair_reversed": r'"\ude00\ud83d"',
    "escape_all": r'"\"\\\/\b\f\n\r\t\u0041"', "escape_x": r'"\x41"',
    "escape_a": r'"\a"', "escape_single_quote": r'"\'"', "escape_u_short": r'"\u12"',
    "escape_u_bad_hex": r'"\u12G4"', "escape_upper_u": r'"\U0041"',
    "escape_at_end": '"a\\', "raw_control_01": '"a\x01b"', "raw_control_1f": '"a\x1fb"',
    "raw_tab": '"a\tb"', "raw_del": '"a\x7fb"', "raw_utf8_2byte": '"é"',
    "raw_utf8_3byte": '"€"', "raw_utf8_4byte": '"😀"', "raw_u2028": '"a\u2028b"',
    "raw_bom_inside": '"a\ufeffb"', "unterminated": '"abc', "single_quoted": "'abc'",
    "number": "5", "negative_number": "-1.5", "true": "true", "null": "null",
    "object": '{"a": 1, "b": [true, null]}', "array": '[1, "two", 3.0]',
    "empty_object": "{}", "empty_array": "[]", "nested_deep_20": "[" * 20 + "]" * 20,
    "long_200k": '"' + "x" * 200_000 + '"',
}
_JSON_NUMBERS_N = {  # the `n` member (BIGINT)
    "zero": "0", "negative_zero": "-0", "one": "1", "minus_one": "-1",
    "int64_max": "9223372036854775807", "int64_min": "-9223372036854775808",
    "int64_max_plus_1": "9223372036854775808", "int64_min_minus_1": "-9223372036854775809",
    "big_2_100": str(2 ** 100), "exponent": "1e2", "exponent_upper": "1E2",
    "fraction_zero": "1.0", "fraction": "1.5", "leading_zero": "01", "plus": "+1",
    "minus_only": "-", "dot_end": "1.", "dot_start": ".5", "exponent_empty": "1e",
    "hex": "0x10", "underscore": "1_000", "string": '"12"', "nan": "NaN",
    "infinity": "Infinity", "true": "true", "fullwidth_digit": '"１"',
}
_JSON_NUMBERS_D = {  # the `d` member (DOUBLE)
    "zero": "0", "negative_zero": "-0", "negative_zero_fraction": "-0.0", "int": "3",
    "fraction": "1.5", "negative_fraction": "-1.5", "exponent": "1e5", "exponent_upper": "1E5",
    "exponent_plus": "1e+5", "exponent_minus": "1e-5", "fraction_exponent": "-1.5e-3",
    "point_one": "0.1", "big_int": "123456789012345678901234567890",
    "int_2_53_plus_1": "9007199254740993", "max": "1.7976931348623157e308",
    "overflow": "1e309", "overflow_400": "1e400", "huge_exponent": "1e99999999",
    "underflow": "1e-400", "min_subnormal": "4.9e-324", "min_normal": "2.2250738585072014e-308",
    "many_digits": "3.14159265358979323846264338327950288",
    "nan": "NaN", "infinity": "Infinity", "minus_infinity": "-Infinity",
    "plus_infinity": "+Infinity", "nan_lower": "nan", "inf": "Inf",
    "string_nan": '"NaN"', "string_number": '"1.5"', "leading_zero": "01.5", "dot_start": ".5",
    "dot_end": "1.", "minus_dot": "-.5", "exponent_empty": "1.5e", "plus": "+1.5",
    "hex": "0x1p3", "true": "true", "array": "[1.5]", "object": '{"v": 1.5}',
}
_JSON_BOOLEANS = {"true": "true", "false": "false", "null": "null", "string_true": '"true"',
                  "one": "1", "zero": "0", "title_case": "True", "upper_case": "TRUE",
                  "abbreviated": "t"}
_JSON_STRUCTURE = {
    "missing_members": '{"id": {id}}',
    "all_null": '{"id": {id}, "n": null, "d": null, "s": null, "b": null}',
    "all_members": '{"id": {id}, "n": 7, "d": 2.5, "s": "x", "b": false}',
    "members_reordered": '{"b": true, "s": "x", "d": 2.5, "n": 7, "id": {id}}',
    "spaces_around_tokens": '  { "id" : {id} , "s" : "x" }  ',
    "tabs_around_tokens": '\t{\t"id"\t:\t{id}\t}\t',
    "cr_inside_line": '{"id": {id},\r"s": "x"}',
    "form_feed_as_space": '{\f"id": {id}}', "nbsp_as_space": '{\u00a0"id": {id}}',
    "duplicate_member": '{"id": {id}, "s": "first", "s": "second"}',
    "duplicate_member_types": '{"id": {id}, "d": "text", "d": 1.5}',
    "member_name_case": '{"id": {id}, "S": "x"}',
    "member_name_escaped": '{"id": {id}, "\\u0073": "x"}',
    "extra_member": '{"id": {id}, "extra": 1}',
    "extra_member_nested": '{"id": {id}, "extra": {"a": [1, 2]}}',
    "trailing_comma": '{"id": {id},}', "missing_comma": '{"id": {id} "s": "x"}',
    "missing_colon": '{"id" {id}}', "missing_value": '{"id": {id}, "s":}',
    "single_quoted_names": "{'id': {id}}", "unquoted_names": "{id: {id}}",
    "line_comment": '{"id": {id}} // note', "block_comment": '{"id": /* c */ {id}}',
    "trailing_garbage": '{"id": {id}} x', "two_objects": '{"id": {id}}{"id": {id}}',
    "two_objects_space": '{"id": {id}} {"id": {id}}', "unclosed_object": '{"id": {id}',
    "closing_only": "}", "top_level_number": "5", "top_level_string": '"x"',
    "top_level_null": "null", "top_level_true": "true", "top_level_empty_array": "[]",
    "top_level_array_of_one": '[{"id": {id}}]',
    "top_level_array_of_two": '[{"id": {id}}, {"id": {id}}]',
    "top_level_array_of_numbers": "[1, 2]",
    "deep_nesting_100000": "[" * 100_000,
    "deep_nesting_2000_in_member": '{"id": {id}, "s": ' + "[" * 2000 + "]" * 2000 + "}",
    "deep_nesting_2000_unclosed_in_member": '{"id": {id}, "s": ' + "{\"a\":" * 2000 + "}",
    "member_null_byte": '{"id": {id}, "s": "a\x00b"}',
}


def json_corpus() -> Corpus:
    corpus = Corpus("json", "json", DDL)
    add = _Builder(corpus, 1).add
    for name, value in _JSON_STRINGS.items():
        add(f"string_{name}", '{"id": {id}, "s": ' + value + "}")
    for name, value in _JSON_NUMBERS_N.items():
        add(f"bigint_{name}", '{"id": {id}, "n": ' + value + "}")
    for name, value in _JSON_NUMBERS_D.items():
        add(f"double_{name}", '{"id": {id}, "d": ' + value + "}")
    for name, value in _JSON_BOOLEANS.items():
        add(f"boolean_{name}", '{"id": {id}, "b": ' + value + "}")
    for name, line in _JSON_STRUCTURE.items():
        # Spark reads a top-level array as its elements, and a CR as a line end.
        alone = name.startswith(("top_level_empty", "top_level_array_of_", "two_objects",
                                 "cr_inside"))
        add(f"structure_{name}", line, alone=alone)
    _json_files(add)
    return corpus


def _json_files(add: Callable[..., None]) -> None:
    """Whole-file cases (each a file of its own): line ends, blank lines, byte order
    marks, encodings; and bytes that are not UTF-8."""
    row = '{"id": {id}, "s": "x"}'
    file = functools.partial(add, alone=True)
    file("file_empty", records=0)
    file("file_blank_lines_only", b"", b"  ", b"\t", records=0)
    file("file_lf", row, row, row)
    file("file_crlf", row, row, row, sep=b"\r\n", tail=b"\r\n")
    file("file_cr_only", row, row, row, sep=b"\r", tail=b"\r", records=1)
    file("file_no_final_newline", row, row, tail=b"")
    file("file_blank_lines_between", row, b"", row, b"   ", row, records=3)
    file("file_bom", row, row, head=b"\xef\xbb\xbf")
    file("file_bom_then_blank_line", b"", row, head=b"\xef\xbb\xbf", records=1)
    file("file_utf16le_bom", ('\ufeff{"id": {id}}'.encode("utf-16-le")), records=1)
    file("file_last_line_cr", row, row, tail=b"\r", records=2)
    add("bytes_invalid_ff", b'{"id": {id}, "s": "a\xffb"}')
    add("bytes_latin1_e9", b'{"id": {id}, "s": "caf\xe9"}')
    add("bytes_overlong_slash", b'{"id": {id}, "s": "\xc0\xaf"}')
    add("bytes_encoded_surrogate", b'{"id": {id}, "s": "\xed\xa0\x80"}')
    add("bytes_truncated_sequence", b'{"id": {id}, "s": "\xe2\x82"}')
    add("bytes_invalid_outside_string", b'{"id": {id}}\xff')
    add("bytes_issue_row_ff", b'{"id": {id}, "s": "\xff"}')


# --- CSV (RFC 4180), with a header line -----------------------------------------------------
HEADER = b"id,n,d,s,b"
_CSV_FIELDS_S = {  # the `s` field, as written
    "plain": "hello", "empty": "", "quoted": '"hello"', "quoted_empty": '""',
    "quoted_comma": '"a,b"', "quoted_lf": '"a\nb"', "quoted_crlf": '"a\r\nb"',
    "quoted_cr": '"a\rb"', "quoted_escaped_quote": '"say ""hi"""',
    "quoted_only_quote": '""""', "quoted_spaces": '"  a  "', "spaces": "  a  ",
    "space_before_quote": ' "a"', "space_after_quote": '"a" ', "quote_inside_unquoted": 'a"b',
    "text_after_closing_quote": '"a"b', "backslash": "a\\b", "backslash_quote_quoted": '"a\\"b"',
    "backslash_at_end_quoted": '"a\\\\"', "quoted_many_lines": '"l1\nl2\r\nl3\n\nl5"',
    "utf8": "café €😀", "raw_tab": "a\tb", "raw_control_01": "a\x01b", "nul": "a\x00b",
    "long_200k_quoted_lines": '"' + ("x" * 999 + "\n") * 200 + '"',
    "issue_once_upon": '"Once upon \na time"', "issue_ha_ha": '"ha \n""ha"" \nha"',
}
_CSV_FIELDS_N = {
    "plain": "5", "negative": "-5", "plus": "+5", "leading_zero": "05", "exponent": "1e2",
    "fraction_zero": "5.0", "fraction": "5.5", "leading_space": " 5", "trailing_space": "5 ",
    "int64_max": "9223372036854775807", "int64_max_plus_1": "9223372036854775808",
    "int64_min": "-9223372036854775808", "hex": "0x10", "underscore": "1_000",
    "fullwidth_digit": "１", "text": "five", "quoted": '"5"', "nan": "NaN",
}
_CSV_FIELDS_D = {
    "plain": "1.5", "int": "3", "negative_zero": "-0", "exponent": "1e5", "exponent_minus": "1e-5",
    "dot_start": ".5", "dot_end": "1.", "nan": "NaN", "nan_lower": "nan", "inf": "Inf",
    "minus_inf": "-Inf", "infinity": "Infinity", "minus_infinity": "-Infinity",
    "suffix_d": "1d", "suffix_f": "1.5f", "hex_float": "0x1p3", "overflow": "1e400",
    "underflow": "1e-400", "comma_decimal_quoted": '"1,5"', "leading_space": " 1.5",
    "trailing_space": "1.5 ", "text": "x", "many_digits": "3.14159265358979323846264338327950288",
}
_CSV_FIELDS_B = {"true": "true", "false": "false", "upper": "TRUE", "title": "True",
                 "one": "1", "zero": "0", "yes": "yes", "t": "t", "quoted": '"true"'}


# Fields whose quotes RFC 4180 does not allow (or a reader may take for an escape): a
# reader may then read on past the line end, so each is a file of its own.
_CSV_QUOTES_ALONE = {"space_before_quote", "space_after_quote", "quote_inside_unquoted",
                     "text_after_closing_quote", "backslash_quote_quoted",
                     "backslash_at_end_quoted", "quoted_cr", "issue_ha_ha"}


def csv_corpus() -> Corpus:
    corpus = Corpus("csv", "csv", DDL, head=HEADER + b"\n")
    add = _Builder(corpus, 1_000_001).add
    for name, value in _CSV_FIELDS_S.items():
        add(f"string_{name}", "{id},,," + value + ",", alone=name in _CSV_QUOTES_ALONE)
    for name, value in _CSV_FIELDS_N.items():
        add(f"bigint_{name}", "{id}," + value + ",,,")
    for name, value in _CSV_FIELDS_D.items():
        add(f"double_{name}", "{id},," + value + ",,")
    for name, value in _CSV_FIELDS_B.items():
        add(f"boolean_{name}", "{id},,,," + value)
    for name, kwargs in _csv_structure():
        add(name, *kwargs.pop("rows"), alone=True, **kwargs)
    return corpus


def _csv_structure() -> Iterator[tuple[str, dict[str, Any]]]:
    row = "{id},1,1.5,x,true"
    yield "record_all_fields", {"rows": [row]}
    yield "record_all_empty", {"rows": ["{id},,,,"]}
    yield "record_all_quoted", {"rows": ['"{id}","1","1.5","x","true"']}
    yield "record_fewer_fields", {"rows": ["{id},1"]}
    yield "record_more_fields", {"rows": ["{id},1,1.5,x,true,extra"]}
    yield "record_one_more_empty_field", {"rows": ["{id},1,1.5,x,true,"]}
    yield "record_only_spaces", {"rows": [row, "   ", row], "records": 3}
    yield "record_quoted_id", {"rows": ['"{id}",,,,']}
    yield "record_unterminated_quote_at_end", {"rows": [row, '{id},,,"abc']}
    yield "record_unterminated_quote_then_records", {"rows": ['{id},,,"abc', row, row],
                                                     "records": 1}
    yield "record_lone_quote_line", {"rows": [row, '"', row], "records": 2}
    yield "record_issue_empty_quoted", {"rows": ['{id},,,"",""']}
    yield "file_empty", {"rows": [], "head": b"", "records": 0}
    yield "file_header_only_newline", {"rows": [], "records": 0}
    yield "file_header_only_no_newline", {"rows": [], "head": HEADER, "records": 0}
    yield "file_crlf", {"rows": [row, row, row], "head": HEADER + b"\r\n", "sep": b"\r\n",
                        "tail": b"\r\n"}
    yield "file_cr_only", {"rows": [row, row], "head": HEADER + b"\r", "sep": b"\r",
                           "tail": b"\r"}
    yield "file_no_final_newline", {"rows": [row, row], "tail": b""}
    yield "file_quoted_lf_last_no_newline", {"rows": [row, '{id},,,"a\nb",'], "tail": b""}
    yield "file_blank_lines_between", {"rows": [row, "", row, ""], "records": 2}
    yield "file_blank_lines_after_header", {"rows": ["", row], "records": 1}
    yield "file_bom", {"rows": [row, row], "head": b"\xef\xbb\xbf" + HEADER + b"\n"}
    yield "file_header_quoted", {"rows": [row], "head": b'"id","n","d","s","b"\n'}
    yield "file_header_reordered", {"rows": ["x,true,{id},1,1.5"],
                                    "head": b"s,b,id,n,d\n"}
    yield "file_header_unknown_column", {"rows": ["{id},1,1.5,x,true"],
                                         "head": b"id,n,d,s,other\n"}
    yield "file_header_fewer_columns", {"rows": ["{id},1"], "head": b"id,n\n"}
    yield "file_header_column_twice", {"rows": ["{id},1,2"], "head": b"id,n,n\n"}
    yield "bytes_invalid_ff", {"rows": [b"{id},,,a\xffb,"]}
    yield "bytes_latin1_e9", {"rows": [b"{id},,,caf\xe9,"]}
    yield "bytes_invalid_in_quoted_lf", {"rows": [b'{id},,,"a\n\xff",']}
    yield "bytes_truncated_sequence", {"rows": [b"{id},,,\xe2\x82,"]}


def wide_corpora() -> list[Corpus]:
    """Very wide rows: 1,000 columns, as JSON and CSV."""
    values = [str(i) for i in range(1, WIDE_COLUMNS)]
    names = ["id"] + [f"c{i}" for i in range(1, WIDE_COLUMNS)]
    json_c = Corpus("json_wide", "json", WIDE_DDL)
    add = _Builder(json_c, 2_000_001).add

    def obj(cells: list[str]) -> str:  # the first len(cells) members
        return "{" + ", ".join(f'"{n}": {v}' for n, v in zip(names, cells)) + "}"

    add("wide_all", obj(["{id}", *values]))
    add("wide_last_bad", obj(["{id}", *values[:-1], '"x"']))
    add("wide_first_half", obj(["{id}", *values[: WIDE_COLUMNS // 2]]))
    csv_c = Corpus("csv_wide", "csv", WIDE_DDL, head=",".join(names).encode() + b"\n")
    add = _Builder(csv_c, 3_000_001).add
    add("wide_all", ",".join(["{id}", *values]))
    add("wide_last_bad", ",".join(["{id}", *values[:-1], "x"]))
    add("wide_one_short", ",".join(["{id}", *values[:-1]]))
    add("wide_all_quoted_lf", ",".join(["{id}", *[f'"{v}\n"' for v in values]]))
    return [json_c, csv_c]


def option_corpora() -> list[Corpus]:
    """The reader options that change what a record reads as, set the other way than
    their defaults (Spark's names, given to both readers)."""
    strict = Corpus("json_no_nan", "json", DDL, options={"allowNonNumericNumbers": "false"})
    add = _Builder(strict, 4_000_001).add
    for name, value in (("nan", "NaN"), ("infinity", "Infinity"),
                        ("minus_infinity", "-Infinity"), ("plus_infinity", "+Infinity"),
                        ("string_nan", '"NaN"'), ("fraction", "1.5")):
        add(f"double_{name}", '{"id": {id}, "d": ' + value + "}")
    add("bigint_nan", '{"id": {id}, "n": NaN}')
    nulls = Corpus("csv_null_value", "csv", DDL, head=HEADER + b"\n",
                   options={"nullValue": "\\N"})
    add = _Builder(nulls, 5_000_001).add
    for name, value in (("empty", ""), ("quoted_empty", '""'), ("null_token", "\\N"),
                        ("quoted_null_token", '"\\N"'), ("word_null", "NULL"),
                        ("spaces", " ")):
        add(f"string_{name}", "{id},,," + value + ",")
        add(f"bigint_{name}", "{id}," + value + ",,,")
    return [strict, nulls, *dialect_corpora()]


def dialect_corpora() -> list[Corpus]:
    """Another separator (`sep`), and files without a header (`header=false`)."""
    semi = Corpus("csv_semicolon", "csv", DDL, head=HEADER.replace(b",", b";") + b"\n",
                  options={"sep": ";"})
    add = _Builder(semi, 6_000_001).add
    add("record_all_fields", "{id};1;1.5;x;true")
    add("string_comma", "{id};;;a,b;")
    add("string_quoted_sep", '{id};;;"a;b";')
    add("string_quoted_lf_and_sep", '{id};;;"a;\nb";')
    add("string_quoted_empty", '{id};;;"";')
    add("record_comma_separated", "{id},1,1.5,x,true")
    tabs = Corpus("csv_tab_no_header", "csv", DDL, options={"sep": "\t", "header": "false"})
    add = _Builder(tabs, 7_000_001).add
    add("record_all_fields", "{id}\t1\t1.5\tx\ttrue")
    add("string_comma_semicolon", "{id}\t\t\ta,b;c\t")
    add("string_quoted_tab", '{id}\t\t\t"a\tb"\t')
    add("string_quoted_crlf", '{id}\t\t\t"a\r\nb"\t')
    add("record_all_empty", "{id}\t\t\t\t")
    add("record_header_like", "id\tn\td\ts\tb")
    add("file_first_record_is_data", "{id}\t2\t2.5\ty\tfalse", alone=True)
    spark = Corpus("csv_backslash_escape", "csv", DDL, head=HEADER + b"\n",
                   options={"escape": "\\"})
    add = _Builder(spark, 9_000_001).add
    for name, value in (("escaped_quote", '"a\\"b"'), ("escaped_escape", '"a\\\\b,c"'),
                        ("escaped_escape_then_quote", '"a\\\\\\"b"'),
                        ("escape_before_other", '"a\\b"'), ("plain_backslash", "a\\b"),
                        ("escape_at_end", '"x,y\\\\"'), ("only_quotes", '"\\"q\\""'),
                        ("escaped_line_break", '"x\\\\\ny"')):
        add(f"string_{name}", "{id},,," + value + ",")
    add("string_doubled_quote", '{id},,,"a""b",', alone=True)
    return [semi, tabs, spark]


def document_corpus() -> Corpus:
    """JSON files as documents (`multiLine`): each case a file of its own."""
    docs = Corpus("json_documents", "json", DDL, options={"multiLine": "true"})
    add = _Builder(docs, 8_000_001).add
    for name, text, records in (
            ("array_pretty", '[\n  {"id": {id}, "n": 1},\n  {"id": {id}, "s": "a\\nb"}\n]', 2),
            ("object_pretty", '{\n  "id": {id},\n  "d": 1.5\n}', 1),
            ("array_empty", "[]", 0),
            ("array_strings_with_brackets", '[{"id": {id}, "s": "],[{,\\""}]', 1),
            ("array_one_cast_error", '[{"id": {id}, "n": 1},\n {"id": {id}, "n": "x"}]', 2),
            ("array_scalar_element", '[{"id": {id}},\n 5]', 2),
            ("array_trailing_comma", '[{"id": {id}},]', 1),
            ("json_lines", '{"id": {id}}\n{"id": {id}}', 1),
            ("bom_array", '\ufeff[{"id": {id}}]', 1)):
        add(name, text, records=records, alone=True)
    return docs


def corpora() -> list[Corpus]:
    return [json_corpus(), csv_corpus(), *wide_corpora(), *option_corpora(),
            document_corpus()]


if __name__ == "__main__":
    for corpus in corpora():
        print(corpus.write(Path(sys.argv[1]) / corpus.name), len(corpus.cases), "cases")
