"""Markers: names, the WriteMarkers interface, direct markers, reconcile and rollback."""

from markerstore.markers.base import (
    BATCHED,
    DIRECT,
    MARKER_COLUMNS,
    MARKER_TYPE_FILE,
    MARKERS_DIR,
    IOType,
    MarkerName,
    WriteMarkers,
    ensure_marker_type,
    marker_folder,
    read_marker_type,
)
from markerstore.markers.direct import DirectWriteMarkers
from markerstore.markers.reconcile import (
    ReconcileResult,
    RollbackResult,
    clean_markers_of,
    read_marker_rows,
    read_markers,
    reconcile,
    rollback_from_markers,
)

__all__ = [
    "BATCHED", "DIRECT", "MARKER_COLUMNS", "MARKER_TYPE_FILE", "MARKERS_DIR",
    "DirectWriteMarkers", "IOType", "MarkerName", "ReconcileResult", "RollbackResult",
    "WriteMarkers", "clean_markers_of", "ensure_marker_type", "marker_folder",
    "read_marker_type",
    "read_marker_rows", "read_markers", "reconcile", "rollback_from_markers",
]
