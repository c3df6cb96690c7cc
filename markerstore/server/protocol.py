"""What the marker server and its client agree on, defined once: the route prefix and the
environment variable that holds the bearer token (read by the server, the client and
``markerstore serve``). Imports nothing, so the client does not load the server side."""

from __future__ import annotations

API = "/v1/markers"
TOKEN_ENV = "MARKERSTORE_SERVER_TOKEN"
