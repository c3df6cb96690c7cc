"""What the marker server and its client agree on, defined once: the route prefix and the
environment variable that holds the bearer token (read by the server, the client and
``markerstore serve``; declared in :mod:`markerstore.config`). Imports nothing of the
server side, so the client does not load it."""

from __future__ import annotations

from markerstore.config import SERVER_TOKEN_ENV as TOKEN_ENV

__all__ = ["API", "TOKEN_ENV"]

API = "/v1/markers"
