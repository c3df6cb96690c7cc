"""What the marker server checks at the door, before a request is queued or answered.

Every field of a create is checked when the request arrives, against what the segment
writer needs (``schemas/marker_segment.avsc``: strings that encode as UTF-8, a ``size``
that fits a long) and what the readers of the rows need (a partition and a file name that
stay inside the table, a ``pending_upload`` that rollback can parse). So a create that is
accepted can always be written, and a bad one is refused with ``400`` and a one-line
message naming the field: it never reaches a batch that other clients share.

Partition and file names go through the same functions as direct markers'
(:func:`markerstore.markers.base.validate_partition` and ``validate_file_name``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from markerstore.errors import InvalidMarkerError
from markerstore.markers.base import MarkerName
from markerstore.markers.segments import marker_row, now_ms
from markerstore.paths import CONTROL
from markerstore.server.writer import ServiceError

MAX_MARKERS_PER_REQUEST = 10_000
MAX_NAME_BYTES = 1024  # a whole marker name, and each of partition and file
MAX_FIELD_CHARS = 256  # task_attempt, checksum
MAX_UPLOAD_FIELD_CHARS = 1024  # bucket, key, upload_id and each ETag of a pending upload
MAX_UPLOAD_PARTS = 10_000  # S3's limit on the parts of one multipart upload
MAX_REQUEST_ID_CHARS = 128
INT64_MAX = 2**63 - 1
FIELDS = frozenset({"partition", "file", "io_type", "task_attempt", "size", "checksum",
                    "pending_upload"})
UPLOAD_FIELDS = ("bucket", "key", "upload_id", "parts", "size")


def _show(value: Any, limit: int = 40) -> str:
    """A short, one-line repr of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(body: bytes) -> Any:
    """A request body as JSON: strict UTF-8, no NaN or Infinity; 400 ``bad_json`` for
    anything else, including nesting too deep for the parser."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServiceError(
            HTTPStatus.BAD_REQUEST, "bad_json", f"the body is not UTF-8: {exc.reason} at byte "
            f"{exc.start}") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ServiceError(
            HTTPStatus.BAD_REQUEST, "bad_json", "the body is nested too deeply") from None
    except ValueError as exc:
        message = str(exc).splitlines()[0][:200]
        raise ServiceError(
            HTTPStatus.BAD_REQUEST, "bad_json", f"the body is not JSON: {message}") from None


def text(value: Any, field: str, limit: int, *, control: bool = False) -> str:
    """A string field: a str of at most `limit` characters that encodes as UTF-8 (no lone
    surrogate), and without control characters unless `control`."""
    if not isinstance(value, str):
        raise InvalidMarkerError(f"{field} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise InvalidMarkerError(f"{field} is longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMarkerError(f"{field} is not valid UTF-8 text ({exc.reason} at "
                                 f"character {exc.start})") from None
    if not control and CONTROL.search(value):
        raise InvalidMarkerError(f"{field} {_show(value)} contains a control character")
    return value


def integer(value: Any, field: str, low: int = 0, high: int = INT64_MAX) -> int:
    """An integer field (a JSON integer, not a bool or a float) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMarkerError(f"{field} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidMarkerError(f"{field} must be between {low} and {high}, got "
                                 f"{_show(value)}")
    return value


def pending_upload(value: Any) -> str:
    """The pending multipart upload of a marker as canonical JSON text: an object (or its
    JSON text) with exactly what rollback reads to abort it (``bucket``, ``key``,
    ``upload_id``, ``parts`` as ``[[number, etag], ...]``, ``size``)."""
    field = "pending_upload"
    if isinstance(value, str):
        text(value, field, 16 * 1024 * 1024)
        try:
            value = json.loads(value, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise InvalidMarkerError(f"{field} is a string that is not JSON text; send the "
                                     "upload as a JSON object") from None
    if not isinstance(value, dict):
        raise InvalidMarkerError(f"{field} must be a JSON object (or its JSON text), got "
                                 f"{type(value).__name__}")
    unknown = set(value) - set(UPLOAD_FIELDS)
    missing = [k for k in UPLOAD_FIELDS if k not in value]
    if unknown or missing:
        raise InvalidMarkerError(f"{field} must have exactly the fields "
                                 f"{', '.join(UPLOAD_FIELDS)} (unknown: "
                                 f"{_show(sorted(unknown))}, missing: {missing})")
    for key in ("bucket", "key", "upload_id"):
        if not text(value[key], f"{field}.{key}", MAX_UPLOAD_FIELD_CHARS):
            raise InvalidMarkerError(f"{field}.{key} is empty")
    parts = value["parts"]
    if not isinstance(parts, list) or len(parts) > MAX_UPLOAD_PARTS:
        raise InvalidMarkerError(f"{field}.parts must be a list of at most "
                                 f"{MAX_UPLOAD_PARTS} [number, etag] pairs")
    for part in parts:
        if not isinstance(part, list) or len(part) != 2:
            raise InvalidMarkerError(f"{field}.parts holds {_show(part)}, not a [number, "
                                     "etag] pair")
        integer(part[0], f"{field}.parts number", 1, MAX_UPLOAD_PARTS)
        text(part[1], f"{field}.parts etag", MAX_UPLOAD_FIELD_CHARS)
    integer(value["size"], f"{field}.size")
    return json.dumps(value, sort_keys=True)


def marker(partition: Any, file_name: Any, io_type: Any) -> MarkerName:
    """A marker from its three name fields, each checked as text first (so a lone
    surrogate or a huge value is a one-line 400, never an error further on)."""
    partition = text(partition, "partition", MAX_NAME_BYTES)
    file_name = text(file_name, "file", MAX_NAME_BYTES)
    io_type = text(io_type, "io_type", 16)
    built = MarkerName.build(partition, file_name, io_type)
    if len(built.name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidMarkerError(f"marker name longer than {MAX_NAME_BYTES} bytes")
    return built


def parse_marker(obj: Any) -> tuple[MarkerName, dict[str, Any]]:
    """A create request's marker and its segment row; InvalidMarkerError on bad input.
    Every column of the row is checked here, so the row can be encoded (see
    :func:`check_row`)."""
    if not isinstance(obj, dict):
        raise InvalidMarkerError(f"a marker is a JSON object, got {type(obj).__name__}")
    unknown = set(obj) - FIELDS
    if unknown:
        raise InvalidMarkerError(f"unknown field(s) {_show(sorted(unknown), 80)}; a marker "
                                 f"has {sorted(FIELDS)}")
    if "file" not in obj:
        raise InvalidMarkerError("a marker needs a 'file'")
    built = marker(obj.get("partition", ""), obj["file"], obj.get("io_type", "CREATE"))
    details: dict[str, Any] = {}
    if obj.get("size") is not None:
        details["size"] = integer(obj["size"], "size")
    for key in ("task_attempt", "checksum"):
        if obj.get(key) is not None:
            details[key] = text(obj[key], key, MAX_FIELD_CHARS)
    if obj.get("pending_upload") is not None:
        details["pending_upload"] = pending_upload(obj["pending_upload"])
    row = marker_row(built, details, now_ms())
    check_row(row)
    return built, row


def check_row(row: Mapping[str, Any]) -> None:
    """Assert that a segment row has the types the encoders take: every string column a
    str that encodes as UTF-8, ``size`` null or an int64, ``created_at`` an int64."""
    for key in ("partition", "file", "io_type", "task_attempt", "checksum", "pending_upload"):
        value = row[key]
        if value is None and key not in ("partition", "file", "io_type"):
            continue
        text(value, key, 16 * 1024 * 1024, control=True)
    for key in ("size", "created_at"):
        if row[key] is not None or key == "created_at":
            integer(row[key], key)


def markers_of(body: Any) -> tuple[list[Any], bool]:
    """The raw markers of a create body and whether it was the batch form."""
    if isinstance(body, dict) and "markers" in body:
        if set(body) != {"markers"}:
            raise ServiceError(
                HTTPStatus.BAD_REQUEST, "bad_request", "a batch body has only 'markers'; got "
                f"also {_show(sorted(set(body) - {'markers'}), 80)}")
        raw = body["markers"]
        if not isinstance(raw, list) or not raw:
            raise ServiceError(
                HTTPStatus.BAD_REQUEST, "bad_request", "'markers' must be a non-empty list")
        if len(raw) > MAX_MARKERS_PER_REQUEST:
            raise ServiceError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_many_markers",
                               f"at most {MAX_MARKERS_PER_REQUEST} markers per request")
        return raw, True
    return [body], False


def request_id(value: str | None) -> str | None:
    """The X-Request-Id header: at most 128 printable characters."""
    if value is None:
        return None
    if len(value) > MAX_REQUEST_ID_CHARS:
        raise ServiceError(HTTPStatus.BAD_REQUEST, "bad_request", "X-Request-Id is too long")
    try:
        text(value, "X-Request-Id", MAX_REQUEST_ID_CHARS)
    except InvalidMarkerError as exc:
        raise ServiceError(HTTPStatus.BAD_REQUEST, "bad_request", str(exc)) from None
    return value
