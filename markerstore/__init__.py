"""markerstore: markers and a commit protocol that make PySpark writes to a data lake safe.

The public names are listed in ``__all__``; everything else is internal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markerstore import config
    from markerstore.errors import (
        CommitConflictError,
        ConfigError,
        CorruptErrorFileError,
        CorruptTableError,
        ErrorBudgetExceeded,
        ErrorTableError,
        ForeignCommitError,
        HeartbeatAliveError,
        IcebergPublishError,
        InstantCompletedError,
        InstantNotFoundError,
        InvalidMarkerError,
        MarkerConflictError,
        MarkerServerError,
        MarkerServerUnreachableError,
        MarkerStoreError,
        MarkerTypeError,
        NotAnErrorTableError,
        ReconcileError,
        SchemaError,
        SnapshotError,
        SourceError,
        SqlInterruptedError,
        SqlLimitError,
        SqlRefusedError,
        StorageError,
        TableFormatError,
        TableNotFoundError,
        TimelineError,
        WriteAbortedError,
        WriteConflictError,
    )
    from markerstore.markers import (
        DirectWriteMarkers,
        IOType,
        MarkerName,
        ReconcileResult,
        RollbackResult,
        WriteMarkers,
    )
    from markerstore.server.client import MarkerClient
    from markerstore.table import DataFile, Table
    from markerstore.timeline import InstantInfo

__version__ = "0.1.0"

__all__ = [
    "CommitConflictError", "ConfigError", "CorruptErrorFileError", "CorruptTableError", "DataFile",
    "DirectWriteMarkers", "ErrorBudgetExceeded", "ErrorTableError", "ForeignCommitError",
    "HeartbeatAliveError", "IOType", "IcebergPublishError", "InstantCompletedError", "InstantInfo",
    "InstantNotFoundError", "InvalidMarkerError", "MarkerClient", "MarkerConflictError",
    "MarkerName", "MarkerServerError", "MarkerServerUnreachableError", "MarkerStoreError",
    "MarkerTypeError", "NotAnErrorTableError", "ReconcileError", "ReconcileResult",
    "RollbackResult", "SchemaError", "SnapshotError", "SourceError", "SqlInterruptedError",
    "SqlLimitError", "SqlRefusedError", "StorageError", "Table", "TableFormatError",
    "TableNotFoundError", "TimelineError", "WriteAbortedError", "WriteConflictError",
    "WriteMarkers", "config",
]


# Where each public name lives. They are imported when first used, so that importing the
# package (as the command line does before anything else) costs nothing: the console
# scripts install their Ctrl-C handler before numpy, pyarrow or fsspec load.
_HOMES = {
    **dict.fromkeys(("CommitConflictError", "ConfigError", "CorruptErrorFileError",
                     "CorruptTableError", "ErrorBudgetExceeded", "ErrorTableError",
                     "ForeignCommitError", "HeartbeatAliveError", "IcebergPublishError",
                     "InstantCompletedError", "InstantNotFoundError", "InvalidMarkerError",
                     "MarkerConflictError", "MarkerServerError", "MarkerServerUnreachableError",
                     "MarkerStoreError", "MarkerTypeError", "NotAnErrorTableError",
                     "ReconcileError", "SchemaError", "SnapshotError", "SourceError",
                     "SqlInterruptedError", "SqlLimitError", "SqlRefusedError", "StorageError",
                     "TableFormatError", "TableNotFoundError", "TimelineError", "WriteAbortedError",
                     "WriteConflictError"),
                    "markerstore.errors"),
    **dict.fromkeys(("DirectWriteMarkers", "IOType", "MarkerName", "ReconcileResult",
                     "RollbackResult", "WriteMarkers"), "markerstore.markers"),
    "DataFile": "markerstore.table", "Table": "markerstore.table",
    "InstantInfo": "markerstore.timeline", "MarkerClient": "markerstore.server.client",
}


def __getattr__(name: str) -> Any:
    if name == "config":
        return importlib.import_module("markerstore.config")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'markerstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
