"""The error of a record of the wrong shape, whichever text it was read from (JSON, CSV):
its text is safe to keep where a record's values are not (a PII policy)."""

from __future__ import annotations

from markerstore.errors import MarkerStoreError


class ShapeError(MarkerStoreError, ValueError):
    """A record of the wrong shape (not an object, the wrong number of fields): its text
    names counts and types, never a value, so it is kept under a PII policy. Where the
    text names a part of the record (a key), `safe` is the text without it."""

    def __init__(self, text: str, safe: str | None = None) -> None:
        super().__init__(text)
        self.safe = text if safe is None else safe
