"""Storage through fsspec: atomic create-if-absent, retries with backoff, request counts."""

from markerstore.storage.fs import KINDS, Storage, is_transient

__all__ = ["KINDS", "Storage", "is_transient"]
