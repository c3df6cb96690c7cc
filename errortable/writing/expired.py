"""What an error table's expire commit removed, read from its metadata alone (the table
formats publish those files as removed; verify expects them absent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXPIRE_OPERATION = "expire"


def expired_paths(meta: Mapping[str, Any]) -> list[str]:
    """The files an expire commit removed (none for another commit)."""
    if meta.get("operation") != EXPIRE_OPERATION:
        return []
    return [str(p) for info in (meta.get("expired") or {}).values()
            if isinstance(info, dict) for p in info.get("files", [])]
