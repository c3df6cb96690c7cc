"""Schema evolution of a Delta table, as the Delta protocol defines it.

A commit whose columns differ from the table's (a new column, a column that now holds
nulls, a column its files lack) needs a ``metaData`` action with the new schema in the
same version as its files, so that every reader of that version sees the columns its
files hold. Nullability is only ever widened; a new column is nullable (the rows before
it hold none). A column whose type changes is refused when the write starts: Delta's
``typeWidening`` is a table feature delta-rs does not write (:func:`plan_schema` raises).

Every version after the table's first is written here as the protocol lays it out
(delta-rs's transaction API writes ``metaData`` only with an overwrite of whole partitions,
and loads every live file first): ``_delta_log/<version>.json``, created if absent (the
put-if-absent delta-rs itself uses: ``If-None-Match`` on S3, an exclusive create on disk),
holding what delta-rs writes (``commitInfo`` with markerstore's keys, the ``txn`` of the
instant, ``add`` and ``remove`` with the paths encoded as delta-rs encodes them) and,
where the schema changes, the ``metaData``, with a ``protocol`` where a new column's type
needs a table feature (``timestampNtz``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from markerstore.errors import TableFormatError
from markerstore.formats.base import CommitToPublish
from markerstore.formats.delta_state import version_file
from markerstore.storage import Storage

CHECKPOINT_INTERVAL_KEY = "delta.checkpointInterval"
CHECKPOINT_INTERVAL_DEFAULT = 100  # delta-rs's default, where the table sets none
NTZ_FEATURE = "timestampNtz"
# Writer features a legacy writer version implies (the Delta protocol's table of them).
_LEGACY_WRITER_FEATURES = {2: ["appendOnly", "invariants"], 3: ["checkConstraints"],
                           4: ["changeDataFeed", "generatedColumns"], 5: ["columnMapping"],
                           6: ["identityColumns"]}
# What delta-rs percent-encodes in a log path (its serde_path INVALID set, besides
# control characters and every byte beyond ASCII): so a path reads back as the same key.
_PATH_ESCAPED = frozenset(' \\{^}%`]">[<#|*?\r\n')


def delta_type_json(field: pa.Field) -> Any:
    """The Delta type (its JSON form) of an Arrow column; TableFormatError when Delta has
    none for it."""
    from deltalake import Schema

    try:
        schema = json.loads(Schema.from_arrow(pa.schema([field.remove_metadata()])).to_json())
    except Exception as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        reason = first.rpartition("Schema error: ")[2].strip()[:160]
        raise TableFormatError(f"Delta Lake cannot hold column {field.name!r} of type "
                               f"{field.type}: {reason}") from None
    return schema["fields"][0]


def _loose(data_type: Any) -> Any:
    """A Delta type without its nullability: what a widening may not change."""
    if not isinstance(data_type, dict):
        return data_type
    kind = data_type.get("type")
    if kind == "array":
        return ("array", _loose(data_type["elementType"]))
    if kind == "map":
        return ("map", _loose(data_type["keyType"]), _loose(data_type["valueType"]))
    if kind == "struct":
        return ("struct", tuple((f["name"], _loose(f["type"])) for f in data_type["fields"]))
    return json.dumps(data_type, sort_keys=True)


def _widen(old: Any, new: Any) -> Any:
    """`old` (a Delta type) with every nullability `new` allows too."""
    if not isinstance(old, dict):
        return old
    kind = old.get("type")
    if kind == "array":
        return {**old, "elementType": _widen(old["elementType"], new["elementType"]),
                "containsNull": bool(old["containsNull"] or new["containsNull"])}
    if kind == "map":
        return {**old, "keyType": _widen(old["keyType"], new["keyType"]),
                "valueType": _widen(old["valueType"], new["valueType"]),
                "valueContainsNull": bool(old["valueContainsNull"]
                                          or new["valueContainsNull"])}
    if kind == "struct":
        theirs = {f["name"]: f for f in new["fields"]}
        return {**old, "fields": [_widen_field(f, theirs[f["name"]]) for f in old["fields"]]}
    return old


def _widen_field(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {**old, "type": _widen(old["type"], new["type"]),
            "nullable": bool(old["nullable"] or new["nullable"])}


def _shown(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else str(data_type.get("type"))


def plan_schema(existing: Mapping[str, Any], schema: pa.Schema, *, has_files: bool = True
                ) -> dict[str, Any] | None:
    """The Delta schema (JSON) a table with schema `existing` needs to take files of
    `schema`: new columns added (nullable), nullability widened (a column these files lack
    holds nulls in their rows); None when `existing` takes them as it is. TableFormatError
    for a column whose type changes."""
    theirs = {f.name: delta_type_json(f) for f in schema}
    fields = []
    for field in existing["fields"]:
        new = theirs.pop(field["name"], None)
        if new is None:
            fields.append({**field, "nullable": True} if has_files else field)
            continue
        if _loose(field["type"]) != _loose(new["type"]):
            raise TableFormatError(
                f"column {field['name']!r} is {_shown(new['type'])} in this write but "
                f"{_shown(field['type'])} in the Delta table: Delta Lake does not change a "
                "column's type (write it as the table has it)")
        fields.append(_widen_field(field, new))
    fields += [{**new, "nullable": True} for new in theirs.values()]
    merged = {**existing, "fields": fields}
    return None if merged == dict(existing) else merged


def encode_path(path: str) -> str:
    """A table-relative path as delta-rs writes it in the log."""
    return "".join(urllib.parse.quote(c, safe="") if c in _PATH_ESCAPED or ord(c) < 0x20
                   or ord(c) >= 0x7F else c for c in path)


def _needs_ntz(schema: Mapping[str, Any]) -> bool:
    return '"timestamp_ntz"' in json.dumps(schema)


def protocol_action(protocol: Any, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``protocol`` action a table of `schema` needs beyond `protocol` (a TIMESTAMP_NTZ
    column: the ``timestampNtz`` reader and writer feature), or None."""
    readers = list(protocol.reader_features or [])
    writers = list(protocol.writer_features or [])
    if not _needs_ntz(schema) or NTZ_FEATURE in writers:
        return None
    if protocol.min_writer_version < 7:  # legacy versions: their features, listed
        writers = [f for version, names in sorted(_LEGACY_WRITER_FEATURES.items())
                   if version <= protocol.min_writer_version for f in names]
    if protocol.min_reader_version >= 2 and "columnMapping" not in readers:
        readers.append("columnMapping")
    return {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                         "readerFeatures": sorted({*readers, NTZ_FEATURE}),
                         "writerFeatures": sorted({*writers, NTZ_FEATURE})}}


def metadata_actions(metadata: Any, protocol: Any, schema: Mapping[str, Any]
                     ) -> list[dict[str, Any]]:
    """The ``metaData`` action giving the table `schema` (with the ``protocol`` action its
    types need, where they need one)."""
    upgrade = protocol_action(protocol, schema)
    return [*([upgrade] if upgrade is not None else []), {"metaData": {
        "id": metadata.id, "name": metadata.name, "description": metadata.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema, separators=(",", ":")),
        "partitionColumns": list(metadata.partition_columns),
        "createdTime": metadata.created_time,
        "configuration": dict(metadata.configuration)}}]


def version_actions(commit: CommitToPublish, metadata: Any, protocol: Any,
                    schema: Mapping[str, Any] | None, stats: Mapping[str, str],
                    properties: Mapping[str, str], app_id: str,
                    partition_values: Callable[[Mapping[str, str | None]], Any] = dict
                    ) -> list[dict[str, Any]]:
    """The actions of one version publishing `commit`, with the table's new `schema`
    where it changes (None: it does not; `stats`: each added file's statistics as JSON
    text; `partition_values`: a file's folder values as Delta keeps them)."""
    now = int(time.time() * 1000)
    partition_by = list(metadata.partition_columns)
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": now, "operation": "WRITE",
                        "operationParameters": {"mode": "Append",
                                                "partitionBy": json.dumps(partition_by)},
                        "engineInfo": "markerstore", **properties}},
        {"txn": {"appId": app_id, "version": 1, "lastUpdated": now}}]
    if schema is not None:
        actions += metadata_actions(metadata, protocol, schema)
    actions += [{"add": {"path": encode_path(f.path),
                         "partitionValues": partition_values(f.partition),
                         "size": f.size, "modificationTime": now, "dataChange": True,
                         "stats": stats.get(f.path) or json.dumps({"numRecords": f.rows})}}
                for f in commit.added]
    actions += [{"remove": {"path": encode_path(path), "deletionTimestamp": now,
                            "dataChange": True, "extendedFileMetadata": False,
                            "partitionValues":
                                partition_values(_folder_values(path, partition_by))}}
                for path in commit.removed]
    return actions


def _folder_values(path: str, partition_by: Sequence[str]) -> dict[str, str | None]:
    from markerstore.formats.commits import hive_partition

    values = hive_partition(path)
    return {c: values.get(c) for c in partition_by}


def write_version(storage: Storage, version: int, actions: list[dict[str, Any]]) -> bool:
    """Create ``_delta_log/<version>.json`` holding `actions`; False when another writer
    created that version first."""
    body = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    return storage.create_if_absent(version_file(storage, version), body.encode())


def checkpoint_interval(configuration: Mapping[str, str | None]) -> int:
    try:
        return max(1, int(configuration.get(CHECKPOINT_INTERVAL_KEY) or
                          CHECKPOINT_INTERVAL_DEFAULT))
    except ValueError:
        return CHECKPOINT_INTERVAL_DEFAULT


# Delta's table property by which a checkpoint drops the app transactions older than it
# (and readers ignore them): how markerstore tells which instants the table holds.
TXN_RETENTION_KEY = "delta.setTransactionRetentionDuration"
# How long the log's files are kept, and Delta's default.
LOG_RETENTION_KEY = "delta.logRetentionDuration"
LOG_RETENTION_DEFAULT_S = 30 * 86400
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s*([a-z]+?)s?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3,
                 "second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}


def interval_seconds(configuration: Mapping[str, str | None], key: str) -> float | None:
    """The seconds of the table property `key`, a Delta interval such as ``interval 7
    days``; None where it is not set."""
    text = configuration.get(key)
    if not text:
        return None
    match = _INTERVAL.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNIT_SECONDS:
        raise TableFormatError(f"the Delta table property {key} is {text!r}, not an "
                               "interval such as 'interval 7 days'")
    return int(match.group(1)) * _UNIT_SECONDS[unit]
