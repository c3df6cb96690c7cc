"""The curated public names resolve (including the lazily imported MarkerClient)."""

from __future__ import annotations

import errortable
import markerstore


def test_every_public_name_resolves() -> None:
    for module in (markerstore, errortable):
        missing = [name for name in module.__all__ if getattr(module, name, None) is None]
        assert missing == [], f"{module.__name__}: {missing}"
    assert issubclass(markerstore.WriteAbortedError, markerstore.MarkerStoreError)
    assert markerstore.MarkerClient.__module__ == "markerstore.server.client"
