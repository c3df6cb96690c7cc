"""errortable: failed records in the RFC-20 ErrorRecord schema, committed with the main
commit, queried with SQL."""

from __future__ import annotations

from errortable import config
from errortable.capture import ParseResult, Validator, parse_csv_lines, parse_json_lines
from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
from errortable.records import CaptureContext, RecordBuilder, fingerprint, normalise
from errortable.schema import arrow_schema, avro_schema

__all__ = ["CaptureContext", "ErrorTableConfig", "ErrorTableLocation", "ParseResult",
           "RecordBuilder", "Validator", "arrow_schema", "avro_schema", "config", "fingerprint",
           "locate", "normalise", "parse_csv_lines", "parse_json_lines"]
