"""Storage through fsspec: atomic create-if-absent, retries with backoff, request counts."""

from markerstore.storage.fs import KINDS, Storage, fsync_dir, is_transient

__all__ = ["KINDS", "Storage", "fsync_dir", "is_transient"]
