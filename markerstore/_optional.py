"""Import a module that may not be part of this installation."""

from __future__ import annotations

import importlib
from types import ModuleType


def import_optional(name: str) -> ModuleType | None:
    """The module, or None when that very module is absent (a missing dependency of a
    module that is present still raises)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise
