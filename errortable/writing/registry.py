"""What this process remembers about the error tables it writes (filled by its writes,
never at import): the storage options each table was opened with, and the error
instants open here (rolling one back through its own Table object also stops the
instant's heartbeat thread)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markerstore.table import Table

# Storage options per table URL, remembered in this process so recovery can open
# an error table with the options its writer used.
_STORAGE_OPTIONS: dict[str, dict[str, Any]] = {}


# Error tables with an error instant open in this process, by (url, instant): rolling one
# back through this Table object also stops the instant's heartbeat thread.
_OPEN: dict[tuple[str, str], Table] = {}


def open_table_for(url: str, instant: str) -> Table | None:
    """The Table this process opened error instant `instant` of `url` with, if any."""
    return _OPEN.get((url.rstrip("/"), instant))


def remember_open(url: str, instant: str, table: Table) -> None:
    """Error instant `instant` of `url` was opened here through `table`."""
    _OPEN[(url.rstrip("/"), instant)] = table


def forget_open(url: str, instant: str) -> None:
    _OPEN.pop((url.rstrip("/"), instant), None)


def remember_storage_options(url: str, options: Mapping[str, Any] | None) -> None:
    _STORAGE_OPTIONS[url.rstrip("/")] = dict(options or {})


def storage_options_for(url: str, fallback: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options this process used for `url`, else `fallback`."""
    known = _STORAGE_OPTIONS.get(url.rstrip("/"))
    if known is not None:
        return dict(known)
    return dict(fallback or {})
