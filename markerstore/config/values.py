"""Values and parsing: how a field's text becomes a typed value (null and empty text, NaN and
infinities, Spark's date-time patterns, the locale)."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    locale,
    parse_bool,
    text,
)
from markerstore.values.patterns import pattern_option

INGEST_NULL_VALUE = "markerstore.ingest.csv.nullValue"
INGEST_EMPTY_VALUE = "markerstore.ingest.csv.emptyValue"
INGEST_NON_NUMERIC = "markerstore.ingest.json.allowNonNumericNumbers"
INGEST_DATE_FORMAT = "markerstore.ingest.dateFormat"
INGEST_TIMESTAMP_FORMAT = "markerstore.ingest.timestampFormat"
INGEST_TIMESTAMP_NTZ_FORMAT = "markerstore.ingest.timestampNTZFormat"
INGEST_NAN_VALUE = "markerstore.ingest.csv.nanValue"
INGEST_POSITIVE_INF = "markerstore.ingest.csv.positiveInf"
INGEST_NEGATIVE_INF = "markerstore.ingest.csv.negativeInf"
INGEST_LOCALE = "markerstore.ingest.locale"

DEFINITIONS: tuple[Option, ...] = (
    Option(INGEST_NULL_VALUE, "", text,
           "Ingest, CSV (Spark's nullValue): a field equal to this, quoted or not, is null; "
           "an empty unquoted field is always null.", ("nullValue",)),
    Option(INGEST_EMPTY_VALUE, "", text,
           "Ingest, CSV (Spark's emptyValue): what a quoted empty field (\"\") reads as; null "
           "when it equals nullValue (so by default). nullValue=\\N reads \"\" as an empty "
           "string.", ("emptyValue",)),
    Option(INGEST_NON_NUMERIC, True, parse_bool,
           "Ingest, JSON (Spark's allowNonNumericNumbers): read NaN, Infinity and -Infinity "
           "as doubles; false: such a record is a parse error (RFC 8259 has no such "
           "tokens).", ("allowNonNumericNumbers",)),
    Option(INGEST_DATE_FORMAT, None, pattern_option("dateFormat"),
           "Ingest, CSV and JSON (Spark's dateFormat): the pattern of DATE values, in Spark's "
           "datetime pattern letters (the subset in docs/INGEST.md, such as dd/MM/yyyy); "
           "a value that does not match is a cast error. Not set: ISO 8601 (yyyy-MM-dd). "
           "Without a schema, a CSV column whose every sampled value matches it (not set: is "
           "an ISO date) is inferred as a DATE (Spark's preferDate).",
           ("dateFormat",)),
    Option(INGEST_TIMESTAMP_FORMAT, None, pattern_option("timestampFormat"),
           "Ingest, CSV and JSON (Spark's timestampFormat): the pattern of TIMESTAMP values "
           "(such as yyyy-MM-dd'T'HH:mm:ss.SSSXXX); a value without an offset is UTC. Not "
           "set: ISO 8601 with an offset. Without a schema, a CSV column whose every sampled "
           "value matches it (not set: is an ISO timestamp), and not dateFormat, is inferred "
           "as a TIMESTAMP.",
           ("timestampFormat",)),
    Option(INGEST_TIMESTAMP_NTZ_FORMAT, None, pattern_option("timestampNTZFormat"),
           "Ingest, CSV and JSON (Spark's timestampNTZFormat): the pattern of TIMESTAMP_NTZ "
           "values (no offset letters). Not set: ISO 8601 without an offset.",
           ("timestampNTZFormat",)),
    Option(INGEST_NAN_VALUE, "NaN", text,
           "Ingest, CSV (Spark's nanValue): the text of NaN in a FLOAT or DOUBLE column, "
           "besides NaN in any case.", ("nanValue",)),
    Option(INGEST_POSITIVE_INF, "Inf", text,
           "Ingest, CSV (Spark's positiveInf): the text of +infinity in a FLOAT or DOUBLE "
           "column, besides inf and infinity in any case, with or without +.",
           ("positiveInf",)),
    Option(INGEST_NEGATIVE_INF, "-Inf", text,
           "Ingest, CSV (Spark's negativeInf): the text of -infinity in a FLOAT or DOUBLE "
           "column, besides -inf and -infinity in any case.", ("negativeInf",)),
    Option(INGEST_LOCALE, "en-US", locale,
           "Ingest, CSV and JSON (Spark's locale): a BCP 47 language tag CLDR knows (fr-FR, "
           "de-DE, pt-BR, ...): a DECIMAL's text is read with the locale's decimal and "
           "grouping separators (de-DE: 14.000,00), a grouping separator only between groups "
           "of digits; the names of months, days and AM/PM in a dateFormat or "
           "timestampFormat are the locale's (CLDR's data, through Babel).", ("locale",)),
)
