"""markerstore: markers and a commit protocol that make PySpark writes to a data lake safe.

The public names are listed in ``__all__``; everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from markerstore import config
from markerstore.errors import (
    CommitConflictError,
    ConfigError,
    CorruptTableError,
    ErrorBudgetExceeded,
    HeartbeatAliveError,
    InstantCompletedError,
    InstantNotFoundError,
    InvalidMarkerError,
    MarkerServerError,
    MarkerStoreError,
    MarkerTypeError,
    ReconcileError,
    StorageError,
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
from markerstore.table import DataFile, Table
from markerstore.timeline import InstantInfo

if TYPE_CHECKING:
    from markerstore.server.client import MarkerClient

__version__ = "0.1.0"

__all__ = [
    "CommitConflictError", "ConfigError", "CorruptTableError", "DataFile", "DirectWriteMarkers",
    "ErrorBudgetExceeded",
    "HeartbeatAliveError", "IOType", "InstantCompletedError", "InstantInfo",
    "InstantNotFoundError", "InvalidMarkerError", "MarkerClient", "MarkerName",
    "MarkerServerError", "MarkerStoreError", "MarkerTypeError", "ReconcileError",
    "ReconcileResult", "RollbackResult", "StorageError", "Table", "TimelineError",
    "WriteAbortedError", "WriteConflictError", "WriteMarkers", "config",
]


def __getattr__(name: str) -> Any:
    # MarkerClient pulls in the HTTP client; import it only when asked for.
    if name == "MarkerClient":
        from markerstore.server.client import MarkerClient

        return MarkerClient
    raise AttributeError(f"module 'markerstore' has no attribute {name!r}")
