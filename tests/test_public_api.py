"""The curated public names resolve (including the lazily imported MarkerClient)."""

from __future__ import annotations

import errortable
import markerstore
import markerstore.formats


def test_every_public_name_resolves() -> None:
    for module in (markerstore, errortable, markerstore.formats):
        missing = [name for name in module.__all__ if getattr(module, name, None) is None]
        assert missing == [], f"{module.__name__}: {missing}"
    assert issubclass(markerstore.WriteAbortedError, markerstore.MarkerStoreError)
    assert markerstore.MarkerClient.__module__ == "markerstore.server.client"


def test_every_package_is_in_the_distribution() -> None:
    """A real (not editable) install ships only the packages pyproject.toml lists."""
    from pathlib import Path

    import tomllib

    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(init.parent.relative_to(root).parts)
             for top in ("markerstore", "errortable")
             for init in (root / top).rglob("__init__.py")}
    assert found - listed == set()


# Exceptions that never leave the module that raises them: each is a signal its own caller
# catches (a retry, a deferral, Ctrl-C), never an error a user meets.
SIGNALS = {"markerstore.server.writer.ServiceError", "markerstore.markers.segments.SegmentsChanged",
           "markerstore.formats.base.PublishDeferred", "markerstore.storage.local.TooDeepError",
           "markerstore.cli.main._Interrupted"}


def test_every_error_is_in_the_tree_of_markerstore_error() -> None:
    """Each exception class the project defines is a MarkerStoreError (so one `except`
    catches what markerstore raises), but for the internal signals above (warnings are
    not errors)."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    outside = []
    for top in ("markerstore", "errortable"):
        for path in sorted((root / top).rglob("*.py")):
            classes = [node.name for node in ast.walk(ast.parse(path.read_text()))
                       if isinstance(node, ast.ClassDef)]
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            module = ".".join(parts)
            for name in classes:
                found = getattr(importlib.import_module(module), name, None)
                if (isinstance(found, type) and issubclass(found, BaseException)
                        and not issubclass(found, Warning)
                        and found.__module__ == module
                        and not issubclass(found, markerstore.MarkerStoreError)
                        and f"{module}.{name}" not in SIGNALS):
                    outside.append(f"{module}.{name}")
    assert outside == []
