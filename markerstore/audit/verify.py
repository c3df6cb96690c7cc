"""A table's fsck across the packages: the commit protocol's check
(:mod:`markerstore.commit.verify`) with what only the error table knows: which error
tables a table has, and which files its expire commits removed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from markerstore.commit.verify import GRACE_DEFAULT, VerifyReport
from markerstore.errors import ConfigError
from markerstore.table import Table
from markerstore.timeline import META_DIR


def _expired_files(meta: Mapping[str, Any]) -> Iterable[str]:
    """The files an error table's expire commit removed (expected absent)."""
    from errortable.reader import EXPIRE_OPERATION

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
    from errortable.reader import error_tables_of, is_error_table

    if is_error_table(table):
        return [verify(table, repair=repair, grace=grace, absent=_expired_files)]
    reports = [verify(table, repair=repair, grace=grace)]
    for url in error_tables_of(table):
        error_table = Table(url, table.storage.storage_options)
        if is_error_table(error_table):
            reports.append(verify(error_table, repair=repair, grace=grace,
                                  absent=_expired_files))
    return reports
