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
