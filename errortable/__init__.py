"""errortable: failed records in the RFC-20 ErrorRecord schema, committed with the main
commit, queried with SQL.

Importing it registers nothing: its option keys live in markerstore.config, its `errors`
view is passed to markerstore's SQL explicitly (:func:`table_connect`), and recovery of a
main table reaches its error table through the commit protocol's recovery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errortable import config, metrics
    from errortable.capture.parsing import ParseResult, parse_csv_lines, parse_json_lines
    from errortable.capture.records import CaptureContext, RecordBuilder, fingerprint, normalise
    from errortable.capture.validator import Validator
    from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
    from errortable.ops.replays import ReplayResult, replay
    from errortable.ops.retention import ExpireResult, expire
    from errortable.reading.access import (
        connect,
        errors_view,
        query,
        read,
        table_connect,
        table_sql,
    )
    from errortable.reading.reader import CorruptErrorFileWarning
    from errortable.reading.report import ErrorStats, show, stats
    from errortable.schema import arrow_schema, avro_schema
    from errortable.writing.commit import ErrorCommit
    from errortable.writing.hooks import writer_hooks
    from errortable.writing.link import ErrorTables, ErrorWriteLink
    from errortable.writing.recovery import RecoveryResult, recover, rollback_error_instant
    from errortable.writing.taskwriter import ErrorFileStats, ErrorTaskSpec, TaskErrorWriter

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


# Where each public name lives, imported when first used: importing the package costs
# nothing and imports none of its rooms (capture, writing, reading, ops).
_MODULES = ("config", "metrics")
_HOMES = {
    **dict.fromkeys(("ParseResult", "parse_csv_lines", "parse_json_lines"),
                    "errortable.capture.parsing"),
    **dict.fromkeys(("CaptureContext", "RecordBuilder", "fingerprint", "normalise"),
                    "errortable.capture.records"),
    "Validator": "errortable.capture.validator",
    **dict.fromkeys(("ErrorTableConfig", "ErrorTableLocation", "locate"),
                    "errortable.config"),
    **dict.fromkeys(("ReplayResult", "replay"),
                    "errortable.ops.replays"),
    **dict.fromkeys(("ExpireResult", "expire"),
                    "errortable.ops.retention"),
    **dict.fromkeys(("connect", "errors_view", "query", "read", "table_connect", "table_sql"),
                    "errortable.reading.access"),
    "CorruptErrorFileWarning": "errortable.reading.reader",
    **dict.fromkeys(("ErrorStats", "show", "stats"),
                    "errortable.reading.report"),
    **dict.fromkeys(("arrow_schema", "avro_schema"),
                    "errortable.schema"),
    "ErrorCommit": "errortable.writing.commit",
    "writer_hooks": "errortable.writing.hooks",
    **dict.fromkeys(("ErrorTables", "ErrorWriteLink"),
                    "errortable.writing.link"),
    **dict.fromkeys(("RecoveryResult", "recover", "rollback_error_instant"),
                    "errortable.writing.recovery"),
    **dict.fromkeys(("ErrorFileStats", "ErrorTaskSpec", "TaskErrorWriter"),
                    "errortable.writing.taskwriter"),
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"errortable.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'errortable' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
