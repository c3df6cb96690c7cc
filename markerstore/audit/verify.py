"""A table's fsck across the packages: the commit protocol's check
(:mod:`markerstore.commit.verify`) with what only the error table knows: which error
tables a table has, and which files its expire commits removed."""

from __future__ import annotations

import json
import logging
import socket
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from markerstore.commit.verify import GRACE_DEFAULT, NOTICES, VerifyReport
from markerstore.errors import ConfigError
from markerstore.table import Table
from markerstore.timeline import META_DIR

log = logging.getLogger(__name__)
LAST_VERIFY_FILE = f"{META_DIR}/verify.json"  # the last `markerstore verify`'s summary
_MAX_LAST_VERIFY_BYTES = 1 << 20


def _expired_files(meta: Mapping[str, Any]) -> Iterable[str]:
    """The files an error table's expire commit removed (expected absent)."""
    from errortable.reading.reader import EXPIRE_OPERATION

    if meta.get("operation") != EXPIRE_OPERATION:
        return []
    return [str(p) for info in (meta.get("expired") or {}).values()
            for p in info.get("files", [])]


def verify_all(path: str | Table, storage_options: Mapping[str, Any] | None = None, *,
               repair: bool = False, grace: str | timedelta = GRACE_DEFAULT
               ) -> list[VerifyReport]:
    """Verify the table at `path` and every error table it has (or, if `path` is an error
    table, that one): one report each."""
    from markerstore.commit.verify import verify

    table = path if isinstance(path, Table) else Table(path, storage_options)
    if not table.storage.exists(table.storage.path(META_DIR)):
        raise ConfigError(f"{table.storage.url()} is not a markerstore table (it has no "
                          f"{META_DIR} folder)")
    from errortable.reading.reader import error_tables_of, is_error_table

    if is_error_table(table):
        return [verify(table, repair=repair, grace=grace, absent=_expired_files)]
    reports = [verify(table, repair=repair, grace=grace)]
    for url in error_tables_of(table):
        error_table = Table(url, table.storage.storage_options)
        if is_error_table(error_table):
            reports.append(verify(error_table, repair=repair, grace=grace,
                                  absent=_expired_files))
    return reports


def record_last_verify(table: Table, reports: list[VerifyReport], *, repair: bool,
                       grace: timedelta) -> bool:
    """Keep a summary of this verify in the table (``.markerstore/verify.json``, replaced
    each time) for ``markerstore report``. Best effort: a table this process may only read
    keeps its last record, and False is returned."""
    findings = [f for r in reports for f in r.findings]
    kinds: Counter[str] = Counter()
    for report in reports:
        kinds.update(report.counts())
    summary = {
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "repair": repair,
        "grace_s": int(grace.total_seconds()),
        "consistent": all(r.consistent for r in reports),
        "findings": sum(f.kind not in NOTICES for f in findings), "by_kind": dict(kinds),
        "tables": [r.table for r in reports],
        "files_listed": sum(r.files_listed for r in reports),
    }
    try:
        table.storage.put(table.storage.path(LAST_VERIFY_FILE),
                          json.dumps(summary, indent=1, sort_keys=True).encode())
    except Exception as exc:  # read-only credentials, a read-only mount: not verify's failure
        log.info("%s: the verify summary was not recorded (%s)", table, exc)
        return False
    return True


def last_verify(table: Table) -> dict[str, Any] | None:
    """The summary :func:`record_last_verify` kept, None if there is none; a summary that
    cannot be read is ``{"unreadable": reason}`` (it is a report, not the table's state)."""
    path = table.storage.path(LAST_VERIFY_FILE)
    try:
        with table.storage.open_read(path) as handle:
            raw = handle.read(_MAX_LAST_VERIFY_BYTES + 1)
    except FileNotFoundError:
        return None
    except Exception as exc:
        return {"unreadable": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        summary = json.loads(raw) if len(raw) <= _MAX_LAST_VERIFY_BYTES else None
    except (ValueError, RecursionError):
        summary = None
    fields = {"at": str, "consistent": bool, "findings": int, "repair": bool}
    if not isinstance(summary, dict) or any(
            not isinstance(summary.get(k), t) for k, t in fields.items()):
        return {"unreadable": f"{LAST_VERIFY_FILE} is not a verify summary"}
    return summary
