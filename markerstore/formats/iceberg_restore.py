"""What can go wrong with the Iceberg table of a markerstore table from outside, and the
snapshot that makes it hold the timeline's files again (a mixin of
:class:`markerstore.formats.iceberg.IcebergPublisher`).

* Another tool's snapshots (pyiceberg ``append``/``overwrite``, a compaction) after
  markerstore's last one: :meth:`IcebergRestore.foreign_commits` names them; a write
  refuses to publish over them, and repair publishes one overwrite snapshot that holds the
  timeline's files again (the other tool's files stay on storage, unreferenced).
* The catalog lost its entry (``catalog.db`` deleted) while ``metadata/`` holds the table's
  metadata: repair registers the latest metadata file again.
* The metadata is gone (``metadata/`` deleted), or the table folder moved (Iceberg's
  metadata holds absolute paths, so a moved table's metadata names its old place): repair
  drops the catalog's stale entry and creates the table anew from the timeline, one
  snapshot of the files as of the latest instant it can hold, the instants before it
  counted as held (``markerstore.expired-before``); the later instants follow as usual.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from typing import TYPE_CHECKING, Any

import fsspec
from pyiceberg.exceptions import NoSuchTableError

from markerstore.errors import IcebergPublishError
from markerstore.formats.base import APPEND, OVERWRITE, CommitToPublish
from markerstore.formats.iceberg_catalog import INSTANT_PROPERTY, METADATA_FOLDER, sqlite_file
from markerstore.formats.iceberg_files import live_files, relative

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

_METADATA_FILE = re.compile(r"^(\d+)-.*\.metadata\.json$")


class IcebergRestore:
    """The restore side of an Iceberg publisher (see the module's docstring)."""

    location: str
    identifier: str
    storage_options: dict[str, Any]
    catalog_properties: dict[str, str]
    held_before_property: str   # instants before it count as published

    if TYPE_CHECKING:
        @property
        def catalog(self) -> Catalog: ...

        def table(self) -> Table | None: ...

        def _create(self, commit: CommitToPublish) -> Table: ...

        def _commit(self, table: Table, commit: CommitToPublish) -> None: ...

    def foreign_commits(self) -> list[dict[str, Any]]:
        """The snapshots after markerstore's last one that name no instant (another tool's
        appends, overwrites, compactions), newest first: ``{"id": "snapshot 123", "what":
        "append"}``."""
        table = self.table()
        found: list[dict[str, Any]] = []
        snapshot = None if table is None else table.current_snapshot()
        while snapshot is not None and table is not None:
            summary = snapshot.summary
            if summary is not None and summary.get(INSTANT_PROPERTY):
                break
            operation = summary.operation.value if summary is not None else "a snapshot"
            found.append({"id": f"snapshot {snapshot.snapshot_id}", "what": operation})
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else table.metadata.snapshot_by_id(parent)
        return found

    def _metadata_files(self) -> list[tuple[int, str]]:
        """(version, full path) of the table's metadata files in ``metadata/``."""
        folder = f"{self.location}/{METADATA_FOLDER}"
        fs, path = fsspec.core.url_to_fs(folder, **self.storage_options)
        try:
            names = [p.rstrip("/").rpartition("/")[2] for p in fs.ls(path, detail=False)]
        except FileNotFoundError:
            return []
        return sorted((int(m.group(1)), f"{folder}/{n}") for n in names
                      if (m := _METADATA_FILE.match(n)))

    def _metadata_locations(self) -> list[tuple[str, str]]:
        """(metadata file, the table location it names) of ``metadata/``, newest first."""
        found = []
        for _, path in reversed(self._metadata_files()):
            fs, inner = fsspec.core.url_to_fs(path, **self.storage_options)
            try:
                with fs.open(inner, "rb") as handle:
                    found.append((path, str(json.load(handle).get("location", ""))))
            except (OSError, ValueError):
                continue
        return found

    def _latest_metadata(self) -> str | None:
        """The newest metadata file in ``metadata/`` that places the table here."""
        return next((path for path, location in self._metadata_locations()
                     if location.rstrip("/") == self.location), None)

    def _moved_from(self) -> str | None:
        """The location the newest metadata in ``metadata/`` names, where it is not here
        (the folder moved with its metadata)."""
        found = self._metadata_locations()
        moved = found[0][1].rstrip("/") if found else self.location
        return None if moved == self.location else moved

    def _embedded_catalog(self) -> bool:
        db = sqlite_file(self.catalog_properties)
        local = self.location.removeprefix("file://")
        return db is not None and os.path.abspath(db).startswith(local.rstrip("/") + "/")

    def problem(self, completed: list[str]) -> dict[str, str] | None:
        """What is lost of the Iceberg table (None: nothing): ``format_catalog_lost`` (the
        catalog has no entry, ``metadata/`` has the metadata), ``format_lost`` (no
        metadata, while the timeline has completed instants) or ``format_moved`` (its
        metadata names another place: the folder moved with its embedded catalog)."""
        try:
            table = self.table()
        except IcebergPublishError as exc:
            if not self._embedded_catalog():
                raise  # a shared catalog naming another table: not ours to change
            return {"kind": "format_moved", "path": METADATA_FOLDER + "/",
                    "detail": f"{exc}: the table folder moved (Iceberg's metadata holds "
                              "absolute paths)"}
        except (FileNotFoundError, OSError) as exc:
            moved = self._moved_from()
            if moved is not None:
                return {"kind": "format_moved", "path": METADATA_FOLDER + "/",
                        "detail": f"the table's metadata names {moved}, not "
                                  f"{self.location}: the table folder moved (Iceberg's "
                                  "metadata holds absolute paths)"}
            return {"kind": "format_lost", "path": METADATA_FOLDER + "/",
                    "detail": f"the catalog's entry {self.identifier} names metadata that "
                              f"is gone ({type(exc).__name__}: {exc})"}
        if table is not None or not completed:
            return None
        stale = self._stale_entries()
        if stale:
            return {"kind": "format_moved", "path": METADATA_FOLDER + "/",
                    "detail": f"the table's embedded catalog names {', '.join(stale)}, not "
                              f"{self.identifier}: the table folder moved (Iceberg's "
                              "metadata holds absolute paths)"}
        latest = self._latest_metadata()
        if latest is not None:
            return {"kind": "format_catalog_lost", "path": relative(latest, self.location)
                    or latest, "detail": f"the catalog has no table {self.identifier}, but "
                                         f"{METADATA_FOLDER}/ holds its metadata"}
        return {"kind": "format_lost", "path": METADATA_FOLDER + "/",
                "detail": f"the Iceberg table {self.identifier} is missing (its catalog "
                          f"entry and metadata deleted, or never published): it holds none "
                          f"of the {len(completed)} completed instant(s)"}

    def _stale_entries(self) -> list[str]:
        """The other tables of the table's embedded catalog (it belongs to this table
        alone: another is what the catalog knew the table as before it moved)."""
        db = sqlite_file(self.catalog_properties)
        if not self._embedded_catalog() or db is None or not os.path.exists(db):
            return []  # (opening a SQLite catalog that is not there would create it)
        return sorted(".".join(identifier) for namespace in self.catalog.list_namespaces()
                      for identifier in self.catalog.list_tables(namespace)
                      if ".".join(identifier) != self.identifier)

    def register(self) -> str:
        """Register the latest metadata file of ``metadata/`` in the catalog again."""
        latest = self._latest_metadata()
        if latest is None:
            raise IcebergPublishError(f"no metadata of {self.identifier} to register in "
                                      f"{self.location}/{METADATA_FOLDER}")
        namespace = self.identifier.rpartition(".")[0]
        if namespace:
            self.catalog.create_namespace_if_not_exists(namespace)
        self.catalog.register_table(self.identifier, latest)
        return f"registered {relative(latest, self.location) or latest}"

    def _drop_entry(self) -> None:
        """Remove the catalog's entry of the table, and the embedded catalog's stale ones
        (no file is deleted)."""
        for identifier in [self.identifier, *self._stale_entries()]:
            with contextlib.suppress(NoSuchTableError):
                self.catalog.drop_table(identifier)

    def restore(self, commit: CommitToPublish, instants: list[str]) -> str:
        """One snapshot that makes the Iceberg table hold exactly `commit.added` (the
        timeline's files as of `commit.instant`): the table created anew where it is lost
        or moved, with the instants before `commit.instant` as held; else another tool's
        files deleted and markerstore's appended. `instants`: the completed instants up to
        `commit.instant` (Delta records each; Iceberg counts those before it as held).
        Returns the snapshot."""
        del instants
        try:
            table = self.table()
        except (IcebergPublishError, OSError):
            table = None
        if table is None:
            self._drop_entry()
            table = self._create(dataclasses.replace(commit, mode=APPEND, removed=()))
            self._commit(table, dataclasses.replace(commit, mode=APPEND, removed=()))
            with table.transaction() as tx:
                tx.set_properties({self.held_before_property: commit.instant})
        else:
            live = {relative(p, self.location) for p in live_files(table.io, table.metadata)}
            wanted = {f.path for f in commit.added}
            foreign = sorted(p for p in live - wanted if p is not None)
            missing = tuple(f for f in commit.added if f.path not in live)
            self._commit(table, dataclasses.replace(commit, mode=OVERWRITE, added=missing,
                                                    removed=tuple(foreign)))
        current = (self.table() or table).current_snapshot()
        return f"snapshot {current.snapshot_id}" if current is not None else "a snapshot"
