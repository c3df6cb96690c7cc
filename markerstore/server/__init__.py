"""The marker server (batched markers) and its client.

``MarkerServer`` (aiohttp) is imported only when asked for, so that executors, which only
need ``MarkerClient``, do not load the server side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markerstore.server.app import MarkerServer
    from markerstore.server.client import MarkerClient, open_markers

__all__ = ["MarkerClient", "MarkerServer", "open_markers"]


def __getattr__(name: str) -> Any:
    if name == "MarkerServer":
        from markerstore.server.app import MarkerServer

        return MarkerServer
    if name == "MarkerClient":
        from markerstore.server.client import MarkerClient

        return MarkerClient
    if name == "open_markers":
        from markerstore.server.client import open_markers

        return open_markers
    raise AttributeError(f"module 'markerstore.server' has no attribute {name!r}")
