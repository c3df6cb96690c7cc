"""Storage through fsspec: atomic create-if-absent, retries with backoff, request counts,
and one containment rule for every path it touches (:mod:`.contain`)."""

from markerstore.storage.fs import KINDS, Storage, is_transient
from markerstore.storage.local import fsync_dir

__all__ = ["KINDS", "Storage", "fsync_dir", "is_transient"]
