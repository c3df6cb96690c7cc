"""errortable: failed records in the RFC-20 ErrorRecord schema, committed with the main
commit, queried with SQL.

Importing it registers nothing: its option keys live in markerstore.config, its `errors`
view is passed to markerstore's SQL explicitly (:func:`table_connect`), and recovery of a
main table reaches its error table through the commit protocol's recovery.
"""

from __future__ import annotations

from errortable import config, metrics
from errortable.access import connect, errors_view, query, read, table_connect, table_sql
from errortable.capture import Validator
from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
from errortable.hooks import writer_hooks
from errortable.link import ErrorTables, ErrorWriteLink
from errortable.parsing import ParseResult, parse_csv_lines, parse_json_lines
from errortable.reader import CorruptErrorFileWarning
from errortable.records import CaptureContext, RecordBuilder, fingerprint, normalise
from errortable.recovery import RecoveryResult, recover, rollback_error_instant
from errortable.replays import ReplayResult, replay
from errortable.report import ErrorStats, show, stats
from errortable.retention import ExpireResult, expire
from errortable.schema import arrow_schema, avro_schema
from errortable.taskwriter import ErrorFileStats, ErrorTaskSpec, TaskErrorWriter
from errortable.writer import ErrorCommit

__all__ = [
    "CaptureContext", "CorruptErrorFileWarning", "ErrorCommit", "ErrorFileStats", "ErrorStats",
    "ErrorTableConfig", "ErrorTableLocation", "ErrorTables", "ErrorTaskSpec", "ErrorWriteLink",
    "ExpireResult", "ParseResult",
    "RecordBuilder", "RecoveryResult", "ReplayResult", "TaskErrorWriter", "Validator",
    "arrow_schema", "avro_schema", "config", "connect", "errors_view", "expire", "fingerprint",
    "locate", "writer_hooks",
    "metrics", "normalise", "parse_csv_lines", "parse_json_lines", "query", "read", "recover",
    "replay", "rollback_error_instant", "show", "stats", "table_connect", "table_sql",
]
