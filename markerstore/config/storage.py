"""The storage layer: retries of throttled or timed-out requests."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    int_min,
)

STORAGE_RETRIES = "markerstore.storage.retries"
STORAGE_RETRY_BASE_DELAY_MS = "markerstore.storage.retry.base_delay_ms"

DEFINITIONS: tuple[Option, ...] = (
    Option(STORAGE_RETRIES, 5, int_min(0),
           "Retries of a storage request that failed with throttling (503) or a timeout.",
           ()),
    Option(STORAGE_RETRY_BASE_DELAY_MS, 100, int_min(0),
           "First backoff delay of storage retries; doubles on each retry, with jitter.",
           ()),
)
