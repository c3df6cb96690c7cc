"""The `markerstore` command line.

Its names are imported when first used: the console scripts
(:mod:`markerstore.cli.launch`) install their Ctrl-C handler before the command line's
modules load."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markerstore.cli.main import cli, emit, main, parse_storage_options

__all__ = ["cli", "emit", "main", "parse_storage_options"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'markerstore.cli' has no attribute {name!r}")
    module = importlib.import_module("markerstore.cli.main")
    # bound here as an eager import would: `main` is the function, not its module
    globals().update((n, getattr(module, n)) for n in __all__)
    return globals()[name]
