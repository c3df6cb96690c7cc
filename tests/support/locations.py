"""Where a test's table lives (the `location` and Spark `where` fixtures hand these out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Location:
    """Where a test's table lives: a URL and the storage options to reach it."""

    kind: str
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def child(self, name: str) -> Location:
        return Location(self.kind, f"{self.url.rstrip('/')}/{name}", self.storage_options)
