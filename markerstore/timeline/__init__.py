"""Instants, their states, and heartbeats."""

from markerstore.timeline.checks import ROLLED_FORWARD
from markerstore.timeline.heartbeat import Heartbeats, HeartbeatThread
from markerstore.timeline.timeline import (
    COMPLETED,
    INFLIGHT,
    META_DIR,
    REQUESTED,
    ROLLEDBACK,
    STATES,
    InstantInfo,
    Timeline,
    format_instant,
    is_instant,
    parse_instant,
)

__all__ = [
    "COMPLETED", "INFLIGHT", "META_DIR", "REQUESTED", "ROLLEDBACK", "ROLLED_FORWARD", "STATES",
    "Heartbeats", "HeartbeatThread", "InstantInfo", "Timeline",
    "format_instant", "is_instant", "parse_instant",
]
