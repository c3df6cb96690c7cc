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

from markerstore.commit.stats import FileStats
from markerstore.storage import Storage
from markerstore.timeline import META_DIR, is_instant

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
    def from_json(cls, raw: bytes) -> CommitPlan:
        data = json.loads(raw)
        return cls(str(data["instant"]), str(data["write_uuid"]), str(data["phase"]),
                   str(data["conflict_mode"]), list(data.get("scopes", [])),
                   str(data["staging_mode"]),
                   [FileStats.from_dict(f) for f in data.get("files", [])],
                   list(data.get("replaced_files", [])), dict(data.get("metadata", {})))


def plan_path(storage: Storage, instant: str) -> str:
    return storage.path(PLANS_DIR, f"{instant}.json")


def write_plan(storage: Storage, plan: CommitPlan) -> None:
    """Write (or move to its next phase) the plan; atomic on every storage."""
    storage.put(plan_path(storage, plan.instant), plan.to_json())


def read_plan(storage: Storage, instant: str) -> CommitPlan | None:
    """The plan of an instant; None if it has none. An unreadable plan counts as none:
    nothing is rolled forward from it (rolling back is always safe)."""
    try:
        return CommitPlan.from_json(storage.get(plan_path(storage, instant)))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        return None


def plan_instants(storage: Storage) -> list[str]:
    """Instants that have a plan (one LIST)."""
    names = storage.ls(storage.path(PLANS_DIR))
    return sorted(n[:-5] for n in names if n.endswith(".json") and is_instant(n[:-5]))


def delete_plan(storage: Storage, instant: str) -> None:
    storage.delete(plan_path(storage, instant))
