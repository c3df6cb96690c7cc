"""Building ErrorRecord rows: payload as JSON, capped messages, context, fingerprints, PII.

Everything a user needs to investigate a bad record fits in the RFC-20 schema: `record`
(the original record as JSON: an object, or a JSON string holding a raw line that did not
parse), `schema` (the source schema), `message` (exception class and message, then the
innermost frames of the stack trace up to a cap) and `context` (string map; the keys are
the constants below). The fingerprint groups repeated failures: it hashes the reason with
the check name or columns, or with the exception class and its message normalised
(numbers, uuids and quoted values replaced), so "bad value 'x' in row 17" and "bad value
'y' in row 90" group together.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import hashlib
import json
import os
import re
import time
import traceback
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from errortable.capture.pii import (
    REDACTED,
    WITHHELD,
    frames_only,
    key_name,
    names_field,
    redact,
    safe_exception_text,
    secrets_of,
    sweep,
    sweep_value,
)
from errortable.config import ErrorTableConfig
from markerstore.config import REASON_KEY

# --- context keys (RFC-20 names first) ---------------------------------------------------
COMMIT_TIME = "commitTime"
TABLE_NAME = "tableName"
PARTITION_PATH = "partitionPath"
RECORD_KEY = "recordKey"
RECORD_KEY_FIELD = "recordKeyField"
TABLE_PATH = "tablePath"
REASON = REASON_KEY
CHECK = "check"
FAILED_CHECKS = "failedChecks"
COLUMN = "column"
ERROR_CLASS = "errorClass"
FINGERPRINT = "fingerprint"
SOURCE_FILE = "sourceFile"
SOURCE_LINE = "sourceLine"
SOURCE_OFFSET = "sourceOffset"
TASK_ATTEMPT = "taskAttempt"
RECORD_FORMAT = "recordFormat"
PAYLOAD = "payload"
REDACTED_FIELDS = "redactedFields"
RECORD_BASE64 = "recordBase64"  # the bytes of a record that is not UTF-8
RECORD_BYTES = "recordBytes"  # the true size of a record too large, of which record is the start

# --- reasons -----------------------------------------------------------------------------
PARSE = "parse"
CAST = "cast"
NULL = "null"
KEY = "key"
PARTITION = "partition"
CHECK_REASON = "check"
EXCEPTION = "exception"
ENCODING = "encoding"  # bytes that are not UTF-8
SIZE = "size"  # a record larger than the size limit
REASONS = (PARSE, ENCODING, SIZE, CAST, NULL, KEY, PARTITION, CHECK_REASON, EXCEPTION)

HEADLINE_MAX_CHARS = 2000

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   r"[0-9a-fA-F]{12}\b")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s+")


def normalise(message: str) -> str:
    """A message with its variable parts replaced, for grouping: uuids, quoted values,
    hex addresses and numbers become placeholders."""
    text = _UUID.sub("<uuid>", message)
    text = _QUOTED.sub("<str>", text)
    text = _HEX.sub("<hex>", text)
    text = _NUMBER.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:500]


@functools.lru_cache(maxsize=4096)
def fingerprint(reason: str, detail: str) -> str:
    """A stable 16-hex-digit hash of a reason and its detail (check name, column names,
    or "ExceptionClass: normalised message")."""
    return hashlib.sha1(f"{reason}\x1f{detail}".encode()).hexdigest()[:16]


def exception_detail(error_class: str, message: str) -> str:
    return f"{error_class}: {normalise(message)}"


def now_ts() -> str:
    """`ts`: the unix time in seconds, with milliseconds."""
    return f"{time.time():.3f}"


def cap_trace(trace: str, max_chars: int) -> str:
    """The last `max_chars` characters of a stack trace (Python prints the innermost frame
    last), with a note of how much was dropped."""
    if max_chars <= 0 or not trace:
        return ""
    if len(trace) <= max_chars:
        return trace
    return f"... [{len(trace) - max_chars} chars of stack trace dropped] ...\n" + \
        trace[-max_chars:]


def format_message(error_class: str, text: str, trace: str | None, max_trace_chars: int
                   ) -> str:
    """`message`: "Class: text", then the capped stack trace on the following lines."""
    headline = f"{error_class}: {text}" if text else error_class
    if len(headline) > HEADLINE_MAX_CHARS:
        headline = headline[:HEADLINE_MAX_CHARS] + \
            f" ... [{len(headline) - HEADLINE_MAX_CHARS} chars dropped]"
    capped = cap_trace(trace or "", max_trace_chars)
    return f"{headline}\n{capped}" if capped else headline


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


_ENCODER = json.JSONEncoder(default=_json_default, ensure_ascii=False, separators=(",", ":"))


def to_json(value: Any) -> str:
    return _ENCODER.encode(value)


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


class UidSource:
    """Error record uids: UUID-4-shaped strings, 74 random bits per source and a 48-bit
    counter, so each is unique without a urandom call per record. A copy made by pickling
    (a Spark task's closure) or by fork draws its own random bits."""

    def __init__(self) -> None:
        self._reset()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        h = os.urandom(10).hex()
        variant = "89ab"[int(h[16], 16) & 3]
        self._prefix = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-"
        self._next = 0

    def many(self, k: int) -> list[str]:
        """k uids at once (the same as k calls)."""
        if self._next + k > 1 << 48 or self._pid != os.getpid():
            self._reset()
        first, prefix = self._next, self._prefix
        self._next = first + k
        return [f"{prefix}{n:012x}" for n in range(first, first + k)]

    def array(self, k: int) -> pa.Array:
        """:meth:`many` as an Arrow array, made on the whole column (no string per uid)."""
        if self._next + k > 1 << 48 or self._pid != os.getpid():
            self._reset()
        first = self._next
        self._next = first + k
        counters = np.arange(first, first + k, dtype=np.uint64)
        shifts = np.arange(44, -4, -4, dtype=np.uint64)  # 12 hex digits, the highest first
        digits = _HEX_DIGITS[(counters[:, None] >> shifts) & np.uint64(0xF)]
        prefix = np.frombuffer(self._prefix.encode("ascii"), np.uint8)
        width = len(prefix) + 12
        data = np.empty((k, width), np.uint8)
        data[:, :len(prefix)] = prefix
        data[:, len(prefix):] = digits
        offsets = np.arange(0, width * (k + 1), width, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), k, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data.tobytes())])

    def __call__(self) -> str:
        if self._next >= 1 << 48 or self._pid != os.getpid():
            self._reset()
        n = self._next
        self._next = n + 1
        return f"{self._prefix}{n:012x}"


@dataclass(frozen=True)
class CaptureContext:
    """What is known about where records come from; copied into every error's context."""

    commit_time: str | None = None
    table_name: str | None = None
    table_path: str | None = None
    task_attempt: str | None = None
    source_file: str | None = None
    first_line: int | None = None
    first_offset: int | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, value: CaptureContext | Mapping[str, Any] | None) -> CaptureContext:
        if value is None:
            return cls()
        if isinstance(value, CaptureContext):
            return value
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        kwargs = {k: v for k, v in value.items() if k in known}
        extra = {str(k): str(v) for k, v in value.items() if k not in known and v is not None}
        extra.update({str(k): str(v) for k, v in dict(value.get("extra") or {}).items()})
        return cls(**kwargs, extra=extra)

    def base(self) -> dict[str, str]:
        """The context entries shared by every error of a batch."""
        base = {k: str(v) for k, v in self.extra.items()}
        for key, value in ((COMMIT_TIME, self.commit_time), (TABLE_NAME, self.table_name),
                           (TABLE_PATH, self.table_path), (TASK_ATTEMPT, self.task_attempt),
                           (SOURCE_FILE, self.source_file)):
            if value is not None:
                base[key] = str(value)
        return base


class RecordBuilder:
    """Builds ErrorRecord dicts under one configuration (payload and message policy)."""

    def __init__(self, config: ErrorTableConfig | None = None) -> None:
        self.config = config or ErrorTableConfig()
        # Every key a redacted path names, as key_name spells it: a message about a column
        # of these may quote a protected value (paths match at any depth).
        self._redact_names = {key_name(part) for p in self.config.redact
                              for part in p.split(".")}
        self.uid = UidSource()
        self._plain = not self.config.drop_payload and not self.config.redact

    def payload(self, record: Any, secrets: Sequence[str] = ()
                ) -> tuple[str | None, dict[str, str]]:
        """(`record` column, extra context) for an original record under the PII policy;
        `secrets` (the record's protected values) are swept out of the fields kept."""
        if record is None:
            return None, {}
        if self.config.drop_payload:
            return None, {PAYLOAD: "dropped"}
        if isinstance(record, str):
            if self.config.redact:
                return None, {PAYLOAD: "dropped: raw text cannot be redacted"}
            return to_json(record), {RECORD_FORMAT: "raw"}
        if self.config.redact:
            kept = sweep_value(redact(record, self.config.redact), list(secrets))
            return to_json(kept), {PAYLOAD: "redacted"}
        return to_json(record), {}

    def _protect_context(self, context: dict[str, str]) -> None:
        """Redact the record key and partition values in `context` when their fields are
        redacted (they are copies of payload values)."""
        paths = self.config.redact
        if not paths:
            return
        key_field = context.get(RECORD_KEY_FIELD)
        if RECORD_KEY in context and (key_field is None or names_field(paths, key_field)):
            context[RECORD_KEY] = REDACTED
        path = context.get(PARTITION_PATH)
        if path:
            parts = []
            for part in path.split("/"):
                name, sep, _ = part.partition("=")
                hidden = not sep or names_field(paths, name)
                parts.append(f"{name}={REDACTED}" if hidden and sep else
                             REDACTED if hidden else part)
            context[PARTITION_PATH] = "/".join(parts)

    def touches_pii(self, columns: Iterable[str] = ()) -> bool:
        """Whether a message about these columns may quote a protected value."""
        names = self._redact_names
        return self.config.drop_payload or "*" in names or \
            any(key_name(c) in names for c in columns)

    def covers(self, columns: Sequence[str], record: Any = None) -> bool:
        """Whether the PII policy covers a failure's message: it is about a protected
        column, or about no column in particular (an exception, a check, a line that did
        not parse), or its record is raw text (which cannot be redacted)."""
        if self._plain:
            return False
        return not columns or isinstance(record, str) or self.touches_pii(columns)

    def secrets(self, record: Any) -> list[str]:
        """The protected values of `record` (see errortable.capture.pii.sweep)."""
        if self._plain:
            return []
        return secrets_of(record, None if self.config.drop_payload or isinstance(record, str)
                          else self.config.redact)

    def _sweep_context(self, context: dict[str, str], secrets: list[str]) -> None:
        """Sweep protected values out of the context entries that may copy record data.
        Under payload.drop alone the record key and the partition values stay (they name
        the record; docs/ERROR_TABLE.md), but another field's value inside them does not."""
        own: dict[str, set[str]] = {}
        if self.config.drop_payload and not self.config.redact:
            own[RECORD_KEY] = {context.get(RECORD_KEY) or ""}
            own[PARTITION_PATH] = {part.partition("=")[2] for part in
                                   (context.get(PARTITION_PATH) or "").split("/")}
        for key, value in context.items():
            if key in GENERATED_KEYS or not isinstance(value, str):
                continue
            mine = own.get(key)
            context[key] = sweep(value, [s for s in secrets if s not in mine] if mine
                                 else secrets)

    def build(self, *, reason: str, detail: str, error_class: str, text: str,
              record: Any = None, schema: str | None = None, trace: str | None = None,
              context: Mapping[str, str] | None = None, columns: Iterable[str] = (),
              ts: str | None = None, safe_text: str | None = None,
              safe_trace: str | None = None) -> dict[str, Any]:
        """One ErrorRecord. `detail` is what the fingerprint groups by besides the reason
        (a check name, column names, or `exception_detail(...)`); `ts` defaults to now.

        `safe_text` and `safe_trace` are what `message` holds instead of `text` and `trace`
        when the PII policy covers the failure (see :meth:`covers`): text built from parts
        that hold no record data. None stores none (the error class, marked withheld)."""
        columns = list(columns)
        ctx = dict(context) if context else {}
        secrets: list[str] = []
        if self._plain:
            payload = None if record is None else to_json(record)
            if isinstance(record, str):
                ctx[RECORD_FORMAT] = "raw"
        else:
            if self.covers(columns, record):
                text, trace = (safe_text if safe_text is not None else WITHHELD), safe_trace
            secrets = self.secrets(record)
            text = sweep(text, secrets)
            trace = sweep(trace, secrets) if trace else trace
            payload, extra = self.payload(record, secrets)
            ctx.update(extra)
        ctx[REASON] = reason
        ctx[ERROR_CLASS] = error_class
        ctx[FINGERPRINT] = fingerprint(reason, detail)
        if columns and COLUMN not in ctx:
            ctx[COLUMN] = ",".join(columns)
        if self.config.redact:
            self._protect_context(ctx)
            ctx[REDACTED_FIELDS] = ",".join(self.config.redact)
        if not self._plain:
            self._sweep_context(ctx, secrets)
        return {
            "uid": self.uid(),
            "ts": ts or now_ts(),
            "schema": schema,
            "record": payload,
            "message": format_message(error_class, text, trace, self.config.stacktrace_max_chars),
            "context": ctx,
        }

    @property
    def protects(self) -> bool:
        return self.config.drop_payload or bool(self.config.redact)

    def protect(self, row: dict[str, Any]) -> dict[str, Any]:
        """Apply the PII policy to an error record built elsewhere (by a builder with another
        configuration, say), so the stored rows follow the error table's policy. Rows the
        policy already handled are returned as they are. A message the policy covers is
        replaced by its error class, marked withheld (its text cannot be told apart from
        the data it may quote)."""
        context = row.get("context") or {}
        if not self.protects or self._handled(context):
            return row
        payload = row.get("record")
        original: Any = None
        if payload is not None:
            try:
                original = json.loads(payload)
            except ValueError:
                original = payload
        secrets = self.secrets(original)
        stored, extra = self.payload(original, secrets)
        columns = [c for c in str(context.get(COLUMN) or "").split(",") if c]
        message = row.get("message")
        if message and self.covers(columns, original):
            name = str(context.get(ERROR_CLASS) or "")
            message = f"{name if _CLASS_NAME.match(name) else 'Error'}: {WITHHELD}"
        context = {**context, **extra}
        context.pop(RECORD_BASE64, None)  # the bytes of a record are its payload too
        self._protect_context(context)
        if self.config.redact:
            done = [f for f in str(context.get(REDACTED_FIELDS) or "").split(",") if f]
            context[REDACTED_FIELDS] = ",".join(dict.fromkeys(done + list(self.config.redact)))
        self._sweep_context(context, secrets)
        message = sweep(message, secrets) if message else message
        return {**row, "record": stored, "message": message, "context": context}

    def _handled(self, context: Mapping[str, str]) -> bool:
        """Whether a row's context says this policy was applied already."""
        if str(context.get(PAYLOAD) or "").startswith("dropped"):
            return True
        if self.config.drop_payload:
            return False
        done = set(str(context.get(REDACTED_FIELDS) or "").split(","))
        return set(self.config.redact) <= done

    def from_exception(self, exc: BaseException, *, reason: str = EXCEPTION, record: Any = None,
                       schema: str | None = None, context: Mapping[str, str] | None = None,
                       detail: str | None = None) -> dict[str, Any]:
        """One ErrorRecord for an exception raised while handling `record` (for write paths
        that catch their own failures); the stack trace comes from the exception. Under a
        PII policy the message keeps the exception's class and frames, not its text."""
        error_class = type(exc).__name__
        text = str(exc)
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) \
            if exc.__traceback__ is not None else None
        safe = safe_exception_text(exc)
        if self.protects:  # the fingerprint groups by text that holds no record data
            detail = detail or exception_detail(error_class, safe or "")
        return self.build(reason=reason, detail=detail or exception_detail(error_class, text),
                          error_class=error_class, text=text, record=record, schema=schema,
                          trace=trace, context=context, safe_text=safe,
                          safe_trace=frames_only(exc) if trace else None)


# Context entries the builder writes itself (names, counts, hashes: no record data).
GENERATED_KEYS = frozenset({REASON, ERROR_CLASS, FINGERPRINT, COLUMN, CHECK, FAILED_CHECKS,
                             SOURCE_LINE, SOURCE_OFFSET, PAYLOAD, REDACTED_FIELDS,
                             RECORD_FORMAT, RECORD_KEY_FIELD, COMMIT_TIME, TASK_ATTEMPT})
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,200}$")
