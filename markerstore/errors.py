"""Every error markerstore raises, in one tree.

    MarkerStoreError
    ├── ConfigError (ValueError)             unknown option key, bad option value
    │   ├── SchemaError                      a schema (DDL, Avro) cannot be read or mapped
    │   └── TableFormatError                 a table format (Delta, Iceberg) cannot take a
    │                                        write: a type, a schema or partitioning change,
    │                                        an Iceberg identifier or catalog property;
    │                                        refused when the write starts
    ├── TableNotFoundError (LookupError)     no markerstore table at the path given
    ├── SqlRefusedError (ValueError)         the SQL sandbox refused a query
    ├── SqlLimitError                        a sandboxed query passed its time or memory limit
    ├── SqlInterruptedError                  a query was interrupted (Ctrl-C)
    ├── StorageError (OSError)               a storage request failed after its retries
    ├── InvalidMarkerError (ValueError)      a marker name, partition, file or IO type is bad
    ├── MarkerTypeError                      MARKERS.type is missing, empty or unexpected
    ├── MarkerServerError                    the marker server failed a request or is unreachable
    │   ├── MarkerServerUnreachableError     no answer after the retries or the connect timeout;
    │   │                                    names the address and what decides it
    │   └── MarkerConflictError              early conflict detection: another inflight
    │                                        instant writes the same file id and partition
    ├── TimelineError                        a timeline operation is not allowed
    │   ├── InstantNotFoundError (LookupError)
    │   ├── CommitConflictError              another writer completed or rolled back this instant
    │   ├── InstantCompletedError            rollback of a completed instant
    │   └── HeartbeatAliveError              rollback of an inflight instant whose writer is alive
    ├── ReconcileError                       deleting an invalid file failed: the commit must fail
    ├── CorruptTableError (ValueError)       a file of the table's own state (segment, marker,
    │                                        plan, commit metadata, record) is malformed or
    │                                        names a path outside the table; names the file
    ├── WriteConflictError                   conflict mode `fail` found existing data, or a
    │                                        concurrent write claims the same partitions
    ├── WriteAbortedError                    a write failed (Spark job or job commit) and was
    │                                        rolled back; the cause is chained
    ├── ErrorBudgetExceeded                  a write's error rows exceeded the error budget;
    │                                        it was rolled back, data and error rows alike
    ├── ForeignCommitError                   a table format holds a version or snapshot
    │                                        another tool wrote: refused at write start
    └── ErrorTableError                      an error table cannot be used as asked
        ├── NotAnErrorTableError (LookupError)   the path holds no error table
        └── CorruptErrorFileError (ValueError)   an error file cannot be read (names the file)

Errors that fit a built-in also subclass it, so `except ValueError` keeps working.
"""

from __future__ import annotations


class MarkerStoreError(Exception):
    """Base of every markerstore error."""


class ConfigError(MarkerStoreError, ValueError):
    """An option key is unknown or its value cannot be parsed."""


class SchemaError(ConfigError):
    """A schema (an ingest DDL string, an Avro schema) cannot be understood, or one of its
    Avro types has no Arrow type in `markerstore.arrow_avro`; names the part that is wrong."""


class TableFormatError(ConfigError):
    """A table format the table publishes (Delta, Iceberg) cannot take this write: a column
    type it has no equivalent for, a type change it does not allow as a widening, other
    partition columns, a bad Iceberg identifier or catalog property, an identifier another
    table holds. Raised when the write starts, before anything is written; names the
    format, the column or key, and what it can take."""


class TableNotFoundError(MarkerStoreError, LookupError):
    """There is no markerstore table (no `.markerstore` folder) at the path given, or the
    path is a regular file."""


class SqlRefusedError(MarkerStoreError, ValueError):
    """The SQL sandbox refused a query: not one read-only statement (COPY, ATTACH, EXPORT,
    INSTALL, LOAD, PRAGMA, SET, CREATE, ...), or empty."""


class SqlLimitError(MarkerStoreError):
    """A query in the SQL sandbox ran past its time limit or its memory limit."""


class SqlInterruptedError(MarkerStoreError):
    """A query was interrupted (Ctrl-C)."""


class StorageError(MarkerStoreError, OSError):
    """A storage request failed (after retries, where the failure was transient)."""


class InvalidMarkerError(MarkerStoreError, ValueError):
    """A marker name, partition path, file name or IO type is not valid."""


class MarkerTypeError(MarkerStoreError):
    """The MARKERS.type file of a marker folder is missing, empty, unreadable or unexpected."""


class MarkerServerError(MarkerStoreError):
    """The marker server failed a request or cannot be reached."""


class MarkerServerUnreachableError(MarkerServerError):
    """No answer from the marker server (refused, reset, timed out) after the retries, or
    no connection within the connect timeout."""


class MarkerConflictError(MarkerServerError):
    """Early conflict detection refused a marker: another inflight instant is writing a file
    with the same file id in the same partition."""


class TimelineError(MarkerStoreError):
    """A timeline operation is not allowed in the instant's current state."""


class InstantNotFoundError(TimelineError, LookupError):
    """No such instant on the table's timeline."""


class CommitConflictError(TimelineError):
    """Another writer completed or rolled back this instant first."""


class InstantCompletedError(TimelineError):
    """The instant is completed; completed instants are never rolled back."""


class HeartbeatAliveError(TimelineError):
    """The instant is inflight and its writer's heartbeat is still alive."""


class ReconcileError(MarkerStoreError):
    """An invalid data file could not be deleted, so the commit must not complete."""


class CorruptTableError(MarkerStoreError, ValueError):
    """A file of the table's own state is malformed: it fails its schema, or names a path
    that is not a valid table-relative path (absolute, ``..``, a scheme, ...), or a delete
    would follow a symbolic link out of the table. `file` names the file, `entry` what is
    wrong in it. The operation that read it did nothing (in particular deleted nothing)."""

    def __init__(self, file: str, entry: str) -> None:
        super().__init__(f"corrupt table state in {file}: {entry}")
        self.file = file
        self.entry = entry

    def __reduce__(self) -> tuple[type[CorruptTableError], tuple[str, str]]:
        return (type(self), (self.file, self.entry))


class SnapshotError(MarkerStoreError, LookupError):
    """The asked-for snapshot does not exist (any more)."""


class SourceError(ConfigError):
    """The ingest source is missing, empty of data files, or of an unknown format."""


class IcebergPublishError(MarkerStoreError):
    """A commit cannot become an Iceberg snapshot (a partition value that does not fit its
    column, a file whose columns the table does not have, a table whose partitioning or
    files differ from markerstore's); names what is wrong."""


class IcebergTableTaken(TableFormatError, IcebergPublishError):
    """The table's Iceberg identifier names another table (at another location) in the
    catalog: refused when a write starts."""


class WriteConflictError(MarkerStoreError):
    """Conflict mode `fail` found data already present where this write would go, or a
    concurrent write in mode fail or replace claims the same partitions."""


class WriteAbortedError(MarkerStoreError):
    """A write failed in its Spark job or its job commit and was rolled back."""


class ErrorBudgetExceeded(MarkerStoreError):
    """A write's error rows exceeded the error budget (max_fraction / max_records); the
    write was rolled back, data and error rows alike. Carries the counts."""

    def __init__(self, message: str, *, rows_in: int = 0,
                 error_records: dict[str, int] | None = None,
                 commonest_message: str | None = None) -> None:
        super().__init__(message)
        self.rows_in = rows_in
        self.error_records = dict(error_records or {})
        self.commonest_message = commonest_message


class ForeignCommitError(MarkerStoreError):
    """A table format (Delta, Iceberg) holds a version or snapshot that another tool wrote
    after markerstore's last one: a write refuses to start, so that nothing is published
    over it (`markerstore verify --repair` publishes one that restores the timeline's
    files)."""


class ErrorTableError(MarkerStoreError):
    """An error table (errortable package) cannot be used as asked."""


class NotAnErrorTableError(ErrorTableError, LookupError):
    """The path holds no error table (no timeline, no error instants)."""


class CorruptErrorFileError(ErrorTableError, ValueError):
    """An error file cannot be read or does not hold ErrorRecord rows; names the file."""
