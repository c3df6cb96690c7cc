"""The marker server in the driver and its client in the tasks."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    int_min,
    optional_str,
)

# The marker server's bearer token (an environment variable, read by the server, its client
# and `markerstore serve`): the environment or a file keep it out of `ps`, where `--token`
# shows it.
SERVER_TOKEN_ENV = "MARKERSTORE_SERVER_TOKEN"

SERVER_MAX_BODY_BYTES = "markerstore.markers.server.max_body_bytes"
SERVER_INSTANT_CHECK_MS = "markerstore.markers.server.instant_check_ms"
CLIENT_TIMEOUT_MS = "markerstore.markers.client.timeout_ms"
CLIENT_RETRIES = "markerstore.markers.client.retries"
CLIENT_CONNECT_TIMEOUT_MS = "markerstore.markers.client.connect_timeout_ms"
SERVER_HOST = "markerstore.markers.server.host"
SERVER_HEADER_TIMEOUT_MS = "markerstore.markers.server.header_timeout_ms"

DEFINITIONS: tuple[Option, ...] = (
    Option(SERVER_MAX_BODY_BYTES, 1024 * 1024, int_min(1024),
           "Marker server: largest request body accepted; larger ones get 413.",
           ()),
    Option(SERVER_INSTANT_CHECK_MS, 2000, int_min(0),
           "Marker server: how stale its view of the timeline may get before a flush re-reads "
           "it (refuses markers of instants no longer inflight; feeds early conflict "
           "detection). 0 checks only when a marker folder is first loaded.",
           ()),
    Option(SERVER_HEADER_TIMEOUT_MS, 15000, int_min(100),
           "Marker server: time a client has to send a request's headers (counted from the "
           "connection's opening or its last answer; also how long an idle connection is "
           "kept) and its body; slower connections are closed.",
           ()),
    Option(CLIENT_TIMEOUT_MS, 30000, int_min(1),
           "Marker client: timeout of one request to the marker server.",
           ()),
    Option(CLIENT_RETRIES, 3, int_min(0),
           "Marker client: retries of a request that could not reach the server or got 503.",
           ()),
    Option(CLIENT_CONNECT_TIMEOUT_MS, 10000, int_min(1),
           "Marker client: how long a task keeps trying to connect to the marker server, "
           "all tries together, before it fails naming the address (the write then fails "
           "and is rolled back once Spark gives up the task).",
           ()),
    Option(SERVER_HOST, None, optional_str,
           "Batched markers in a Spark write: the host executors reach the driver's marker "
           "server at (default: spark.driver.host). The server binds "
           "spark.driver.bindAddress, or else spark.driver.host, as Spark's driver does.",
           ()),
)
