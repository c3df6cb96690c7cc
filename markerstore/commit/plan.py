"""The job commit plan: ``<base>/.markerstore/plans/<instant>.json``.

Job commit writes it in two phases:

``intent``
    (conflict modes fail and replace) the partitions this write is about to commit,
    written before the driver looks for conflicts, so that of two concurrent writers at
    least one sees the other;
``publish``
    every winning file with its staged form (pending upload), the files this commit
    replaces and the commit metadata, written after reconcile and before anything is
    published. From here on the write can be finished by anyone: recovery rolls it
    forward.

The plan is deleted once the instant is terminal and its cleanup (deleting replaced files,
the staging area) is done; a plan left behind by a completed instant marks cleanup that
recovery finishes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from markerstore.commit.s3 import bucket_key
from markerstore.commit.stats import FileStats
from markerstore.errors import CorruptTableError
from markerstore.paths import path_problem
from markerstore.storage import Storage
from markerstore.timeline import META_DIR, is_instant
from markerstore.timeline.checks import (
    check_count,
    check_file_entries,
    check_list,
    check_path,
    check_str,
)

PLANS_DIR = f"{META_DIR}/plans"
INTENT = "intent"
PUBLISH = "publish"


@dataclass
class CommitPlan:
    """What job commit is about to do."""

    instant: str
    write_uuid: str
    phase: str
    conflict_mode: str
    scopes: list[str]
    staging_mode: str
    files: list[FileStats] = field(default_factory=list)
    replaced_files: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        payload = {
            "instant": self.instant, "write_uuid": self.write_uuid, "phase": self.phase,
            "conflict_mode": self.conflict_mode, "scopes": self.scopes,
            "staging_mode": self.staging_mode,
            "files": [f.to_dict() for f in self.files],
            "replaced_files": self.replaced_files, "metadata": self.metadata,
            "written_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        }
        return json.dumps(payload, sort_keys=True, default=str).encode()

    @classmethod
    def from_json(cls, raw: bytes, where: str = "plan", instant: str | None = None
                  ) -> CommitPlan:
        """The plan in `raw`, checked against its schema; CorruptTableError naming
        `where` if it is malformed."""
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise CorruptTableError(where, f"the plan is not JSON: {exc}") from None
        check_plan(data, where, instant)
        return cls(data["instant"], data["write_uuid"], data["phase"],
                   data["conflict_mode"], list(data.get("scopes", [])),
                   data["staging_mode"],
                   [FileStats.from_dict(f) for f in data.get("files", [])],
                   list(data.get("replaced_files", [])), dict(data.get("metadata", {})))


_CHOICES = {"phase": (INTENT, PUBLISH), "conflict_mode": ("fail", "append", "replace"),
            "staging_mode": ("multipart", "rename", "none")}


def check_plan(data: Any, where: str, instant: str | None = None) -> None:
    """A plan's schema: its fields, their types and ranges, and valid table-relative
    paths in `files`, `replaced_files` and `scopes`."""
    if not isinstance(data, dict):
        raise CorruptTableError(where, f"the plan must be a JSON object, got "
                                       f"{type(data).__name__}")
    if not isinstance(data.get("instant"), str) or not is_instant(data["instant"]) or \
            (instant is not None and data["instant"] != instant):
        raise CorruptTableError(where, f"'instant' must be {instant or 'an instant id'}, got "
                                       f"{data.get('instant')!r:.80}")
    check_str(data.get("write_uuid"), "write_uuid", where, optional=False)
    for key, choices in _CHOICES.items():
        if data.get(key) not in choices:
            raise CorruptTableError(where, f"{key!r} must be one of {', '.join(choices)}, "
                                           f"got {data.get(key)!r:.80}")
    for i, scope in enumerate(check_list(data.get("scopes", []), "scopes", where)):
        if path_problem(scope, allow_empty=True) is not None:
            check_path(scope, f"scopes[{i}]", where)
    check_file_entries(data.get("files", []), "files", where)
    for i, entry in enumerate(data.get("files", [])):
        check_count(entry.get("rows"), f"files[{i}].rows", where, optional=False)
        check_count(entry.get("bytes"), f"files[{i}].bytes", where, optional=False)
        for key in ("spark_partition", "task_attempt_id"):
            check_count(entry.get(key), f"files[{i}].{key}", where)
        _check_pending(entry.get("pending_upload"), f"files[{i}].pending_upload", where)
    for i, path in enumerate(check_list(data.get("replaced_files", []), "replaced_files",
                                        where)):
        check_path(path, f"replaced_files[{i}]", where)
    if not isinstance(data.get("metadata", {}), dict):
        raise CorruptTableError(where, "'metadata' must be an object")


def _check_pending(value: Any, name: str, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise CorruptTableError(where, f"{name} must be an object")
    for key in ("bucket", "key", "upload_id"):
        check_str(value.get(key), f"{name}.{key}", where, optional=False)
    check_count(value.get("size"), f"{name}.size", where, optional=False)
    for part in check_list(value.get("parts"), f"{name}.parts", where):
        if not (isinstance(part, list) and len(part) == 2 and isinstance(part[1], str)):
            raise CorruptTableError(where, f"{name}.parts holds {part!r:.80}, not "
                                           "[number, etag]")
        check_count(part[0], f"{name}.parts number", where, optional=False)


def plan_path(storage: Storage, instant: str) -> str:
    return storage.path(PLANS_DIR, f"{instant}.json")


def write_plan(storage: Storage, plan: CommitPlan) -> None:
    """Write (or move to its next phase) the plan; atomic on every storage."""
    storage.put(plan_path(storage, plan.instant), plan.to_json())


def read_plan(storage: Storage, instant: str) -> CommitPlan | None:
    """The plan of an instant; None if it has none. A plan that fails its schema (or
    whose pending uploads are not at their files' keys) is a CorruptTableError naming
    it: nothing is rolled forward, replaced or deleted from it."""
    path = plan_path(storage, instant)
    try:
        raw = storage.get(path)
    except FileNotFoundError:
        return None
    plan = CommitPlan.from_json(raw, storage.url(path), instant)
    if storage.is_s3:
        for stats in plan.files:
            pending = stats.pending_upload
            if pending is not None and (pending.bucket, pending.key) != bucket_key(
                    storage, stats.path):
                raise CorruptTableError(storage.url(path), (
                    f"the pending upload of {stats.path!r} is at s3://{pending.bucket}/"
                    f"{pending.key}, not at that file's key"))
    return plan


def plan_instants(storage: Storage) -> list[str]:
    """Instants that have a plan (one LIST)."""
    names = storage.ls(storage.path(PLANS_DIR))
    return sorted(n[:-5] for n in names if n.endswith(".json") and is_instant(n[:-5]))


def delete_plan(storage: Storage, instant: str) -> None:
    storage.delete(plan_path(storage, instant))
