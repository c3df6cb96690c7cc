"""errortable: failed records in the RFC-20 ErrorRecord schema, committed with the main
commit, queried with SQL.

Importing this package registers its options in markerstore.config, the `errors` view in
markerstore's SQL, and the rollback hook that rolls back an error instant with its main
instant. The Spark writer imports it whenever the error table is enabled (and any process
that may roll back a table with an error table should import it too).
"""

from __future__ import annotations

from errortable import config, metrics
from errortable.capture import Validator
from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
from errortable.hooks import writer_hooks
from errortable.parsing import ParseResult, parse_csv_lines, parse_json_lines
from errortable.reader import CorruptErrorFileWarning, connect, query, read
from errortable.records import CaptureContext, RecordBuilder, fingerprint, normalise
from errortable.recovery import RecoveryResult, recover, rollback_error_instant
from errortable.replays import ReplayResult, replay
from errortable.report import ErrorStats, show, stats
from errortable.retention import ExpireResult, expire
from errortable.schema import arrow_schema, avro_schema
from errortable.writer import ErrorCommit, ErrorFileStats, ErrorTaskSpec, TaskErrorWriter
from markerstore.sql import register_view


def _register() -> None:
    from errortable.reader import _view_provider

    register_view("errors", _view_provider)


_register()

__all__ = [
    "CaptureContext", "CorruptErrorFileWarning", "ErrorCommit", "ErrorFileStats", "ErrorStats",
    "ErrorTableConfig", "ErrorTableLocation", "ErrorTaskSpec", "ExpireResult", "ParseResult",
    "RecordBuilder", "RecoveryResult", "ReplayResult", "TaskErrorWriter", "Validator",
    "arrow_schema", "avro_schema", "config", "connect", "expire", "fingerprint",
    "locate", "writer_hooks",
    "metrics", "normalise", "parse_csv_lines", "parse_json_lines", "query", "read", "recover",
    "replay", "rollback_error_instant", "show", "stats",
]
