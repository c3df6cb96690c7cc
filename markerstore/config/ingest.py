"""Ingest reading: how source files are split into tasks and read into records (Spark's
CSV and JSON reader options, schema inference, Spark Connect)."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    charset,
    choice,
    corrupt_record_column,
    csv_comment,
    csv_escape,
    csv_line_sep,
    csv_quote,
    csv_separator,
    int_min,
    parse_bool,
    read_mode,
)

INGEST_TASK_BYTES = "markerstore.ingest.task_bytes"
CONNECT_TIMEOUT_MS = "markerstore.ingest.connect.timeout_ms"
CONNECT_RETRIES = "markerstore.ingest.connect.retries"
INGEST_SPLIT_BYTES = "markerstore.ingest.split_bytes"
INGEST_CSV_SEP = "markerstore.ingest.csv.sep"
INGEST_CSV_HEADER = "markerstore.ingest.csv.header"
INGEST_CSV_ESCAPE = "markerstore.ingest.csv.escape"
INGEST_JSON_MULTILINE = "markerstore.ingest.json.multiLine"
INGEST_VALUE_AS_TEXT = "markerstore.ingest.json.value_as_text"
INGEST_ENCODING_ERRORS = "markerstore.ingest.encoding.errors"
INGEST_ENCODING = "markerstore.ingest.encoding"
INGEST_RECORD_MAX_BYTES = "markerstore.ingest.record.max_bytes"
# Spark's schema inference options, and how many records inference reads
INGEST_INFER_SCHEMA = "markerstore.ingest.csv.inferSchema"
INGEST_PREFER_DATE = "markerstore.ingest.csv.preferDate"
INGEST_PREFERS_DECIMAL = "markerstore.ingest.json.prefersDecimal"
INGEST_PRIMITIVES_AS_STRING = "markerstore.ingest.json.primitivesAsString"
INGEST_INFER_RECORDS = "markerstore.ingest.infer.records"
# Spark's reader options for the structure of records
INGEST_MODE = "markerstore.ingest.mode"
INGEST_CORRUPT_RECORD = "markerstore.ingest.columnNameOfCorruptRecord"
INGEST_CSV_QUOTE = "markerstore.ingest.csv.quote"
INGEST_CSV_COMMENT = "markerstore.ingest.csv.comment"
INGEST_CSV_LINE_SEP = "markerstore.ingest.csv.lineSep"
INGEST_CSV_IGNORE_LEADING = "markerstore.ingest.csv.ignoreLeadingWhiteSpace"
INGEST_CSV_IGNORE_TRAILING = "markerstore.ingest.csv.ignoreTrailingWhiteSpace"
# options beyond Spark's, with the names and meaning of DuckDB's read_csv
INGEST_CSV_SKIP = "markerstore.ingest.csv.skip"
INGEST_CSV_NULL_PADDING = "markerstore.ingest.csv.null_padding"

DEFINITIONS: tuple[Option, ...] = (
    Option(INGEST_TASK_BYTES, 256 * 1024 * 1024, int_min(1),
           "Ingest: source bytes a Spark task reads at most. Source splits are packed into "
           "as few tasks as this allows, one wave per core at least (balanced by bytes).",
           ()),
    Option(CONNECT_TIMEOUT_MS, 10000, int_min(1),
           "Ingest over Spark Connect (--remote): how long to wait for the server to accept "
           "a connection before failing with one line naming its address.",
           ()),
    Option(CONNECT_RETRIES, 3, int_min(0),
           "Ingest over Spark Connect: retries of a Spark Connect call the server did not "
           "answer (pyspark's own default keeps retrying for 10 minutes).",
           ()),
    Option(INGEST_SPLIT_BYTES, 64 * 1024 * 1024, int_min(1),
           "Ingest: a JSON-lines or CSV file larger than this (not compressed) is read in "
           "byte ranges of this size, each by one task; each range reads the records that "
           "start in it. When not given, a source of few large files is cut smaller, into "
           "two ranges per core (16 MiB at least), so that every core stays busy.",
           ()),
    Option(INGEST_CSV_SEP, ",", csv_separator,
           "Ingest, CSV (Spark's sep): the field separator, one character other than the "
           "quote and a line break (\\t for a tab; any character, as Spark takes it: þ, §).",
           ("sep", "delimiter")),
    Option(INGEST_CSV_ESCAPE, '"', csv_escape,
           "Ingest, CSV (Spark's escape, whose default there is a backslash): what escapes "
           "a quote inside a quoted field. \" (RFC 4180): \"\" is a quote; another "
           "character (\\ as Spark writes): it escapes a quote or itself, and is kept "
           "before any other character.", ("escape",)),
    Option(INGEST_CSV_HEADER, True, parse_bool,
           "Ingest, CSV (Spark's header, whose default there is false): the first record of "
           "each file names the columns; false: every record is data and the columns are "
           "the schema's in order (an inferred schema names them _c0, _c1, ...).",
           ("header",)),
    Option(INGEST_JSON_MULTILINE, False, parse_bool,
           "Ingest, JSON (Spark's multiLine): each file is one JSON document, read whole; "
           "its records are the elements of a top-level array (any other document is one "
           "record). The document counts as one record for record.max_bytes.",
           ("multiLine",)),
    Option(INGEST_VALUE_AS_TEXT, True, parse_bool,
           "Ingest, JSON: a STRING column takes a number, boolean, array or object as its "
           "JSON text, as written (as Spark does); false: such a value is a cast error.",
           ()),
    Option(INGEST_ENCODING_ERRORS, "strict", choice("strict", "replace"),
           "Ingest: a record whose bytes are not UTF-8 is an error record of reason "
           "encoding, its bytes kept (strict), or is read with U+FFFD for them (replace).",
           ()),
    Option(INGEST_INFER_SCHEMA, True, parse_bool,
           "Ingest, CSV (Spark's inferSchema, whose default there is false): without a "
           "schema, each column's type is inferred from the sampled records (docs/INGEST.md, "
           "Inferred schema); false: every column is STRING, as Spark reads one by default.",
           ("inferSchema",)),
    Option(INGEST_PREFER_DATE, True, parse_bool,
           "Ingest, CSV (Spark's preferDate): inference may type a column DATE; false: a "
           "column of dates is inferred as a TIMESTAMP where timestampFormat (or ISO 8601) "
           "reads it, else STRING.", ("preferDate",)),
    Option(INGEST_PREFERS_DECIMAL, False, parse_bool,
           "Ingest, JSON (Spark's prefersDecimal): inference types numbers with a fraction "
           "DECIMAL(p,s), wide enough for every sampled value (38 digits at most), not "
           "DOUBLE.", ("prefersDecimal",)),
    Option(INGEST_PRIMITIVES_AS_STRING, False, parse_bool,
           "Ingest, JSON (Spark's primitivesAsString): inference types every number and "
           "boolean STRING, read as its JSON text; a column with one inside its arrays or "
           "structs is STRING as a whole.", ("primitivesAsString",)),
    Option(INGEST_INFER_RECORDS, 2000, int_min(1),
           "Ingest: how many records, from the start of the source, schema inference reads "
           "(Spark reads them all by default: a type that first shows past them is a cast "
           "error for its records).", ()),
    Option(INGEST_ENCODING, "utf-8", charset,
           "Ingest, CSV and JSON (Spark's encoding, alias charset): the files' character "
           "encoding: utf-8, iso-8859-1 (latin1), windows-1252 (cp1252), utf-16 (with a "
           "byte order mark), utf-16le, utf-16be. A record it cannot decode is an "
           "encoding error record, its bytes kept. A UTF-16 file is read whole by one task.",
           ("encoding", "charset")),
    Option(INGEST_RECORD_MAX_BYTES, 64 * 1024 * 1024, int_min(1),
           "Ingest: a record (a line, or a CSV record spanning lines) larger than this is "
           "one error record of reason size holding its first 64 KiB; it is never held "
           "whole in memory.", ()),
    # Spark's reader options for the structure of records (docs/INGEST.md: differences)
    Option(INGEST_MODE, "PERMISSIVE", read_mode,
           "Ingest (Spark's mode, any case): PERMISSIVE keeps every malformed record as one "
           "error record; FAILFAST allows none: the write fails and is rolled back, data and "
           "error rows alike, in one line naming the reason (error.table.max_records=0). "
           "DROPMALFORMED is refused: the error table keeps malformed records.", ("mode",)),
    Option(INGEST_CORRUPT_RECORD, None, corrupt_record_column,
           "Ingest (Spark's columnNameOfCorruptRecord): refused; a malformed record is never "
           "a row, the error table holds it with its text and reason.",
           ("columnNameOfCorruptRecord",)),
    Option(INGEST_CSV_QUOTE, '"', csv_quote,
           "Ingest, CSV (Spark's quote): the character that opens and closes a quoted field; "
           "doubled inside one it is itself, unless escape names another character.",
           ("quote",)),
    Option(INGEST_CSV_COMMENT, "", csv_comment,
           "Ingest, CSV (Spark's comment): a line that starts with this character (outside a "
           "quoted field) is no record; empty (the default): none is a comment.",
           ("comment",)),
    Option(INGEST_CSV_LINE_SEP, None, csv_line_sep,
           "Ingest, CSV (Spark's lineSep): what ends a record outside a quoted field. Default: "
           "any of LF, CRLF and a lone CR; else one character (\\n, \\r, ...) or \\r\\n.",
           ("lineSep",)),
    Option(INGEST_CSV_IGNORE_LEADING, False, parse_bool,
           "Ingest, CSV (Spark's ignoreLeadingWhiteSpace, false for reading): spaces and tabs "
           "before a value are not part of it (before an opening quote too).",
           ("ignoreLeadingWhiteSpace",)),
    Option(INGEST_CSV_IGNORE_TRAILING, False, parse_bool,
           "Ingest, CSV (Spark's ignoreTrailingWhiteSpace, false for reading): spaces and tabs "
           "after a value are not part of it (after a closing quote too).",
           ("ignoreTrailingWhiteSpace",)),
    Option(INGEST_CSV_SKIP, 0, int_min(0),
           "Ingest, CSV (DuckDB's read_csv skip; Spark has none): the lines at the top of each "
           "file that are not CSV (a title, notes), skipped before the header: each ends at "
           "the first line end, its quotes unread. They count in source_lines.",
           ("skip",)),
    Option(INGEST_CSV_NULL_PADDING, False, parse_bool,
           "Ingest, CSV (DuckDB's read_csv null_padding; Spark has none): a record with fewer "
           "fields than the header reads its missing last columns as null (spreadsheet exports "
           "drop trailing empty fields); false: such a record is a parse error. A record with "
           "more fields stays one.", ("null_padding",)),
)
