"""The ingest's reading options, typed: one view of the settings, built once.

:meth:`IngestOptions.from_settings` reads every option of how ingest reads records and
values (markerstore.config's ``ingest`` and ``values`` areas) from the settings; the
reader's :class:`~markerstore.ingest.blocks.ReadOptions`, errortable's ``ParseOptions``
and ``ValueFormats`` are built from it, with nothing read again by key and no default
restated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.errors import ConfigError
from markerstore.ingest.blocks import ReadOptions
from markerstore.ingest.charsets import SINGLE_BYTE, codec


@dataclass(frozen=True)
class IngestOptions:
    """How an ingest reads its sources: records (the CSV dialect, the JSON layout, the
    encoding, the size limit), text values (null and empty text, non-numeric numbers,
    date-time patterns, NaN and infinity tokens, the locale) and malformed records."""

    # records
    record_max_bytes: int
    encoding: str
    encoding_errors: str
    json_multiline: bool
    csv_header: bool
    sep: str
    quote: str
    escape: str  # the quote itself (doubled) unless an escape is given
    escape_given: bool
    comment: str
    line_sep: str | None
    ignore_leading: bool
    ignore_trailing: bool
    null_padding: bool
    value_as_text: bool
    # text values
    null_value: str
    empty_value: str
    non_numeric: bool
    date_format: str | None
    timestamp_format: str | None
    timestamp_ntz_format: str | None
    nan_value: str
    positive_inf: str
    negative_inf: str
    locale: str
    # malformed records
    mode: str

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | config.Settings | None
                      ) -> IngestOptions:
        """The options of `settings` (a user's dict or resolved Settings)."""
        s = config.resolve(settings)
        quote = s[config.INGEST_CSV_QUOTE]
        given = config.INGEST_CSV_ESCAPE in s.given
        return cls(
            record_max_bytes=s[config.INGEST_RECORD_MAX_BYTES], encoding=s[config.INGEST_ENCODING],
            encoding_errors=s[config.INGEST_ENCODING_ERRORS],
            json_multiline=s[config.INGEST_JSON_MULTILINE], csv_header=s[config.INGEST_CSV_HEADER],
            sep=s[config.INGEST_CSV_SEP], quote=quote,
            escape=s[config.INGEST_CSV_ESCAPE] if given else quote, escape_given=given,
            comment=s[config.INGEST_CSV_COMMENT], line_sep=s[config.INGEST_CSV_LINE_SEP],
            ignore_leading=s[config.INGEST_CSV_IGNORE_LEADING],
            ignore_trailing=s[config.INGEST_CSV_IGNORE_TRAILING],
            null_padding=s[config.INGEST_CSV_NULL_PADDING],
            value_as_text=s[config.INGEST_VALUE_AS_TEXT],
            null_value=s[config.INGEST_NULL_VALUE], empty_value=s[config.INGEST_EMPTY_VALUE],
            non_numeric=s[config.INGEST_NON_NUMERIC], date_format=s[config.INGEST_DATE_FORMAT],
            timestamp_format=s[config.INGEST_TIMESTAMP_FORMAT],
            timestamp_ntz_format=s[config.INGEST_TIMESTAMP_NTZ_FORMAT],
            nan_value=s[config.INGEST_NAN_VALUE], positive_inf=s[config.INGEST_POSITIVE_INF],
            negative_inf=s[config.INGEST_NEGATIVE_INF], locale=s[config.INGEST_LOCALE],
            mode=s[config.INGEST_MODE])

    @property
    def failfast(self) -> bool:
        """Spark's FAILFAST: no malformed record is allowed (the write fails at commit)."""
        return self.mode == "FAILFAST"

    def read_options(self) -> ReadOptions:
        """The block reader's options; two CSV options naming one character, or a
        separator the files' encoding cannot write, are refused in one line."""
        if self.encoding in SINGLE_BYTE:
            try:
                self.sep.encode(codec(self.encoding))
            except UnicodeEncodeError:
                raise ConfigError(f"option {config.INGEST_CSV_SEP}: the separator {self.sep!r} "
                                  f"is no character of the files' encoding {self.encoding}"
                                  ) from None
        line_sep = self.line_sep
        _distinct((config.INGEST_CSV_SEP, self.sep), (config.INGEST_CSV_QUOTE, self.quote),
                  (config.INGEST_CSV_ESCAPE, self.escape if self.escape != self.quote else ""),
                  (config.INGEST_CSV_COMMENT, self.comment),
                  (config.INGEST_CSV_LINE_SEP, line_sep if line_sep and len(line_sep) == 1
                   else ""))
        return ReadOptions(self.record_max_bytes, self.encoding_errors, self.sep, self.escape,
                           self.json_multiline, self.encoding, self.quote, self.comment,
                           line_sep, self.ignore_leading, self.ignore_trailing)

    def parse_options(self, schema: pa.Schema) -> Any:
        """errortable's ParseOptions for a target `schema`."""
        from errortable.capture.parsing import ParseOptions

        text_columns = frozenset(f.name for f in schema if pa.types.is_string(f.type)
                                 or pa.types.is_large_string(f.type)) \
            if self.value_as_text else frozenset()
        return ParseOptions(self.null_value, self.empty_value, self.non_numeric, text_columns,
                            frozenset(f.name for f in schema if pa.types.is_binary(f.type)
                                      or pa.types.is_large_binary(f.type)),
                            self.null_padding)

    def value_formats(self) -> Any:
        """How text values read (errortable's ValueFormats): Spark's date-time patterns,
        NaN and infinity tokens, and the locale of decimals and names."""
        from markerstore.values.formats import ValueFormats

        return ValueFormats(self.date_format, self.timestamp_format, self.timestamp_ntz_format,
                            self.nan_value, self.positive_inf, self.negative_inf, self.locale)


def _distinct(*chars: tuple[str, str]) -> None:
    """Refuse, in one line, two CSV options that name the same character (empty: unset)."""
    names = {config.INGEST_CSV_SEP: "field separator", config.INGEST_CSV_QUOTE: "quote",
             config.INGEST_CSV_ESCAPE: "escape", config.INGEST_CSV_COMMENT: "comment",
             config.INGEST_CSV_LINE_SEP: "line separator"}
    seen: dict[str, str] = {}
    for key, char in chars:
        if char and char in seen:
            raise ConfigError(f"option {key}: the {names[key]} {char!r} is the "
                              f"{names[seen[char]]}; give another")
        seen.setdefault(char, key)


def read_options(settings: Mapping[str, Any] | config.Settings | None) -> ReadOptions:
    """The block reader's options of `settings` (where nothing else of the view is needed)."""
    return IngestOptions.from_settings(settings).read_options()


def value_formats(settings: Mapping[str, Any] | config.Settings | None) -> Any:
    """The ValueFormats of `settings` (where nothing else of the view is needed)."""
    return IngestOptions.from_settings(settings).value_formats()
