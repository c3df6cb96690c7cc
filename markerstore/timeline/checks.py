"""Schemas of the timeline's files, checked whenever one is read.

The timeline's files are untrusted (anyone who can write the table's folder can write
them), and what they say decides what recovery deletes. So a completed instant's metadata
is a JSON object with ``state: "completed"``, its own ``instant`` and a ``files`` list of
``{path, size?, rows?, checksum?}`` with valid table-relative paths and non-negative
integers; ``{}``, ``[]`` or ``{"files": "x"}`` is never a completed commit but a
:class:`~markerstore.errors.CorruptTableError` naming the file.
"""

from __future__ import annotations

import math
from typing import Any

from markerstore.errors import CorruptTableError
from markerstore.paths import path_problem

MAX_INT = 2 ** 63 - 1
COMPLETED_STATE = "completed"
TOMBSTONE_STATE = "rolledback"
# A completed commit's "recovered": how a recovery completed it, when one did.
ROLLED_FORWARD = "roll_forward"


def check_count(value: Any, name: str, where: str, *, optional: bool = True) -> None:
    """An integer from 0 to 2^63-1 (or None when `optional`)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise CorruptTableError(where, f"{name} must be an integer from 0 to 2^63-1, got "
                                       f"{value!r:.80}")


def check_str(value: Any, name: str, where: str, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise CorruptTableError(where, f"{name} must be a string, got {value!r:.80}")


def check_path(value: Any, name: str, where: str) -> str:
    problem = path_problem(value)
    if problem is not None:
        raise CorruptTableError(where, f"{name} {value!r:.200} {problem}")
    return str(value)


def check_list(value: Any, name: str, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise CorruptTableError(where, f"{name} must be a list, got {type(value).__name__}")
    return value


def check_file_entries(value: Any, name: str, where: str) -> None:
    """A list of ``{path, size?, rows?, checksum?}``."""
    for i, entry in enumerate(check_list(value, name, where)):
        if not isinstance(entry, dict):
            raise CorruptTableError(where, f"{name}[{i}] must be an object with a 'path', got "
                                           f"{entry!r:.80}")
        check_path(entry.get("path"), f"{name}[{i}].path", where)
        check_count(entry.get("size"), f"{name}[{i}].size", where)
        check_count(entry.get("rows"), f"{name}[{i}].rows", where)
        check_str(entry.get("checksum"), f"{name}[{i}].checksum", where)


def check_counts(value: Any, name: str, where: str) -> None:
    """An object of counts (each an integer or null), or null."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise CorruptTableError(where, f"{name} must be an object, got {type(value).__name__}")
    for key, count in value.items():
        check_count(count, f"{name}.{key}", where)


def check_commit(payload: Any, instant: str, where: str) -> dict[str, Any]:
    """The content of ``<instant>.commit``: a completed commit's metadata, or the
    tombstone a rollback fenced the instant with."""
    if not isinstance(payload, dict):
        raise CorruptTableError(where, f"the commit metadata must be a JSON object, got "
                                       f"{type(payload).__name__}")
    state = payload.get("state")
    if state == TOMBSTONE_STATE:
        return payload
    if state != COMPLETED_STATE:
        raise CorruptTableError(where, f"'state' must be {COMPLETED_STATE!r} (or the "
                                       f"rollback tombstone {TOMBSTONE_STATE!r}), got "
                                       f"{state!r:.80}")
    if payload.get("instant") != instant:
        raise CorruptTableError(where, f"'instant' must be {instant}, got "
                                       f"{payload.get('instant')!r:.80}")
    check_file_entries(payload.setdefault("files", []), "files", where)
    for i, path in enumerate(check_list(payload.get("replaced_files", []), "replaced_files",
                                        where)):
        check_path(path, f"replaced_files[{i}]", where)
    if "error_files" in payload:
        check_file_entries(payload["error_files"], "error_files", where)
    for i, name in enumerate(check_list(payload.get("checks", []), "checks", where)):
        check_str(name, f"checks[{i}]", where, optional=False)
    for key in ("operation", "write_uuid", "error_table", "error_instant", "recovered"):
        check_str(payload.get(key), key, where)
    check_counts(payload.get("counts"), "counts", where)
    check_counts(payload.get("error_records"), "error_records", where)
    for key in ("source_records", "source_lines"):
        check_count(payload.get(key), key, where)
    timestamp = payload.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool)
                                  or not isinstance(timestamp, (int, float))
                                  or not math.isfinite(timestamp)
                                  or not 0 <= timestamp <= MAX_INT):
        raise CorruptTableError(where, f"'timestamp' must be milliseconds since 1970, got "
                                       f"{timestamp!r:.80}")
    return payload


def check_rollback_record(payload: Any, where: str) -> dict[str, Any]:
    """The content of ``<instant>.rollback``: what a rollback deleted."""
    if not isinstance(payload, dict):
        raise CorruptTableError(where, f"the rollback record must be a JSON object, got "
                                       f"{type(payload).__name__}")
    for key in ("deleted_files", "kept_append_files"):
        for i, path in enumerate(check_list(payload.get(key, []), key, where)):
            check_path(path, f"{key}[{i}]", where)
    for key in ("deleted_count", "kept_count"):
        check_count(payload.get(key), key, where)
    return payload


def check_heartbeat(payload: Any, where: str) -> dict[str, Any]:
    """The content of a heartbeat: ``{ts_ms, host?, pid?, boot_id?, pid_ns?, pid_start?}``."""
    if not isinstance(payload, dict):
        raise CorruptTableError(where, "a heartbeat must be a JSON object")
    check_count(payload.get("ts_ms"), "ts_ms", where, optional=False)
    check_str(payload.get("host"), "host", where)
    check_str(payload.get("boot_id"), "boot_id", where)
    check_count(payload.get("pid_ns"), "pid_ns", where)
    check_count(payload.get("pid_start"), "pid_start", where)
    pid = payload.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)
                            or not 0 < pid < 2 ** 31):
        raise CorruptTableError(where, f"pid must be a positive process id, got {pid!r:.80}")
    return payload
